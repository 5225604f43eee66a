"""Analysis at fleet scale: `ami-auditor analyze` (built-in rules + fleet rules + baseline drift + AZ
comparison + symptom ranking + JSON and HTML reports) over N synthetic hosts (default 100,000) streamed
from a snapshot directory, one file per host, timed as a whole process.

    python3 -m benchmarks.bench_analysis [--hosts 100000] [--configs 200] [--jobs 1,2] [--dir DIR] [--keep]
                                         [--store none|new|twice]

Hosts come from the real fleet snapshots in tests/data/compare/fleet perturbed into `--configs` distinct
configurations (benchmarks/bench_compare.py), each host with its own volatile noise (hostname, boot id,
uptime, restart counters of every unit, PIDs, dying memcgs, binary mtimes). The snapshot files are written
first (two processes, not timed); then, per --jobs value, one `ami-auditor analyze DIR --baseline …
--group-by az --symptom systemd.unit-crash-looping --format json,html --out …` process runs. Prints its
wall time, CPU (the process and its workers), peak memory (the sum of the resident sizes of the process
and its workers, sampled every 0.1 s) and the report sizes; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditor.compare.capture import capture, render  # noqa: E402
from benchmarks.bench_compare import configurations, hosts, load  # noqa: E402


def _write_part(args: tuple[str, int, int, int, int]) -> int:
    out, n, configs, start, stop = args
    rng = random.Random(n)
    confs = configurations(configs, rng)  # same seed in every part: the same configurations
    rng2 = random.Random(start)
    written = 0
    for i, snap in enumerate(hosts(stop - start, confs, rng2), start):
        hostname = f"ip-10-{i >> 16}-{i >> 8 & 255}-{i & 255}"
        snap = dict(snap, name=f"h{i:06d}", host={**snap["host"], "hostname": hostname, "machine_id": f"{i:032x}"})
        hygiene = snap["facts"]["hygiene"]  # host identities are unique per host, as on a fleet not baked wrong
        keys = [{**k, "fingerprint": f"SHA256:{i:043d}{n}"} for n, k in enumerate(hygiene.get("ssh_host_keys") or [])]
        snap["facts"] = {**snap["facts"], "hygiene": {**hygiene, "ssh_host_keys": keys}}
        Path(out, f"h{i:06d}.json").write_text(json.dumps(snap))
        written += 1
    return written


def generate(out: Path, n: int, configs: int) -> None:
    parts = 2
    bounds = [(str(out), n, configs, n * k // parts, n * (k + 1) // parts) for k in range(parts)]
    with multiprocessing.Pool(parts) as pool:
        pool.map(_write_part, bounds)


def _tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and its children (the analyze process and its workers)."""
    total = 0
    pids = [pid]
    try:
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def analyse(snap_dir: Path, out: Path, jobs: int, baseline: Path, store: Path | None) -> dict[str, Any]:
    """One whole `ami-auditor analyze` process: wall, CPU (self + workers), peak RSS of the tree."""
    argv = [sys.executable, "-m", "auditor.cli", "analyze", str(snap_dir), "--jobs", str(jobs),
            "--baseline", str(baseline), "--group-by", "az", "--symptom", "systemd.unit-crash-looping",
            "--format", "json,html", "--out", str(out),
            *(["--store", str(store)] if store is not None else ["--no-store"])]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        time.sleep(0.1)
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    err = proc.stderr.read().decode() if proc.stderr else ""
    sizes = {ext: (out / f"report.{ext}").stat().st_size for ext in ("json", "html")
             if (out / f"report.{ext}").exists()}
    return {"jobs": jobs, "exit": proc.returncode, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "peak_mb": peak / 2**20, "sizes": sizes, "stderr": err[-500:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--configs", type=int, default=200)
    ap.add_argument("--jobs", default="1,2", help="comma-separated --jobs values to run (default 1,2)")
    ap.add_argument("--dir", type=Path, help="snapshot directory (made when missing or empty)")
    ap.add_argument("--keep", action="store_true", help="keep the generated snapshot directory")
    ap.add_argument("--store", choices=("none", "new", "twice"), default="none",
                    help="none (default): --no-store; new: record into a new history store; twice: record, then "
                         "run again over the same store (trends from the first run: the second run's figures)")
    args = ap.parse_args()
    snap_dir = args.dir or Path(tempfile.mkdtemp(prefix="ami-auditor-bench-analysis-"))
    snap_dir.mkdir(parents=True, exist_ok=True)
    if not any(snap_dir.iterdir()):
        t = time.perf_counter()
        generate(snap_dir, args.hosts, args.configs)
        size = sum(f.stat().st_size for f in snap_dir.iterdir())
        print(f"generated {args.hosts} snapshots ({size / 2**30:.2f} GiB) in {time.perf_counter() - t:.0f} s",
              file=sys.stderr, flush=True)
    hosts = sum(1 for _ in snap_dir.iterdir())
    work = Path(tempfile.mkdtemp(prefix="ami-auditor-bench-analysis-out-"))
    source, expect = capture(load("golden"))
    baseline = work / "golden.yaml"
    baseline.write_text(render(source, expect))
    print(f"{hosts} hosts ({args.configs} configurations asked), store: {args.store}, load before "
          f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}, {os.cpu_count()} CPUs")
    print("| --jobs | exit | wall s | CPU s | peak RSS MB (all processes) | JSON MiB | HTML MiB |")
    print("|---|---|---|---|---|---|---|")
    for jobs in [int(j) for j in args.jobs.split(",")]:
        out = work / f"out-{jobs}"
        out.mkdir()
        store = None if args.store == "none" else work / f"history-{jobs}.sqlite3"
        if args.store == "twice":
            analyse(snap_dir, work / f"out-{jobs}-first", jobs, baseline, store)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = analyse(snap_dir, out, jobs, baseline, store)
        cpu = r["cpu"] - before.ru_utime - before.ru_stime
        print(f"| {jobs} | {r['exit']} | {r['wall']:.1f} | {cpu:.1f} | {r['peak_mb']:.0f} | "
              f"{r['sizes'].get('json', 0) / 2**20:.0f} | {r['sizes'].get('html', 0) / 2**20:.1f} |", flush=True)
        if r["exit"] not in (0, 1):
            print(r["stderr"], file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    if not args.keep and not args.dir:
        shutil.rmtree(snap_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
