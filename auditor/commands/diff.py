"""`ami-auditor diff A B`: what differs from A to B (auditor/run/diff.py). Each side is a snapshot file
(.json), a baseline (.yaml/.yml), a live target (local, ssh://…, ssm://…, image://…, ami://…) or a host name
from `-i INVENTORY`. Exit 0 when they agree, 1 when they differ (like diff(1)), 2 on bad input, 3 when a
host is not reached.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomicio import check_writable_file, write_text_atomic
from ..context import Env
from ..models import HostSpec
from ..render.release_notes import FORMATS as RELEASE_FORMATS
from ..render.release_notes import render as render_release_notes
from ..reporttypes import ReleaseNotesDoc
from .aws_options import REGION_RE, add_ami_options, aws_from_args, checked
from .checks import MAX_DEADLINE_S, bounded_float

if TYPE_CHECKING:  # imported where used: `ami-auditor --help` does not load deepdiff, re2 or jsonschema
    from ..compare.drift import Difference


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="compare any two of: snapshot files, baselines, live targets")
    p.add_argument("a", metavar="A", help="snapshot.json, baseline.yaml, a target, or an inventory host name")
    p.add_argument("b", metavar="B", help="the same kinds as A")
    p.add_argument("-i", "--inventory", action="append", default=[], metavar="FILE",
                   help="inventory YAML: lets A/B name its hosts (and gives their SSH options)")
    p.add_argument("--deadline", type=bounded_float(0.0, MAX_DEADLINE_S), default=60.0, metavar="SECONDS",
                   help="per live host (default 60)")
    p.add_argument("--json", action="store_true", help="print the differences as a JSON list")
    p.add_argument("--out", metavar="FILE", help="write what would be printed (in the chosen format) to FILE, "
                                                 "atomically, and print the summary and `wrote FILE`")
    p.add_argument("--format", choices=("text", *RELEASE_FORMATS), default="text",
                   help="text (default): one line per difference; md, json, html: release notes grouped by area "
                        "(units, binaries, packages in version order, kernel, sysctls), worst first")
    aws = p.add_argument_group("AWS (ami:// sides)")
    aws.add_argument("--region", type=checked(REGION_RE, "region"), help="AWS region (default: AWS_REGION / profile)")
    aws.add_argument("--profile", metavar="NAME", help="AWS profile (default: the normal credential chain)")
    add_ami_options(aws)
    p.set_defaults(func=run)


def _show(value: Any) -> str:
    from ..compare.normalize import display

    return "—" if value is None else display(value)


def _document(args: argparse.Namespace, diffs: list[Difference], summary: str, notes: ReleaseNotesDoc) -> str:
    """What `diff` prints in the chosen format, host text made inert (textsafe), ending in a newline."""
    from ..textsafe import block, json_text

    if args.format != "text":
        text = render_release_notes(notes, args.format).rstrip("\n") + "\n"
        return json_text(text) if args.format == "json" else block(text)
    if args.json:
        return json_text(json.dumps([asdict(d) for d in diffs], indent=2, ensure_ascii=False, default=list)) + "\n"
    lines = [f"{d.kind:<8} [{d.severity}] {d.path}: {_show(d.expected)} → {_show(d.actual)}" for d in diffs]
    return block("\n".join([*lines, f"{summary} from {args.a} to {args.b}"]) + "\n")


def run(args: argparse.Namespace, env: Env) -> int:
    from ..render.release_notes import summary_line
    from ..run.diff import collect_sides, diff, load_side, unreached
    from ..targets.resolve import inventory_specs, with_ami_settings

    out = Path(args.out).expanduser() if args.out else None
    if out is not None:
        check_writable_file(out, "--out")  # before any host is contacted
    inventory = {s.name: s for s in inventory_specs(args.inventory)}
    sides = [load_side(args.a, inventory), load_side(args.b, inventory)]
    live = with_ami_settings([s for s in sides if isinstance(s, HostSpec)], aws_from_args(args))
    collected = iter(collect_sides(live, args.deadline, env))
    loaded = [next(collected) if isinstance(side, HostSpec) else side for side in sides]
    a, b = loaded
    if a is None or b is None:
        return unreached()
    result = diff(a, b, args.a, args.b)
    summary = summary_line(result.notes)  # one count for text, md, json and html: changes, then their differences
    document = _document(args, result.differences, summary, result.notes)
    if out is None:
        env.write(document, escape=False)
    else:
        write_text_atomic(out, document)
        env.out(f"{summary} from {args.a} to {args.b}")
        env.out(f"wrote {out}")
    return result.exit_code
