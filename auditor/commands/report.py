"""`ami-auditor report SCAN.json --format html[,md,…] [--out DIR]`: re-render a saved report.

The saved document is validated against its schema first; every format is rendered before anything is
written, so bad input exits 2 with nothing written; the formats then replace the previous set as a whole
or not at all (a full or read-only disk: exit 3). Without --out, one format goes to stdout.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import exitcodes
from ..atomicio import check_writable_dir, write_files
from ..context import Env
from ..errors import InputError
from ..render import RENDERERS
from ..render.stage import REPORT_STEM, parse_formats
from ..reportdoc import load_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="re-render a saved report JSON as html, md, junit or json")
    p.add_argument("report", metavar="SCAN.json", help="a report written by `scan --format json`")
    p.add_argument("--format", default="html", metavar="FMT[,FMT…]",
                   help=f"formats: {', '.join(RENDERERS)} (default html)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write report.<ext> per format here (default: one format to stdout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    formats = parse_formats(args.format)
    if not formats:
        raise InputError("--format: give at least one format")
    if args.out is None and len(formats) > 1:
        raise InputError("several formats need --out DIR")
    doc = load_report(args.report)
    rendered = [(RENDERERS[fmt][1], RENDERERS[fmt][0](doc)) for fmt in formats]
    if args.out is None:
        env.write(rendered[0][1])
        return exitcodes.OK
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError("--out must be a directory", str(out))
    check_writable_dir(out, "--out")
    source = Path(args.report).resolve()
    targets = [(out / f"{REPORT_STEM}.{ext}", text) for ext, text in rendered]
    if any(path.resolve() == source for path, _ in targets):
        raise InputError("would overwrite the report being read; choose another --out", args.report)
    for path, _ in targets:
        if path.is_dir():
            raise InputError("is a directory; cannot write the report there", str(path))
    write_files(targets)  # the whole set or nothing (a full disk: exit 3, the previous set kept)
    for path, _ in targets:
        env.out(str(path))
    return exitcodes.OK
