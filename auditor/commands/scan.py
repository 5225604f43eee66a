"""`ami-auditor scan`: the command line of the scan in auditor/run/scan.py.

This module only declares the options and turns the parsed arguments into a ScanOptions;
`run.scan.scan()` does the work (every input validated before any host is contacted).
"""

from __future__ import annotations

import argparse

from ..context import Env
from ..options import NotifyOptions, ScanOptions
from .analysis_options import (
    add_compare_options,
    add_judge_options,
    add_output_options,
    add_store_options,
    compare_options,
    history_options,
    judge_options,
    render_options,
)
from .common import add_target_options, target_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scan", help="collect, judge with rules, compare, and report")
    add_target_options(p)
    add_judge_options(p)
    h = add_store_options(p, "scan")
    h.add_argument("--notify", action="append", default=[],
                   metavar="sns:ARN|webhook:URL|securityhub[:REGION]|ssm-compliance[:REGION]",
                   help="alert on findings first seen in this scan, or keep Security Hub / SSM Compliance in "
                        "step with the findings (needs the store); repeatable")
    add_compare_options(p)
    add_output_options(p)
    p.set_defaults(func=run)


def scan_options(args: argparse.Namespace) -> ScanOptions:
    """The typed options of a parsed `scan` command line."""
    return ScanOptions(
        targets=target_options(args),
        fail_on=args.fail_on,
        judge=judge_options(args),
        history=history_options(args),
        notify=NotifyOptions(targets=tuple(args.notify)),
        compare=compare_options(args),
        render=render_options(args),
    )


def run(args: argparse.Namespace, env: Env) -> int:
    from ..run.scan import scan  # the rooms load when a scan runs, not for `--help`

    return scan(scan_options(args), env)
