"""Render a 10,000-host report in every format; print time, peak memory and output size.

    python3 benchmarks/bench_render.py [--hosts 10000] [--out DIR]

The synthetic fleet is the incident at scale: three AZs, the third crash-looping ecs.service with a
foreign kubelet, a few hundred hosts with one-off drift, some hosts not reached, 200 ranked splits.
Prints figures only; it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.models import SEVERITIES  # noqa: E402
from auditor.render import RENDERERS  # noqa: E402
from auditor.reportdoc import validate_report  # noqa: E402

AZS = ("us-east-1a", "us-east-1b", "us-east-1c")


def synthetic_report(n: int) -> dict:
    hosts, findings, drift = [], [], []
    for i in range(n):
        az = AZS[i % 3]
        name = f"ip-10-{i // 65536}-{i // 256 % 256}-{i % 256}"
        status = "unreachable" if i % 211 == 0 else "ok"
        hosts.append({
            "name": name, "target": f"ssm://i-{i:017x}?region=us-east-1", "labels": {"az": az},
            "status": status, "error": "SSM: Undeliverable" if status != "ok" else None,
            "duration_s": 2.5, "collector_errors": {"ecs": "timed out"} if i % 997 == 1 else {},
            "facts_summary": None if status != "ok" else {
                "hostname": name, "instance_id": f"i-{i:017x}", "ami_id": "ami-0c7217cdde317cfec", "az": az,
                "os": "Ubuntu 20.04.6 LTS", "kernel": "5.4.0-1103-aws", "dying_memcgs": 68000 if az == AZS[2] else 40,
                "enabled_units": 61},
        })
        if status != "ok":
            continue
        if az == AZS[2]:
            findings += [
                {"host": name, "rule": "systemd.unit-crashloop", "severity": "critical",
                 "title": f"ecs.service is crash-looping ({100 + i % 50} restarts this boot)",
                 "description": "A unit keeps restarting.", "remediation": "systemctl disable --now ecs.service",
                 "item": "ecs.service", "evidence": {"restarts": 100 + i % 50, "sub_state": "auto-restart"},
                 "tags": ["systemd"], "waived": False, "waiver": None},
                {"host": name, "rule": "cgroups.dying-memcgs", "severity": "critical",
                 "title": "68000 dying memory cgroups", "description": "", "remediation": "reboot",
                 "item": None, "evidence": {"dying": 68000}, "tags": [], "waived": False, "waiver": None},
            ]
            drift += [{"host": name, "path": "facts.systemd.units[ecs.service].unit_file_state", "kind": "changed",
                       "expected": "disabled", "actual": "enabled", "severity": "high"},
                      {"host": name, "path": "facts.binaries[kubelet].sha256", "kind": "changed",
                       "expected": "a" * 64, "actual": "b" * 64, "severity": "medium"}]
        if i % 37 == 5:  # one-off drift: every such host is its own class
            drift.append({"host": name, "path": "facts.kernel.sysctls[net.core.rmem_max]", "kind": "changed",
                          "expected": "212992", "actual": str(1000 + i), "severity": "low"})
    per_az = Counter(h["labels"]["az"] for h in hosts if h["status"] == "ok")
    splits = [{"path": "facts.systemd.units[ecs.service].unit_file_state", "group_by": "az", "score": 1.0,
               "counts": {AZS[0]: {"disabled": per_az[AZS[0]]}, AZS[1]: {"disabled": per_az[AZS[1]]},
                          AZS[2]: {"enabled": per_az[AZS[2]]}}}]
    splits += [{"path": f"facts.packages[pkg-{k}].version", "group_by": "az", "score": round(0.9 - k * 0.004, 3),
                "counts": {az: {f"1.{k}.0": per_az[az] - k, f"1.{k}.1": k} for az in AZS}} for k in range(199)]
    active = [f for f in findings if not f["waived"]]
    doc = {
        "schema": "ami-auditor/report/1", "tool_version": "bench", "generated_at": "2026-03-02T10:15:00Z",
        "fail_on": "high",
        "summary": {"hosts": n, "by_status": dict(Counter(h["status"] for h in hosts)),
                    "findings_by_severity": {s: sum(f["severity"] == s for f in active) for s in SEVERITIES},
                    "findings": len(active), "waived": 0, "drift": len(drift), "exit_code": 1},
        "hosts": hosts, "findings": findings, "drift": drift,
        "comparison": {"group_by": "az", "groups": dict(per_az), "splits": splits, "outliers": []},
        "symptom": None, "baseline": {"path": "golden.yaml", "source_host": "golden"},
        "rules": [{"id": "systemd.unit-crashloop", "severity": "critical", "title": "crash loops"},
                  {"id": "cgroups.dying-memcgs", "severity": "critical", "title": "dying memcgs"}],
        "notes": [],
    }
    return doc


def measure(fn, *args, memory: bool = True):
    """(result, seconds, peak bytes): timed untraced, then (optionally) run again under tracemalloc."""
    started = time.perf_counter()
    result = fn(*args)
    elapsed = time.perf_counter() - started
    peak = 0
    if memory:
        tracemalloc.start()
        fn(*args)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result, elapsed, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass (it is slow)")
    parser.add_argument("--out", type=Path, default=None, help="also write report.<ext> files here")
    args = parser.parse_args()
    doc, t, _ = measure(synthetic_report, args.hosts, memory=False)
    print(f"hosts {args.hosts}: {len(doc['findings'])} findings, {len(doc['drift'])} drift items, "
          f"{len(doc['comparison']['splits'])} splits (built in {t:.2f}s)")
    _, t, _ = measure(validate_report, doc, memory=False)
    print(f"{'validate':<8} {t:7.2f} s  (jsonschema, as `ami-auditor report` does on load)")
    RENDERERS["html"][0]({**doc, "hosts": doc["hosts"][:3]})  # load templates once, outside the timing
    for fmt, (render, ext) in RENDERERS.items():
        text, t, peak = measure(render, doc, memory=not args.no_memory)
        size = len(text.encode("utf-8"))
        extra = ""
        if fmt == "html":
            extra = f"  table rows {text.count('<tr>')}"
        print(f"{fmt:<8} {t:7.2f} s  peak {peak / 2**20:7.1f} MiB  size {size / 2**10:9.1f} KiB{extra}")
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"report.{ext}").write_text(text, encoding="utf-8")
    print("(time: one untraced run; peak: Python allocations traced by tracemalloc in a second run,"
          " the input doc not counted)")


if __name__ == "__main__":
    main()
