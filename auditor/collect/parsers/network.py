"""Network interfaces, ENA driver version and counters, driver trouble in the kernel log."""

from __future__ import annotations

import re
from typing import Any

from ..sections import TamperedOutput, blocks, to_int

# Kernel-log events worth counting (FIELD-NOTES §4), by fact name.
KERNEL_LOG_EVENTS: dict[str, re.Pattern[str]] = {
    "tx_queue_paused": re.compile(r"TX q \d+ is paused for too long"),
    "napi_not_called": re.compile(r"napi handler hasn.t been called"),
    "keep_alive_timeout": re.compile(r"Keep alive watchdog timeout"),
    "reset_triggered": re.compile(r"Trigger reset is on"),
    "reset_reason": re.compile(r"Reset the device"),  # `… is above the threshold (N > M). Reset the device`
    "reset_completed": re.compile(r"Device reset completed"),
    "netdev_watchdog": re.compile(r"NETDEV WATCHDOG"),
    # 3.10-5.0 `Out of memory: Kill process N (comm) score S or sacrifice child` (then a bare `Killed
    # process N …` line, not counted again); 5.1+ `Out of memory: Killed process N (comm) total-vm:…`;
    # memcg `Memory cgroup out of memory: Kill[ed] process …`; `Out of memory (oom_kill_allocating_task): …`
    "oom_kill": re.compile(r"[Oo]ut of memory(?: \([a-z_]+\))?: Kill(?:ed)? process"),
    "soft_lockup": re.compile(r"soft lockup"),
    "hung_task": re.compile(r"hung_task|blocked for more than"),
}


def _interface(header: str, lines: list[str]) -> dict[str, Any]:
    parts = header.split()
    attrs = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    info: dict[str, str] = {}
    stats: dict[str, int] = {}
    for line in lines:
        if line.startswith("info "):
            key, _, value = line[5:].partition(":")
            info[key.strip()] = value.strip()
        elif line.startswith("stat "):
            cols = line.split()
            if len(cols) == 3:
                count = to_int(cols[2])
                if count is not None:
                    stats[cols[1]] = count
    driver = info.get("driver") or (attrs.get("driver") if attrs.get("driver") != "none" else None)
    return {
        "name": parts[0],
        "driver": driver,
        "driver_version": info.get("version") or None,
        "firmware_version": info.get("firmware-version") or None,
        "operstate": attrs.get("operstate") or None,
        "mtu": to_int(attrs.get("mtu")),
        "stats": stats,
    }


def parse_kernel_log(text: str) -> dict[str, Any]:
    lines = [line for line in text.splitlines() if line.strip()]
    counts = {name: sum(1 for line in lines if pat.search(line)) for name, pat in KERNEL_LOG_EVENTS.items()}
    # One reset prints its reason (`… Reset the device`) and then `Trigger reset is on`; either may be all a
    # log kept (ring buffer, a pasted excerpt), so a reset counts once: the larger of the two tallies.
    reasons = counts.pop("reset_reason")
    counts["reset_triggered"] = max(counts["reset_triggered"], reasons)
    return {"events": counts, "lines": lines[-20:]}


def parse_network(text: str, kernel_log_text: str = "") -> dict[str, Any]:
    interfaces = [_interface(h, lines) for h, lines in blocks(text) if h]  # a bare `@ ` names no interface
    names = [i["name"] for i in interfaces]
    if len(set(names)) != len(names):  # the kernel keeps names unique and newline-free: only a forgery repeats one
        raise TamperedOutput("an interface appears twice")
    module_version = None
    for line in text.splitlines():
        if line.startswith("ena_module_version="):
            module_version = line.split("=", 1)[1].strip() or None
    ena = [i for i in interfaces if i["driver"] == "ena"]
    ena_version = module_version or next((i["driver_version"] for i in ena if i["driver_version"]), None)
    return {
        "interfaces": sorted(interfaces, key=lambda i: i["name"]),
        "ena": {
            "present": bool(ena) or module_version is not None,
            "version": ena_version,
            "out_of_tree": bool(ena_version and ena_version.endswith("g")),
        },
        "kernel_log": parse_kernel_log(kernel_log_text),
    }
