"""`ami-auditor history DIR`: trends over saved scans (scheduled drift scans)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..context import Env
from ..errors import InputError
from ..history.store import load_scan, scan_files
from ..history.trends import summarize
from .checks import bounded_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="trends over scans saved with `scan --history DIR`")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--last", type=bounded_int(0, 10**6), default=0, metavar="N",
                   help="only the last N scans (default 0: all)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def _fmt(value: object) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, (int, float)) else str(value)


def run(args: argparse.Namespace, env: Env) -> int:
    directory = Path(args.directory)
    if not directory.is_dir():
        raise InputError("no such history directory", str(directory))
    files = scan_files(directory)
    if args.last > 0:
        files = files[-args.last:]
    if not files:
        raise InputError("no saved scans (scan-*.json) in this directory", str(directory))
    summary = summarize([load_scan(p) for p in files])
    if args.json:
        env.out(json.dumps(summary, indent=2))
        return 0
    env.out(f"{summary['scans']} scans in {directory}/ ({files[0].name} … {files[-1].name})")
    env.out(f"{'host':<20} {'scans':>5} {'status':<12} {'dying first':>12} {'dying last':>11} "
            f"{'dying/hour':>11} {'findings':>8} {'drift':>6}")
    for row in summary["hosts"]:
        env.out(f"{row['host']:<20} {row['scans']:>5} {row['last_status']:<12} {_fmt(row['dying_first']):>12} "
                f"{_fmt(row['dying_last']):>11} {_fmt(row['dying_per_hour']):>11} {row['findings_last']:>8} "
                f"{row['drift_last']:>6}")
    for title, keys in (("new since the previous scan", summary["new_findings"]),
                        ("resolved since the previous scan", summary["resolved_findings"])):
        if keys:
            env.out(f"\nfindings {title}:")
            for host, rule, item in keys:
                env.out(f"  {host}: {rule}{' [' + item + ']' if item else ''}")
    return 0
