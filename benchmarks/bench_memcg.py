"""Probe cost with and without dying memory cgroups: host-side probe CPU (the probe's own `times`) and
probe wall time on one fleet host, before and after making ≥ 20,000 REAL dying memcgs on this
(cgroup v1) kernel (tests/fleet/memcg.py), side by side.

    AMI_AUDITOR_FLEET_NET=N python3 -m benchmarks.bench_memcg [--dying 20000] [--runs 5] [--host a1]

Run as root; boots the scenario fleet or attaches (AMI_AUDITOR_FLEET_ATTACH=1). The dying count is the
kernel's, read before and after the runs (other processes on the machine add and free their own). Prints figures,
asserts nothing. Cleans its memcgs up (files removed, caches dropped) at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.run.live_hosts import collect_host  # noqa: E402
from auditor.targets.inventory import load_inventory  # noqa: E402
from tests.fleet import Fleet  # noqa: E402
from tests.fleet.memcg import DyingMemcgs, dying_memcg_count, settle  # noqa: E402


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(inventory: Path, host: str, runs: int) -> dict[str, float]:
    """Median probe CPU (host side), probe wall and scanner wall over `runs` collections of `host`."""
    spec = next(s for s in load_inventory(inventory) if s.name == host)
    cpu, wall = [], []
    for _ in range(runs):
        res = collect_host(spec)
        if res.snapshot is None:
            raise SystemExit(f"{host}: {res.status}: {res.error}")
        cpu.append(res.snapshot["probe"]["cpu_s"])
        wall.append(res.snapshot["probe"]["duration_s"])
    return {"cpu": statistics.median(cpu), "cpu_max": max(cpu), "wall": statistics.median(wall),
            "wall_max": max(wall)}


def bench(fleet: Fleet, host: str, dying: int, runs: int) -> None:
    rows = []
    before = settle()
    m = measure(fleet.inventory_path, host, runs)
    rows.append((f"{before} → {dying_memcg_count()}", _loadavg(), m))
    with DyingMemcgs() as batch:
        # the pinning page lives on tmpfs (shmem): other sessions' drop_caches cannot free these memcgs
        # while the runs measure (page cache in /var/tmp halved the count within a minute here)
        batch.data = Path("/dev/shm") / batch.tag
        started = time.monotonic()
        made = batch.make(dying)
        print(f"made {made} dying memcgs in {time.monotonic() - started:.1f} s", file=sys.stderr)
        at_start = dying_memcg_count()
        m = measure(fleet.inventory_path, host, runs)
        rows.append((f"{at_start} → {dying_memcg_count()}", _loadavg(), m))
    after = settle()  # the same again once they are gone: brackets any drift of the machine's load
    m = measure(fleet.inventory_path, host, runs)
    rows.append((f"{after} → {dying_memcg_count()} (after cleanup)", _loadavg(), m))
    print(f"probe on {host}, medians of {runs} runs (max in brackets):\n")
    print("| dying memcgs (kernel, before → after the runs) | probe CPU on host s | probe wall s | load |")
    print("|---|---|---|---|")
    for count, load, m in rows:
        print(f"| {count} | {m['cpu']:.3f} ({m['cpu_max']:.3f}) | {m['wall']:.2f} ({m['wall_max']:.2f}) | {load} |")
    base = (rows[0][2]["cpu"] + rows[2][2]["cpu"]) / 2
    print(f"\nprobe CPU with the dying memcgs ÷ mean of the runs without: {rows[1][2]['cpu'] / base:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dying", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--host", default="a1")
    args = ap.parse_args()
    if os.environ.get("AMI_AUDITOR_FLEET_ATTACH") == "1":
        bench(Fleet.attach(), args.host, args.dying, args.runs)
    else:
        with Fleet() as fleet:
            bench(fleet, args.host, args.dying, args.runs)


if __name__ == "__main__":
    main()
