"""Benchmark: what checking input files against their JSON Schemas costs. Prints figures.

    python3 benchmarks/bench_inputs.py [--hosts 5000] [--repeat 20]

Figures: importing jsonschema-rs (the fast verdict), checking the built-in packs (valid: jsonschema-rs only),
load_rules() whole, an invalid pack's first and later InputError (jsonschema imported for the words), and an
inventory of --hosts hosts and a baseline of as many lines, valid and with every line wrong (the error walk
stays linear in the file).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(first run, median of the rest) in ms."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            fn()
        except Exception as exc:  # an InputError is the expected result of the invalid cases
            if type(exc).__name__ != "InputError":
                raise
        runs.append((time.perf_counter() - start) * 1000)
    return runs[0], statistics.median(runs[1:] or runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    start = time.perf_counter()
    import jsonschema_rs  # noqa: F401

    print(f"import jsonschema_rs                         {1000 * (time.perf_counter() - start):8.1f} ms")
    from auditor.compare.baseline import BASELINE_FORM
    from auditor.inputschema import check
    from auditor.judge.rules import PACK_FORM, load_rules
    from auditor.targets.inventory import INVENTORY_FORM
    from auditor.yamlload import load_yaml_file, load_yaml_text

    packs = [(str(p), load_yaml_file(p)) for p in sorted((ROOT / "rules").glob("*.yaml"))]
    rows = [("check the built-in packs (valid)", lambda: [check(d, PACK_FORM, f) for f, d in packs])]
    rows.append(("load_rules() (built-in packs, all checks)", load_rules))
    bad = load_yaml_text((ROOT / "rules" / "cgroups.yaml").read_text().replace("severity: medium", "severity: hgh", 1))
    rows.append(("an invalid pack -> InputError", lambda: check(bad, PACK_FORM, "x.yaml")))
    n = args.hosts
    inventory = load_yaml_text("hosts:\n" + "".join(f"  - {{name: h{i}, target: 'ssh://10.0.{i // 250}.{i % 250}',"
                                                    f" labels: {{az: a{i % 3}}}, ssh: {{port: 22}}}}\n"
                                                    for i in range(n)))
    broken_inventory = load_yaml_text("hosts:\n" + "".join(f"  - {{name: h{i}, target: local, ssh: {{port: 0}}}}\n"
                                                           for i in range(n)))
    rows.append((f"inventory, {n} hosts (valid)", lambda: check(inventory, INVENTORY_FORM, "i.yaml")))
    rows.append((f"inventory, {n} hosts, every port wrong", lambda: check(broken_inventory, INVENTORY_FORM, "i")))
    head = "baseline: ami-auditor/baseline/1\nexpect:\n"
    baseline = load_yaml_text(head + "".join(f"  facts.kernel.sysctls[k{i}]: '{i}'\n" for i in range(n)))
    broken_baseline = load_yaml_text(head + "".join(f"  facts.kernel.sysctls[k{i}]:\n" for i in range(n)))
    rows.append((f"baseline, {n} lines (valid)", lambda: check(baseline, BASELINE_FORM, "b.yaml")))
    rows.append((f"baseline, {n} lines, every line null", lambda: check(broken_baseline, BASELINE_FORM, "b")))
    print(f"{'':45}{'first':>11}{'median':>11}")
    for label, fn in rows:
        first, median = timed(fn, args.repeat if "every" not in label else 3)
        print(f"{label:45}{first:8.1f} ms{median:8.1f} ms")


if __name__ == "__main__":
    main()
