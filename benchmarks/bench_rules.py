"""Benchmark: all built-in rules over N snapshots with K distinct configurations (K ≪ N). Prints figures.

    python3 benchmarks/bench_rules.py [--hosts 10000] [--configs 50]

Snapshots are made from the recorded ones (tests/data: AL2, AL2023, Ubuntu DLAMI probe output, fleet
snapshots), varied K ways (restart counts, dying memcgs, kernel-log events, kubelet source, per-core CPU), and
given per-host identities (name, hostname, uptime, instance id) that no built-in rule reads. Every host gets
its own copy of the areas the rules read (as after JSON parsing); the large `packages` area, which no rule
reads, is shared between hosts to keep the benchmark's own memory down. Prints load, judge and total time,
evaluations performed, findings, and peak memory (tracemalloc for the judge; ru_maxrss for the process).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditor.collect.snapshot import build_snapshot  # noqa: E402
from auditor.judge.engine import Judge  # noqa: E402
from auditor.judge.rules import load_rules  # noqa: E402
from auditor.models import CommandResult, HostSpec  # noqa: E402
from tests.framing_fixtures import FIXTURE_NONCE  # noqa: E402

DATA = ROOT / "tests" / "data"


def bases() -> list[dict]:
    out = []
    for os_name in ("al2", "al2023", "ubuntu2004-dlami"):
        raw = (DATA / "probe" / os_name / "raw.txt").read_text()
        out.append(build_snapshot(HostSpec(os_name, "ssh://x"), CommandResult(raw, "", 0), FIXTURE_NONCE))
    out.extend(json.loads(p.read_text()) for p in sorted((DATA / "snapshots").glob("fleet-*.json")))
    return out


def configurations(k: int, seed: int = 7) -> list[str]:
    """K distinct configurations, each as JSON text of its (non-identity) content."""
    rng = random.Random(seed)
    base = bases()
    out = []
    for i in range(k):
        snap = json.loads(json.dumps(base[i % len(base)]))
        facts = snap["facts"]
        if facts.get("systemd"):
            for unit in facts["systemd"]["units"][:3]:
                unit["restarts"] = rng.choice([0, 0, 1, 5, 40])
        if facts.get("cgroups") and facts["cgroups"].get("memory"):
            facts["cgroups"]["memory"]["dying"] = rng.choice([3, 200, 1500, 12000, 68000]) + i
        facts["network"]["kernel_log"]["events"]["reset_completed"] = rng.choice([0, 0, 0, 1])
        for b in facts.get("binaries") or []:
            if b.get("name") == "kubelet" and b.get("found"):
                b["source_host"] = rng.choice(["amazon-eks.s3.us-west-2.amazonaws.com", "dl.k8s.io"])
        for core in facts["cpu"].get("cores") or []:
            core["system_pct"] = rng.choice([2.0, 5.0, 95.0]) if core["cpu"] == 0 else core["system_pct"]
        out.append(json.dumps(snap))
    return out


def fleet(n: int, k: int) -> list[dict]:
    configs = configurations(k)
    shared_packages = {}
    snaps = []
    for i in range(n):
        j = i % k
        snap = json.loads(configs[j])  # each host owns its areas, as if read from its own JSON
        snap["facts"]["packages"] = shared_packages.setdefault(j, snap["facts"]["packages"])
        snap["name"] = f"host-{i:05d}"
        snap["host"].update(hostname=f"ip-10-0-{i // 250}-{i % 250}", uptime_s=1000.0 + i,
                            instance_id=f"i-{i:017x}", machine_id=f"{i:032x}")
        snaps.append(snap)
    return snaps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--configs", type=int, default=50)
    args = ap.parse_args()

    t0 = time.perf_counter()
    snaps = fleet(args.hosts, args.configs)
    t_make = time.perf_counter() - t0

    t1 = time.perf_counter()
    ruleset = load_rules()
    t_load = time.perf_counter() - t1
    judge = Judge(ruleset)
    t2 = time.perf_counter()
    findings = judge.judge_all(snaps)
    t_judge = time.perf_counter() - t2
    # a second, traced run on a fresh judge: tracemalloc slows Python down, so it is not the timed one
    del findings
    tracemalloc.start()
    findings = Judge(ruleset).judge_all(snaps)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"hosts {args.hosts}, distinct configurations {args.configs}, rules {len(ruleset.rules)}")
    print(f"make snapshots        {t_make:7.2f} s   (benchmark setup, not judged)")
    print(f"load + validate rules {t_load:7.3f} s")
    print(f"judge                 {t_judge:7.2f} s   ({t_judge / args.hosts * 1e6:.0f} us/host)")
    print(f"rule evaluations      {judge.evaluations} (of {len(ruleset.rules) * args.hosts} rule x host pairs)")
    print(f"findings              {len(findings)}")
    print(f"peak memory (judge, tracemalloc) {peak / 2**20:7.1f} MiB")
    print(f"peak RSS (process, incl. snapshots) {rss_mib:7.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
