"""Network interfaces, ENA driver version and counters, driver trouble in the kernel log."""

from __future__ import annotations

import re

from ...facttypes import Network, NetworkInterfacesRow, NetworkKernelLog, NetworkKernelLogXidsRow
from ..sections import TamperedOutput, blocks, to_int

# Kernel-log events worth counting (FIELD-NOTES §4), by fact name.
KERNEL_LOG_EVENTS: dict[str, re.Pattern[str]] = {
    "tx_queue_paused": re.compile(r"TX q \d+ is paused for too long"),
    "napi_not_called": re.compile(r"napi handler hasn.t been called"),
    "keep_alive_timeout": re.compile(r"Keep alive watchdog timeout"),
    "reset_triggered": re.compile(r"Trigger reset is on"),
    # What makes the driver reset the device, each printed once per reset: the keep-alive watchdog, lost
    # TX completions over the threshold (`The number of lost tx completions is above the threshold (N > M).
    # Reset the device`, newer `Lost TX completions are above the threshold (N > M). … Resetting the device`)
    "reset_reason": re.compile(r"Reset the device|Resetting the device|lost tx completions is above the threshold"
                               r"|Lost TX completions are above the threshold|Keep alive watchdog timeout"),
    "reset_completed": re.compile(r"Device reset completed"),
    # one line per TX packet the driver found not completed in time (the count that trips the reset above)
    "tx_completion_missed": re.compile(r"Found a Tx that wasn.t completed on time"),
    "lost_tx_completions": re.compile(r"lost tx completions is above the threshold"
                                      r"|Lost TX completions are above the threshold"),
    # the admin queue did not answer (`ena_com_wait_and_process_admin_cq_polling: Wait for completion
    # (polling) timeout`, `… interrupts …`): the device is unresponsive
    "admin_queue_timeout": re.compile(r"ena_com_wait_and_process_admin_cq"),
    "netdev_watchdog": re.compile(r"NETDEV WATCHDOG"),
    # 3.10-5.0 `Out of memory: Kill process N (comm) score S or sacrifice child` (then a bare `Killed
    # process N …` line, not counted again); 5.1+ `Out of memory: Killed process N (comm) total-vm:…`;
    # memcg `Memory cgroup out of memory: Kill[ed] process …`; `Out of memory (oom_kill_allocating_task): …`
    "oom_kill": re.compile(r"[Oo]ut of memory(?: \([a-z_]+\))?: Kill(?:ed)? process"),
    "soft_lockup": re.compile(r"soft lockup"),
    "hung_task": re.compile(r"hung_task|blocked for more than"),
    # `nf_conntrack: table full, dropping packet` (older kernels print `nf_conntrack: nf_conntrack: table full`)
    "conntrack_table_full": re.compile(r"nf_conntrack: table full"),
    # `unregister_netdevice: waiting for eth0 to become free. Usage count = 1`: a netns teardown is stuck
    "unregister_netdevice_waiting": re.compile(r"unregister_netdevice: waiting for"),
    # `neighbour: arp_cache: neighbor table overflow!` (4.x+), `ipv4: Neighbour table overflow.` (older)
    "neighbor_table_overflow": re.compile(r"neighbou?r table overflow", re.IGNORECASE),
    # a cgroup's pids.max refused a fork (`cgroup: fork rejected by pids controller in /system.slice/x.service`)
    "pids_fork_rejected": re.compile(r"fork rejected by pids controller"),
    # the system-wide file handle table is full (`VFS: file-max limit N reached`)
    "file_max_reached": re.compile(r"VFS: file-max limit \d+ reached"),
    # filesystem failures: ext4 errors, the read-only remount that follows (errors=remount-ro), an XFS
    # shutdown (`XFS (dm-4): I/O Error Detected. Shutting down filesystem`), block-layer I/O errors
    "ext4_error": re.compile(r"EXT4-fs error"),
    "fs_remounted_read_only": re.compile(r"Remounting filesystem read-only"),
    "xfs_shutdown": re.compile(r"XFS .*Shutting down filesystem"),
    "buffer_io_error": re.compile(r"Buffer I/O error"),
    # NVIDIA driver errors: `NVRM: Xid (PCI:0000:3b:00): 79, pid=…, GPU has fallen off the bus.` (per code: xids)
    "xid": re.compile(r"NVRM: Xid \("),
    # `NVRM: GPU at PCI:0000:3b:00: GPU-… has fallen off the bus.` (with or without an Xid 79 line)
    "fallen_off_bus": re.compile(r"fallen off the bus"),
}
_XID = re.compile(r"NVRM: Xid \(([^)]{0,64})\): (\d{1,5})\b")


