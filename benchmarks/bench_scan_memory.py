"""Peak memory of a fleet `scan` as the fleet grows: N hosts answered in-process by a transport that replays
recorded real probe output (tests/data/probe: AL2, AL2023, Ubuntu 20.04 DLAMI, re-framed with each run's
nonce; each host's dying-memcg count and unit restart counters differ), through the whole scan: collect,
trends, judge, baseline drift, AZ comparison, symptom ranking, JSON report, and the history store.

    python3 -m benchmarks.bench_scan_memory [--hosts 250,1000,2000] [--store none|new]

One fresh process per N (`--child`), so each peak is its own. Prints per N: wall time, peak RSS (the
process's maxrss) and the growth per added host between the smallest and each larger N; asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import re
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

OSES = ("al2", "al2023", "ubuntu2004-dlami")


def _raws() -> list[str]:
    return [(ROOT / "tests" / "data" / "probe" / name / "raw.txt").read_text() for name in OSES]


def _vary(raw: str, i: int) -> str:
    """Per-host volatile noise: the memory controller's cgroup count (dying memcgs) and restart counters."""
    raw = re.sub(r"^(memory\s+\d+\s+)(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + i}", raw, count=1,
                 flags=re.M)
    return re.sub(r"^NRestarts=(\d+)$", lambda m: f"NRestarts={int(m.group(1)) + i % 7}", raw, flags=re.M)


def child(n: int, store: str, work: Path) -> None:
    from auditor.cli import main
    from auditor.collect import framing
    from auditor.context import Env
    from auditor.models import CommandResult
    from auditor.run import live_hosts
    from tests.framing_fixtures import FIXTURE_NONCE, renonce

    raws = _raws()

    class Replay:
        name = "replay"

        def __init__(self, index: int):
            self.index = index

        def run(self, request: Any, *args: Any, **kwargs: Any) -> CommandResult:
            nonce = getattr(request, "nonce", None) or framing.nonce_of(request)
            raw = _vary(raws[self.index % len(raws)], self.index)
            return CommandResult(renonce(raw, FIXTURE_NONCE, nonce), "", 0, 0.01)

        def close(self) -> None:
            pass

    live_hosts.open_transport = lambda spec: Replay(int(spec.name[1:]))  # type: ignore[assignment]
    inventory = work / "fleet.yaml"
    inventory.write_text("hosts:\n" + "".join(
        f"  - {{name: h{i:06d}, target: local, labels: {{az: us-east-1{'abc'[i % 3]}}}}}\n" for i in range(n)))
    golden = work / "golden.yaml"
    if not golden.exists():
        from auditor.compare.capture import capture, render
        from auditor.transport.base import DEFAULT_DEADLINE_S
        [first] = live_hosts.collect_hosts([live_hosts.HostSpec("h000000", "local", {})], deadline_s=DEFAULT_DEADLINE_S)
        source, expect = capture(first.snapshot)
        golden.write_text(render(source, expect))
    argv = ["scan", "-i", str(inventory), "--baseline", str(golden), "--group-by", "az", "--symptom",
            "systemd.unit-crash-looping", "--format", "json", "--out", str(work / f"out-{n}"), "--quiet",
            *(["--no-store"] if store == "none" else ["--store", str(work / f"history-{n}.sqlite3")])]
    started = time.perf_counter()
    code = main(argv, Env(stdout=io.StringIO(), stderr=io.StringIO()))
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n} {code} {wall:.2f} {peak:.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", default="250,1000,2000")
    ap.add_argument("--store", choices=("none", "new"), default="new")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.store, args.work)
        return 0
    work = Path(tempfile.mkdtemp(prefix="ami-auditor-bench-scan-memory-"))
    print(f"scan of N replayed hosts, store: {args.store}")
    print("| hosts | exit | wall s | peak RSS MB | MB per 1,000 hosts over the smallest N |")
    print("|---|---|---|---|---|")
    first: tuple[int, float] | None = None
    for n in [int(x) for x in args.hosts.split(",")]:
        done = subprocess.run([sys.executable, "-m", "benchmarks.bench_scan_memory", "--child", str(n), "--store",
                               args.store, "--work", str(work)], cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
            return 1
        _, code, wall, peak = done.stdout.split()
        slope = "" if first is None else f"{(float(peak) - first[1]) / (n - first[0]) * 1000:.0f}"
        first = first or (n, float(peak))
        print(f"| {n} | {code} | {wall} | {float(peak):.0f} | {slope} |", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
