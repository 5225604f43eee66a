"""`ami-auditor analyze DIR…`: judge, compare and report saved snapshots (no host is contacted)."""

from __future__ import annotations

import argparse

from ..context import Env
from ..options import AnalyzeOptions
from . import analysis_options as shared


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="judge, compare and report saved snapshots (from `collect -o DIR`), "
                                       "streamed on every core; no host is contacted")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="directory of snapshot files (*.json); repeatable")
    p.add_argument("--jobs", type=int, default=0, metavar="N",
                   help="worker processes (default 0: one per CPU)")
    shared.add_judge_options(p)
    shared.add_store_options(p, "analysis")
    shared.add_compare_options(p)
    shared.add_output_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from ..run.analyze import analyze  # the rooms load when an analysis runs, not for `--help`

    return analyze(AnalyzeOptions(dirs=tuple(args.dirs), jobs=args.jobs, fail_on=args.fail_on,
                                  judge=shared.judge_options(args), compare=shared.compare_options(args),
                                  render=shared.render_options(args), history=shared.history_options(args)), env)
