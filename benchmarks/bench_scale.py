"""Scale on this machine: `ami-auditor collect` over 10, 50, 100 and 200 real fleet hosts at several
`--parallel` values; wall time and scanner CPU (user+sys of the whole process: start-up, paramiko
handshakes, parsing, writing) per host.

    AMI_AUDITOR_FLEET_NET=N python3 -m benchmarks.bench_scale [--sizes 10,50,100,200] [--parallel 8,16,32,64]

Run as root; boots Fleet(extra=max(sizes)) (~7 MiB per host) or attaches to a running fleet with
AMI_AUDITOR_FLEET_ATTACH=1. Uses the benchmark hosts x01..xNN. One run per point (the big runs are
done once on a shared machine; the load average is printed beside each). Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fleet import Fleet  # noqa: E402


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _inventory(fleet: Fleet, n: int, work: Path) -> Path:
    hosts = [h for h in fleet.hosts if h.name.startswith("x")][:n]
    if len(hosts) < n:
        raise SystemExit(f"the fleet has {len(hosts)} benchmark hosts; asked for {n} (boot it with --extra {n})")
    inv = work / f"inventory-{n}.yaml"
    lines = ["defaults:",
             f"  ssh: {{user: root, identity_file: {fleet.identity_file}, known_hosts: {fleet.known_hosts}}}",
             "hosts:"]
    lines += [f"- {{name: {h.name}, target: 'ssh://root@{h.address}'}}" for h in hosts]
    inv.write_text("\n".join(lines) + "\n")
    return inv


def run(inventory: Path, parallel: int, out: Path) -> tuple[float, float, int, str]:
    """One whole `ami-auditor collect` process: (wall s, CPU s, exit code, load before)."""
    shutil.rmtree(out, ignore_errors=True)
    load = _loadavg()
    cmd = [sys.executable, "-c", "import sys; from auditor.cli import main; sys.exit(main())", "collect",
           "-i", str(inventory), "-o", str(out), "--parallel", str(parallel)]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    _, status, usage = os.wait4(proc.pid, 0)
    return time.monotonic() - started, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status), load


def bench(fleet: Fleet, sizes: list[int], parallels: list[int]) -> list[dict]:
    work = Path(tempfile.mkdtemp(prefix="ami-auditor-bench-scale-"))
    rows = []
    try:
        for n in sizes:
            inv = _inventory(fleet, n, work)
            for p in parallels:
                if p > n and p != parallels[0]:
                    continue
                wall, cpu, rc, load = run(inv, p, work / "out")
                snaps = [json.loads(f.read_text()) for f in (work / "out").glob("*.json")]
                probe = sorted(s["probe"]["duration_s"] for s in snaps)
                row = {"hosts": n, "parallel": p, "wall_s": wall, "cpu_s": cpu, "cpu_ms_per_host": 1000 * cpu / n,
                       "hosts_per_s": n / wall, "rc": rc, "collected": len(snaps),
                       "probe_wall_median_s": probe[len(probe) // 2] if probe else None, "load": load}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,50,100,200")
    ap.add_argument("--parallel", default="8,16,32,64")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    parallels = [int(x) for x in args.parallel.split(",")]
    if os.environ.get("AMI_AUDITOR_FLEET_ATTACH") == "1":
        rows = bench(Fleet.attach(), sizes, parallels)
    else:
        with Fleet(extra=max(sizes)) as fleet:
            rows = bench(fleet, sizes, parallels)
    print("| hosts | --parallel | wall s | hosts/s | scanner CPU s | CPU ms/host | probe wall median s | "
          "collected | exit | load before |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['hosts']} | {r['parallel']} | {r['wall_s']:.1f} | {r['hosts_per_s']:.2f} | {r['cpu_s']:.2f} | "
              f"{r['cpu_ms_per_host']:.0f} | {r['probe_wall_median_s']} | {r['collected']} | {r['rc']} | {r['load']} |")


if __name__ == "__main__":
    main()
