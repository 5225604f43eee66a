"""JSON input and output at fleet scale, stdlib reference vs the fast paths, side by side (CPU seconds).

    python3 -m benchmarks.bench_jsonio [--dir SNAPSHOT_DIR] [--files 2000] [--hosts 10000]

- read + parse + check: `--files` snapshot files from `--dir` (e.g. the one benchmarks/bench_analysis.py
  --keep leaves; default: the test snapshots, repeated) through jsonload's stdlib path (`_slow_load`,
  the loader before orjson) and through load_json_file (orjson behind its screen); plain json.loads and
  bare orjson.loads for scale;
- schema validation of a `--hosts` report (benchmarks/bench_render.py's synthetic fleet) and of the
  snapshots: jsonschema alone vs validate_report / load_snapshot_file's jsonschema-rs first check;
- JSON rendering of that report: json.dumps (render_stdlib) vs orjson (render).
Prints figures only; asserts nothing (CPU, not wall: the machine is shared).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jsonschema  # noqa: E402
import orjson  # noqa: E402

from auditor.collect.schema import snapshot_json_schema  # noqa: E402
from auditor.compare.sources import _fast_check as snapshot_check  # noqa: E402
from auditor.inputfile import MAX_JSON_BYTES, read_bounded, read_text  # noqa: E402
from auditor.jsonload import _slow_load, load_json_file  # noqa: E402
from auditor.render.json_renderer import render, render_stdlib  # noqa: E402
from auditor.reportdoc import report_json_schema, validate_report  # noqa: E402
from benchmarks.bench_render import synthetic_report  # noqa: E402


def cpu(fn: Callable[[], Any]) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, help="snapshot directory (default: tests/data/snapshots)")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--hosts", type=int, default=10_000)
    args = ap.parse_args()
    source = sorted((args.dir or ROOT / "tests" / "data" / "snapshots").glob("*.json"))
    files = list(itertools.islice(itertools.cycle(source), args.files))
    size = sum(f.stat().st_size for f in files[:len(source)]) / min(len(source), len(files))
    print(f"{len(files)} snapshot files (~{size / 1024:.0f} KiB each); report of {args.hosts} hosts")
    rows: list[tuple[str, float, float]] = []

    def each(fn: Callable[[Path], Any]) -> Callable[[], None]:
        return lambda: [fn(f) for f in files] and None

    rows.append(("read + parse + check (per 1,000 files)",
                 cpu(each(lambda f: _slow_load(read_text(f, MAX_JSON_BYTES), str(f)))) * 1000 / len(files),
                 cpu(each(load_json_file)) * 1000 / len(files)))
    plain = cpu(each(lambda f: json.loads(read_bounded(f, MAX_JSON_BYTES)))) * 1000 / len(files)
    bare = cpu(each(lambda f: orjson.loads(read_bounded(f, MAX_JSON_BYTES)))) * 1000 / len(files)
    docs = [load_json_file(f) for f in files]
    validator = jsonschema.Draft202012Validator(snapshot_json_schema())
    rows.append(("snapshot schema validation (per 1,000 files)",
                 cpu(lambda: [next(iter(validator.iter_errors(d)), None) for d in docs]) * 1000 / len(files),
                 cpu(lambda: [snapshot_check().valid(d, from_json=True) for d in docs]) * 1000 / len(files)))
    report = synthetic_report(args.hosts)
    rows.append(("report schema validation", cpu(lambda: jsonschema.validate(report, report_json_schema())),
                 cpu(lambda: validate_report(report))))
    rows.append(("render json", cpu(lambda: render_stdlib(report)), cpu(lambda: render(report))))
    print("| stage | before CPU s | after CPU s | x |\n|---|---|---|---|")
    for name, before, after in rows:
        print(f"| {name} | {before:.2f} | {after:.2f} | {before / max(after, 1e-9):.1f} |")
    print(f"\nfor scale, per 1,000 files: plain json.loads {plain:.2f} s, bare orjson.loads {bare:.2f} s "
          f"(neither checks depth, long integers or surrogates)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
