"""Swap, clock, ARP, reboot and process-table state (the `proc` section)."""

from __future__ import annotations

from ...facttypes import Proc, ProcZombieParentsRow
from ..sections import UnparsableOutput, kv_lines, subsections, to_int
from .config_text import boolean


def parse_proc(text: str) -> Proc:
    parts = subsections(text)
    for name in ("swaps", "state", "tasks"):
        if name not in parts:
            raise UnparsableOutput(f"proc section has no {name!r} part")
    state = kv_lines(parts["state"])
    tasks = kv_lines(parts["tasks"])
    parents: list[ProcZombieParentsRow] = []
    for line in parts["tasks"].splitlines():
        cols = line.split(" ", 3)
        if cols[0] == "zombie_parent" and len(cols) == 4:
            parents.append({"pid": to_int(cols[1]), "zombies": to_int(cols[2]), "comm": cols[3]})
    threads = to_int(tasks.get("threads"))
    if threads is None:
        raise UnparsableOutput("proc section: no thread count")
    if state.get("ntp_synchronized") == "unreadable":
        raise UnparsableOutput("chronyc tracking printed no `Leap status` line")
    pkgs = [line.split("=", 1)[1] for line in parts["state"].splitlines() if line.startswith("reboot_pkg=")]
    return {
        "swaps": [ln.strip() for ln in parts["swaps"].splitlines() if ln.strip()],
        "clocksource": state.get("clocksource") or None,
        "clocksources_available": (state.get("clocksources") or "").split(),
        "arp_entries": to_int(state.get("arp_entries")),
        "ntp_synchronized": boolean(state.get("ntp_synchronized")) if "ntp_synchronized" in state else None,
        "ntp_source": state.get("ntp_source") or None,
        "reboot_required": state.get("reboot_required") == "1",
        "reboot_required_pkgs": pkgs,
        "threads": threads,
        "processes": to_int(tasks.get("processes")),
        "zombies": to_int(tasks.get("zombies")),
        "zombie_parents": parents,
    }
