"""Benchmark: baseline drift + AZ comparison over 1,000 / 10,000 / 50,000 synthetic snapshots.

Synthetic hosts are made from the real fleet snapshots recorded in tests/data/compare/fleet: ~20
distinct configurations (package bumps, a sysctl, an extra enabled unit, the AZ-b kubelet/ecs split)
over 3 AZs, and every host gets its own volatile facts (hostname, boot id, uptime, restart counters,
PIDs, dying memcgs, binary mtimes), so each raw snapshot is unique and dedupe must work on content.

Each size runs in a fresh process, so peak RSS is per size. Prints figures; asserts nothing.
    python3 benchmarks/bench_compare.py [--sizes 1000,10000,50000] [--configs 20]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditor.compare.baseline import parse_baseline  # noqa: E402
from auditor.compare.capture import capture, render  # noqa: E402
from auditor.compare.drift import fleet_drift  # noqa: E402
from auditor.compare.groups import compare_groups  # noqa: E402
from auditor.compare.index import index_snapshots  # noqa: E402
from auditor.yamlload import load_yaml_text  # noqa: E402

FLEET = ROOT / "tests" / "data" / "compare" / "fleet"
AZS = ("us-east-1a", "us-east-1b", "us-east-1c")


def load(name: str) -> dict:
    return json.loads((FLEET / f"{name}.json").read_text())


def configurations(count: int, rng: random.Random) -> list[tuple[dict, str]]:
    """(template snapshot, usual AZ): the three real configurations, then perturbed variants."""
    bases = [(load("golden"), "us-east-1a"), (load("a2"), "us-east-1c"), (load("b1"), "us-east-1b")]
    out = list(bases)
    while len(out) < count:
        base, az = bases[len(out) % 3]
        t = copy.deepcopy(base)
        packages = t["facts"]["packages"]["items"]
        p = packages[rng.randrange(len(packages))]
        p["version"] = p["version"] + f"+bench{len(out)}"  # a security update applied on some hosts
        if len(out) % 4 == 0:
            t["facts"]["kernel"]["sysctls"]["vm.swappiness"] = "10"
        out.append((t, az))
    return out


def hosts(n: int, configs: list[tuple[dict, str]], rng: random.Random) -> Iterator[dict]:
    """n snapshots: a configuration (skewed), an AZ (its usual one 90% of the time), unique volatile facts."""
    weights = [1.0 / (i + 1) for i in range(len(configs))]
    for i in range(n):
        template, usual_az = rng.choices(configs, weights)[0]
        az = usual_az if rng.random() < 0.9 else rng.choice(AZS)
        s = dict(template)
        s["name"] = f"h{i:06d}"
        s["labels"] = {**template["labels"], "az": az}
        s["host"] = {**template["host"], "hostname": f"ip-10-0-{i // 250}-{i % 250}", "boot_id": f"{i:032x}",
                     "uptime_s": rng.uniform(60, 9e5), "instance_id": f"i-{i:017x}", "az": az}
        facts = dict(template["facts"])
        systemd = dict(facts["systemd"])
        systemd["units"] = [{**u, "restarts": rng.randrange(3), "main_pid": rng.randrange(1, 1 << 22),
                             "main_started_s": rng.uniform(0, 1e5)} for u in systemd["units"]]
        facts["systemd"] = systemd
        cgroups = dict(facts["cgroups"])
        cgroups["memory"] = {**cgroups["memory"], "dying": rng.randrange(5000), "num_cgroups": rng.randrange(9000)}
        facts["cgroups"] = cgroups
        facts["binaries"] = [{**b, "mtime": rng.randrange(1 << 31)} for b in facts["binaries"]]
        s["facts"] = facts
        yield s


def run_one(n: int, config_count: int) -> dict:
    rng = random.Random(n)
    configs = configurations(config_count, rng)
    source, expect = capture(load("golden"))
    baseline = parse_baseline(load_yaml_text(render(source, expect), "golden.yaml"), "golden.yaml")
    t0 = time.perf_counter()
    index = index_snapshots(hosts(n, configs, rng), ["az"])
    t1 = time.perf_counter()
    drift = fleet_drift(baseline, index)
    t2 = time.perf_counter()
    comparison = compare_groups(index, "az")
    t3 = time.perf_counter()
    return {
        "hosts": n, "distinct_configurations": len(index.configs),
        "normalize_dedupe_s": round(t1 - t0, 2), "drift_s": round(t2 - t1, 2), "comparison_s": round(t3 - t2, 2),
        "total_s": round(t3 - t0, 2), "drift_items": len(drift), "splits": len(comparison["splits"]),
        "outliers": len(comparison["outliers"]),
        "top_split": comparison["splits"][0]["path"] if comparison["splits"] else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--configs", type=int, default=20)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.configs)))
        return 0
    print(f"{'hosts':>7} {'configs':>7} {'normalize+dedupe':>16} {'drift':>7} {'compare':>8} {'total':>7} "
          f"{'peak RSS':>9}  drift items / splits / outliers; top split")
    for n in (int(x) for x in args.sizes.split(",")):
        out = subprocess.run([sys.executable, __file__, "--one", str(n), "--configs", str(args.configs)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        print(f"{r['hosts']:>7} {r['distinct_configurations']:>7} {r['normalize_dedupe_s']:>15.2f}s "
              f"{r['drift_s']:>6.2f}s {r['comparison_s']:>7.2f}s {r['total_s']:>6.2f}s {r['peak_rss_mb']:>7.1f}MB  "
              f"{r['drift_items']} / {r['splits']} / {r['outliers']}; {r['top_split']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
