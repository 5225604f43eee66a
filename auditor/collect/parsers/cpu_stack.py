"""Kernel stacks sampled by perf on the hottest core (the probe's opt-in `cpu_stack` section)."""

from __future__ import annotations

from ...facttypes import CpuStack, CpuStackSelfRow
from ..sections import kv_lines, to_int
from .cpu import parse_cpu

TOP = 20  # the probe prints at most 20 functions per list


def _functions(lines: list[str], kind: str, samples: int) -> list[CpuStackSelfRow]:
    counted: list[tuple[str, int]] = []
    seen: set[str] = set()
    for line in lines:
        cols = line.split()
        count = to_int(cols[1]) if len(cols) == 3 and cols[0] == kind else None
        if count is None or count < 0 or cols[2] in seen:
            continue
        seen.add(cols[2])
        counted.append((cols[2], count))
    counted.sort(key=lambda f: (-f[1], f[0]))
    return [{"function": name, "samples": count, "share_pct": round(100.0 * count / samples, 1) if samples else None}
            for name, count in counted[:TOP]]


def parse_cpu_stack(text: str, cpu_text: str = "") -> CpuStack:
    """`requested=0` → only that; otherwise the sampled core, counts and the top kernel functions."""
    head = kv_lines(text)
    if head.get("requested") != "1":
        return {"requested": False}
    lines = text.splitlines()
    samples = to_int(head.get("samples")) or 0
    memcg = to_int(head.get("memcg_samples"))
    tid = to_int(head.get("busiest_tid"))
    comm = None
    if tid is not None and cpu_text:
        comm = next((t["comm"] for t in parse_cpu(cpu_text).get("threads") or () if t["tid"] == tid), None)
    return {
        "requested": True,
        "core": to_int(head.get("core")),
        "busiest_tid": tid,
        "busiest_comm": comm,
        "samples": samples,
        "kernel_samples": to_int(head.get("kernel_samples")),
        "memcg_share_pct": round(100.0 * memcg / samples, 1) if samples and memcg is not None else None,
        "self": _functions(lines, "self", samples),
        "inclusive": _functions(lines, "incl", samples),
    }
