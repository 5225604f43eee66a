"""Analysis at fleet scale: built-in rules + baseline drift + AZ comparison + JSON and HTML reports over
N synthetic hosts (default 100,000) streamed from a snapshot directory, one file per host.

    python3 -m benchmarks.bench_analysis [--hosts 100000] [--configs 200] [--dir DIR] [--keep]

Hosts come from the real fleet snapshots in tests/data/compare/fleet perturbed into `--configs` distinct
configurations (benchmarks/bench_compare.py), each host with its own volatile noise (hostname, boot id,
uptime, restart counters, PIDs, dying memcgs, binary mtimes). The snapshot files are written first
(two processes, not timed), then one process streams them: read + parse each file, judge it (the judge
caches by the content each rule reads), add it to the fleet index (deduplicated by normalized
content), keep only a host stub for the report; then drift, comparison, report document, schema
validation, JSON and HTML. Prints the CPU time of each stage (the machine is shared: CPU, not wall, is
what a stage costs), the total wall time and peak RSS; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditor.compare.baseline import parse_baseline  # noqa: E402
from auditor.compare.capture import capture, render  # noqa: E402
from auditor.compare.drift import fleet_drift  # noqa: E402
from auditor.compare.groups import compare_groups  # noqa: E402
from auditor.compare.index import index_snapshots  # noqa: E402
from auditor.judge.engine import Judge  # noqa: E402
from auditor.judge.rules import load_rules  # noqa: E402
from auditor.models import HostResult, HostSpec, Report  # noqa: E402
from auditor.render import RENDERERS  # noqa: E402
from auditor.reportdoc import report_to_dict, validate_report  # noqa: E402
from auditor.yamlload import load_yaml_text  # noqa: E402
from benchmarks.bench_compare import configurations, hosts, load  # noqa: E402


def _write_part(args: tuple[str, int, int, int, int]) -> int:
    out, n, configs, start, stop = args
    rng = random.Random(n)
    confs = configurations(configs, rng)  # same seed in every part: the same configurations
    rng2 = random.Random(start)
    written = 0
    for i, snap in enumerate(hosts(stop - start, confs, rng2), start):
        hostname = f"ip-10-{i >> 16}-{i >> 8 & 255}-{i & 255}"
        snap = dict(snap, name=f"h{i:06d}", host={**snap["host"], "hostname": hostname})
        Path(out, f"h{i:06d}.json").write_text(json.dumps(snap))
        written += 1
    return written


def generate(out: Path, n: int, configs: int) -> None:
    parts = 2
    bounds = [(str(out), n, configs, n * k // parts, n * (k + 1) // parts) for k in range(parts)]
    with multiprocessing.Pool(parts) as pool:
        pool.map(_write_part, bounds)


def _stub(snap: dict[str, Any]) -> dict[str, Any]:
    """What the report keeps of a host (reportdoc._host): labels, errors, probe status, headline facts."""
    facts = snap.get("facts") or {}
    return {"labels": snap.get("labels"), "errors": snap.get("errors"), "not_applicable": snap.get("not_applicable"),
            "probe": {k: (snap.get("probe") or {}).get(k) for k in ("complete", "failed_areas")},
            "host": snap.get("host"),
            "facts": {"os": {"pretty_name": (facts.get("os") or {}).get("pretty_name")},
                      "kernel": {"release": (facts.get("kernel") or {}).get("release")},
                      "cgroups": {"memory": ((facts.get("cgroups") or {}).get("memory") or {})},
                      "systemd": {"enabled_units": (facts.get("systemd") or {}).get("enabled_units") or []}}}


def analyse(snap_dir: Path, out: Path) -> dict[str, Any]:
    times: dict[str, float] = {}
    t = time.process_time()
    ruleset = load_rules([], builtin=True, overrides=[])
    source, expect = capture(load("golden"))
    baseline = parse_baseline(load_yaml_text(render(source, expect), "golden.yaml"), "golden.yaml")
    judge = Judge(ruleset)
    results: list[HostResult] = []
    findings = []
    parse_s = 0.0
    judge_s = 0.0

    def stream() -> Iterator[dict[str, Any]]:
        nonlocal parse_s, judge_s
        for path in sorted(snap_dir.iterdir()):
            t0 = time.process_time()
            snap = json.loads(path.read_bytes())
            t1 = time.process_time()
            findings.extend(judge.judge(snap))
            parse_s += t1 - t0
            judge_s += time.process_time() - t1
            results.append(HostResult(HostSpec(snap["name"], snap["target"], dict(snap.get("labels") or {})), "ok",
                                      None, _stub(snap), 1.0))
            yield snap

    times["load rules + baseline"] = time.process_time() - t
    t = time.process_time()
    index = index_snapshots(stream(), ["az"])
    total_stream = time.process_time() - t
    times["read + parse"] = parse_s
    times["judge"] = judge_s
    times["normalize + dedupe (index)"] = total_stream - parse_s - judge_s
    t = time.process_time()
    drift = fleet_drift(baseline, index)
    times["drift"] = time.process_time() - t
    t = time.process_time()
    comparison = compare_groups(index, "az")
    times["AZ comparison"] = time.process_time() - t
    t = time.process_time()
    report = Report(hosts=results, generated_at="2026-11-30T00:00:00Z", fail_on="high", findings=findings,
                    drift=drift, comparison=comparison, baseline=baseline.summary(),
                    rules=[{"id": r.id, "severity": r.severity, "title": r.name} for r in ruleset.rules])
    doc = report_to_dict(report)
    times["report document"] = time.process_time() - t
    t = time.process_time()
    validate_report(doc)
    times["schema validation"] = time.process_time() - t
    sizes = {}
    for fmt in ("json", "html"):
        t = time.process_time()
        text = RENDERERS[fmt][0](doc)
        (out / f"report.{RENDERERS[fmt][1]}").write_text(text)
        times[f"render {fmt}"] = time.process_time() - t
        sizes[fmt] = len(text)
    return {"hosts": len(results), "configs": len(index.configs), "findings": len(findings), "drift": len(drift),
            "judge_evaluations": judge.evaluations, "times": times, "sizes": sizes,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--configs", type=int, default=200)
    ap.add_argument("--dir", type=Path, help="snapshot directory (made when missing or empty)")
    ap.add_argument("--keep", action="store_true", help="keep the generated snapshot directory")
    args = ap.parse_args()
    snap_dir = args.dir or Path(tempfile.mkdtemp(prefix="ami-auditor-bench-analysis-"))
    snap_dir.mkdir(parents=True, exist_ok=True)
    if not any(snap_dir.iterdir()):
        t = time.perf_counter()
        generate(snap_dir, args.hosts, args.configs)
        size = sum(f.stat().st_size for f in snap_dir.iterdir())
        print(f"generated {args.hosts} snapshots ({size / 2**30:.2f} GiB) in {time.perf_counter() - t:.0f} s",
              file=sys.stderr, flush=True)
    out = Path(tempfile.mkdtemp(prefix="ami-auditor-bench-analysis-out-"))
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    cpu0 = os.times()
    t = time.perf_counter()
    r = analyse(snap_dir, out)
    wall = time.perf_counter() - t
    cpu1 = os.times()
    print(f"{r['hosts']} hosts, {r['configs']} distinct configurations, {r['findings']} findings "
          f"({r['judge_evaluations']} rule evaluations), {r['drift']} drift items; load before {load_before}")
    print("| stage | CPU s |\n|---|---|")
    for stage, s in r["times"].items():
        print(f"| {stage} | {s:.1f} |")
    print(f"| **total (wall)** | **{wall:.1f}** |")
    print(f"\nCPU {cpu1.user - cpu0.user + cpu1.system - cpu0.system:.1f} s; peak RSS {r['peak_rss_mb']:.0f} MB; "
          f"JSON {r['sizes']['json'] / 2**20:.0f} MiB, HTML {r['sizes']['html'] / 2**20:.0f} MiB")
    shutil.rmtree(out, ignore_errors=True)
    if not args.keep and not args.dir:
        shutil.rmtree(snap_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