def _interface(header: str, lines: list[str]) -> NetworkInterfacesRow:
    parts = header.split()
    attrs = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    info: dict[str, str] = {}
    stats: dict[str, int] = {}
    failures: list[str] = []
    stats_available = True
    for line in lines:
        if line.startswith("failed="):  # the probe's ethtool for this interface failed
            failures.append(line[7:].strip())
        elif line in ("stats=unsupported", "ethtool=absent"):  # an answer: no counters to read
            stats_available = False
        elif line.startswith("info "):
            key, colon, value = line[5:].partition(":")
            if not colon and line[5:].strip():
                failures.append(f"ethtool -i printed {line[5:][:60]!r}, not `key: value`")
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
        "stats_available": stats_available and not failures,
        "error": "; ".join(failures)[:600] or None,
    }


def parse_kernel_log(text: str) -> NetworkKernelLog:
    lines = [line for line in text.splitlines() if line.strip()]
    counts = {name: sum(1 for line in lines if pat.search(line)) for name, pat in KERNEL_LOG_EVENTS.items()}
    # One reset prints its reason (`… Reset the device`, a keep-alive timeout), then `Trigger reset is on`,
    # then `Device reset completed`; any one may be all a log kept (ring buffer, a pasted excerpt), so a
    # reset counts once: the largest of the three tallies.
    reasons = counts.pop("reset_reason")
    counts["reset_triggered"] = max(counts["reset_triggered"], reasons, counts["reset_completed"])
    return {"events": counts, "lines": lines[-20:], "xids": _xids(lines)}


def _xids(lines: list[str]) -> list[NetworkKernelLogXidsRow]:
    """One row per Xid code: how many lines, on how many devices, and the last line."""
    counts: dict[int, int] = {}
    last: dict[int, str] = {}
    devices: dict[int, set[str]] = {}
    for line in lines:
        m = _XID.search(line)
        if m:
            code = int(m.group(2))
            counts[code] = counts.get(code, 0) + 1
            last[code] = line[:300]
            devices.setdefault(code, set()).add(m.group(1))
    return [{"code": c, "count": counts[c], "devices": len(devices[c]), "last": last[c]} for c in sorted(counts)]


def parse_network(text: str, kernel_log_text: str = "") -> Network:
    interfaces = [_interface(h, lines) for h, lines in blocks(text) if h]  # a bare `@ ` names no interface
    names = [i.get("name") or "" for i in interfaces]  # every row is named (its header)
    if len(set(names)) != len(names):  # the kernel keeps names unique and newline-free: only a forgery repeats one
        raise TamperedOutput("an interface appears twice")
    module_version = kernel_release = None
    for line in text.splitlines():
        if line.startswith("ena_module_version="):
            module_version = line.split("=", 1)[1].strip() or None
        elif line.startswith("kernel_release="):
            kernel_release = line.split("=", 1)[1].strip() or None
    ena = [i for i in interfaces if i.get("driver") == "ena"]
    reported = next((v for i in ena if (v := i.get("driver_version"))), None)
    # An in-tree driver without a version of its own (Ubuntu's and AL2023's AWS kernels) reports the kernel
    # release in `ethtool -i`: that is no ENA version, and no module version file exists for it.
    in_tree = module_version is None and reported is not None and reported == kernel_release
    ena_version = module_version or (None if in_tree else reported)
    return {
        "interfaces": sorted(interfaces, key=lambda i: i.get("name") or ""),
        "ena": {
            "present": bool(ena) or module_version is not None,
            "version": ena_version,
            "out_of_tree": bool(ena_version and ena_version.endswith("g")),
            "in_tree": in_tree,
        },
        "kernel_log": parse_kernel_log(kernel_log_text),
    }
