"""cgroup mode and counts: live and dying memory cgroups on v1 and v2 (FIELD-NOTES §2)."""

from __future__ import annotations

import re
from typing import cast

from ...facttypes import Cgroups, CgroupsControllersRow, CgroupsMemory, CgroupsV2Row
from ..sections import UnparsableOutput, blocks, kv_lines, subsections, to_int

_FSTYPE = re.compile(r"^[a-z0-9_/]{1,32}$")  # tmpfs, cgroup2fs, cgroup


def _mode(fstype: str, unified: str) -> str | None:
    if fstype == "cgroup2fs":
        return "v2"
    if fstype == "tmpfs":
        return "hybrid" if unified == "cgroup2fs" else "v1"
    return None


def _proc_cgroups(text: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        cols = line.split()
        numbers = [n for n in (to_int(c) for c in cols[1:4]) if n is not None]  # junk (`²`, `inf`): no row
        if len(cols) >= 4 and len(numbers) == 3:
            out[cols[0]] = dict(zip(("hierarchy", "num_cgroups", "enabled"), numbers))
    return out


def _v2_stats(text: str) -> list[CgroupsV2Row]:
    rows: list[CgroupsV2Row] = []
    for header, lines in blocks(text):  # `@ cgroup.stat` (the root), `@ system.slice/cgroup.stat`, …
        path = header.removesuffix("cgroup.stat").rstrip("/") if header.endswith("cgroup.stat") else header
        stat = {k: to_int(v) for k, v in kv_lines("\n".join(lines), sep=" ").items()}
        rows.append(cast(CgroupsV2Row, {"path": path or "/", **stat}))  # the counters the kernel printed
    return rows


def parse_cgroups(text: str) -> Cgroups:
    parts = subsections(text)
    head = kv_lines(parts.get("", ""))
    for key in ("fstype", "unified_fstype"):  # `stat -fc %T` prints one file system type name, or nothing
        if head.get(key) and not _FSTYPE.match(head[key]):
            raise UnparsableOutput(f"stat -f printed {head[key][:60]!r}, not a file system type")
    mode = _mode(head.get("fstype", ""), head.get("unified_fstype", ""))
    proc = _proc_cgroups(parts.get("proc_cgroups", ""))
    live = {k: to_int(v) for k, v in kv_lines(parts.get("v1_live", ""), sep=" ").items()}
    if junk := [k for k, v in live.items() if v is None or (proc and k not in proc)]:
        # the walk prints `CONTROLLER COUNT` for the controllers /proc/cgroups lists, nothing else
        raise UnparsableOutput(f"cgroup directory walk printed {junk[0][:60]!r}, not a controller count")
    controllers: list[CgroupsControllersRow] = []
    for name, row in sorted(proc.items()):
        n_live = live.get(name)
        dying = max(row["num_cgroups"] - n_live, 0) if n_live is not None and row["hierarchy"] else None
        controllers.append({"name": name, "hierarchy": row["hierarchy"], "num_cgroups": row["num_cgroups"],
                            "enabled": row["enabled"], "live": n_live, "dying": dying})
    v2 = _v2_stats(parts.get("v2_stat", ""))
    memory: CgroupsMemory = {"num_cgroups": None, "live": None, "dying": None, "source": None}
    mem_row = proc.get("memory")
    total, live_memcgs = (mem_row["num_cgroups"], live.get("memory")) if mem_row else (None, None)
    if mode != "v2" and mem_row and mem_row["hierarchy"] and total is not None:
        # /proc/cgroups alone (no directory count: a capture, or a host whose mode is unknown) still gives
        # the memory controller's total of live and dying cgroups; which part is dying needs the count
        memory = {
            "num_cgroups": total,
            "live": live_memcgs,
            "dying": max(total - live_memcgs, 0) if live_memcgs is not None else None,
            "source": "proc_cgroups",
        }
    elif mode == "v2" and (root := next((r for r in v2 if r["path"] == "/"), None)):
        if root.get("nr_dying_subsys_memory") is not None:
            live_n = root.get("nr_subsys_memory")
            dying_n = root["nr_dying_subsys_memory"]
            source = "nr_dying_subsys_memory"
        else:  # descendants plus the root itself; a file without the key (cut, or a future kernel): unknown
            live_n = descendants + 1 if (descendants := root.get("nr_descendants")) is not None else None
            dying_n = root.get("nr_dying_descendants")
            source = "nr_dying_descendants"
        memory = {
            "num_cgroups": live_n + dying_n if live_n is not None and dying_n is not None else None,
            "live": live_n,
            "dying": dying_n,
            "source": source,
        }
    return {
        "mode": mode,
        "memory": memory,
        "controllers": controllers,
        "v2": v2,
        "v2_controllers": parts.get("v2_controllers", "").split() or None,
    }
