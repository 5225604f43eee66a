"""`ami-auditor scan`: the command line of the typed pipeline in auditor/pipeline.py.

This module only declares the options and turns the parsed arguments into a ScanOptions;
`pipeline.scan()` does the work (every input validated before any host is contacted).
"""

from __future__ import annotations

import argparse

from ..context import Env
from ..history.db import DEFAULT_SHOWN
from ..models import SEVERITIES
from ..options import (
    DEFAULT_MIN_SCORE,
    DEFAULT_TOP,
    CompareOptions,
    HistoryOptions,
    JudgeOptions,
    NotifyOptions,
    RenderOptions,
    ScanOptions,
)
from ..render import RENDERERS
from .common import add_target_options, target_options
from .rule_options import add_rule_options, rule_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scan", help="collect, judge with rules, compare, and report")
    add_target_options(p)
    p.add_argument("--fail-on", choices=SEVERITIES, default="high",
                   help="exit 1 when a finding or drift at or above this severity is found (default high)")
    add_rule_options(p)
    p.add_argument("--waivers", action="append", default=[], metavar="FILE",
                   help="waivers YAML (rule, hosts/labels, item, reason, expires); repeatable")
    h = p.add_argument_group("history")
    h.add_argument("--store", default=None, metavar="PATH",
                   help="history store (SQLite) to record this scan in and derive trend facts from "
                        f"(default {DEFAULT_SHOWN}; see `ami-auditor history list`)")
    h.add_argument("--no-store", action="store_true", help="do not record this scan (no trend facts)")
    h.add_argument("--notify", action="append", default=[], metavar="sns:ARN|webhook:URL",
                   help="alert on findings first seen in this scan (needs the store); repeatable")
    g = p.add_argument_group("compare")
    g.add_argument("--baseline", metavar="FILE", help="golden baseline YAML (from `ami-auditor baseline capture`)")
    g.add_argument("--group-by", metavar="LABEL_OR_FACT",
                   help="compare groups: az, az_id, ami_id, instance_type, any label, or a fact path")
    g.add_argument("--symptom", metavar="RULE_ID|KEY=VALUE",
                   help="rank the facts that separate hosts with this symptom (a rule firing, or a label)")
    g.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N",
                   help=f"symptom facts to list (default {DEFAULT_TOP})")
    g.add_argument("--min-split-score", type=float, default=DEFAULT_MIN_SCORE, metavar="S",
                   help=f"least association score for a split (default {DEFAULT_MIN_SCORE})")
    p.add_argument("--format", default="json", metavar="FMT[,FMT…]",
                   help=f"report formats: {', '.join(RENDERERS)} (default json)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write report.<ext> per format here (default: no files, summary only)")
    p.set_defaults(func=run)


def scan_options(args: argparse.Namespace) -> ScanOptions:
    """The typed options of a parsed `scan` command line."""
    return ScanOptions(
        targets=target_options(args),
        fail_on=args.fail_on,
        judge=JudgeOptions(rules=rule_options(args), waivers=tuple(args.waivers)),
        history=HistoryOptions(store=args.store, no_store=args.no_store),
        notify=NotifyOptions(targets=tuple(args.notify)),
        compare=CompareOptions(baseline=args.baseline, group_by=args.group_by, symptom=args.symptom,
                               top=args.top, min_score=args.min_split_score),
        render=RenderOptions(formats=args.format, out=args.out),
    )


def run(args: argparse.Namespace, env: Env) -> int:
    from ..pipeline import scan  # the rooms load when a scan runs, not for `--help`

    return scan(scan_options(args), env)
