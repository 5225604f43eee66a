"""Per-core CPU from two /proc/stat samples, and the threads that ran in between (FIELD-NOTES §5)."""

from __future__ import annotations

import math
from typing import cast

from ...facttypes import Cpu, CpuAverage, CpuCoresRow, CpuThreadsRow
from ..sections import kv_lines, subsections, to_int

_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _stat(text: str) -> dict[str, list[int]]:
    out = {}
    for line in text.splitlines():
        cols = line.split()
        if cols and cols[0].startswith("cpu"):
            out[cols[0]] = [n for n in (to_int(c) for c in cols[1:9]) if n is not None and n >= 0]
    return out


def _pct(before: list[int], after: list[int]) -> CpuAverage:
    """Each field's share of the ticks between the samples; a sample cut short lacks its last fields."""
    delta = [max(a - b, 0) for a, b in zip(after, before)]
    total = sum(delta) or 1
    return cast(CpuAverage, {f"{name}_pct": round(100.0 * d / total, 1) for name, d in zip(_FIELDS, delta)})


def _float(value: str | None) -> float | None:
    """A finite float, else None (`nan`/`inf` could not be written to a JSON snapshot)."""
    try:
        number = float(value) if value else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def parse_cpu(text: str) -> Cpu:
    parts = subsections(text)
    head = kv_lines(parts.get("", ""))
    first, second = _stat(parts.get("stat1", "")), _stat(parts.get("stat2", ""))
    cores: list[CpuCoresRow] = []
    for name in sorted(first, key=lambda n: (len(n), n)):
        if name == "cpu" or name not in second or not name[3:].isdecimal() or to_int(name[3:]) is None:
            continue
        cores.append({"cpu": int(name[3:]), **_pct(first[name], second[name])})
    average = _pct(first["cpu"], second["cpu"]) if "cpu" in first and "cpu" in second else None
    threads: list[CpuThreadsRow] = []
    for line in parts.get("threads", "").splitlines():
        cols = line.split(None, 5)
        numbers = [n for n in (to_int(c) for c in cols[:5]) if n is not None]
        if len(cols) == 6 and len(numbers) == 5:
            pid, tid, cpu, ticks, sys_ticks = numbers
            threads.append({"pid": pid, "tid": tid, "cpu": cpu, "ticks": ticks,
                            "system_ticks": sys_ticks, "comm": cols[5]})
    threads.sort(key=lambda t: -(t.get("ticks") or 0))  # every row has its ticks
    # a core whose samples were cut short has no system_pct: it cannot be the busiest
    busiest = max((c for c in cores if "system_pct" in c), key=lambda c: c.get("system_pct") or 0.0, default=None)
    return {
        "count": to_int(head.get("ncpu")),
        "window_s": _float(head.get("window_s")),
        "model": head.get("model") or None,
        "average": average,
        "cores": cores,
        "max_core_system_pct": busiest["system_pct"] if busiest else None,
        "max_core": busiest["cpu"] if busiest else None,
        "threads": threads[:30],
    }
