"""Command-line options shared by `scan` and `analyze`: judging, comparing and writing the report."""

from __future__ import annotations

import argparse

from ..colour import MODES
from ..history.db import DEFAULT_SHOWN
from ..models import SEVERITIES
from ..options import DEFAULT_MIN_SCORE, DEFAULT_TOP, CompareOptions, HistoryOptions, JudgeOptions, RenderOptions
from ..render import RENDERERS
from .rule_options import add_rule_options, rule_options


def add_judge_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fail-on", choices=SEVERITIES, default="high",
                   help="exit 1 when a finding or drift at or above this severity is found (default high)")
    add_rule_options(p)
    p.add_argument("--waivers", action="append", default=[], metavar="FILE",
                   help="waivers YAML (rule, hosts/labels, item, reason, expires); repeatable")


def add_compare_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("compare")
    g.add_argument("--baseline", metavar="FILE", help="golden baseline YAML (from `ami-auditor baseline capture`)")
    g.add_argument("--group-by", metavar="LABEL_OR_FACT",
                   help="compare groups: az, az_id, ami_id, instance_type, any label, or a fact path")
    g.add_argument("--symptom", metavar="RULE_ID|KEY=VALUE",
                   help="rank the facts that separate hosts with this symptom (a rule firing, or a label)")
    g.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N",
                   help=f"symptom facts, and hosts unlike their group, to list (default {DEFAULT_TOP})")
    g.add_argument("--min-split-score", type=float, default=DEFAULT_MIN_SCORE, metavar="S",
                   help=f"least association score for a split (default {DEFAULT_MIN_SCORE})")


def add_store_options(p: argparse.ArgumentParser, what: str) -> argparse._ArgumentGroup:
    """--store / --no-store: the history store `what` (a scan, an analysis) is recorded in."""
    h = p.add_argument_group("history")
    h.add_argument("--store", default=None, metavar="PATH",
                   help=f"history store (SQLite) to record this {what} in and derive trend facts from "
                        f"(default {DEFAULT_SHOWN}; see `ami-auditor history list`)")
    h.add_argument("--no-store", action="store_true", help=f"do not record this {what} (no trend facts)")
    return h


def history_options(args: argparse.Namespace) -> HistoryOptions:
    return HistoryOptions(store=args.store, no_store=args.no_store)


def add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", default=None, metavar="FMT[,FMT…]",
                   help=f"report formats: {', '.join(RENDERERS)}; one format without --out goes to stdout "
                        "(the summary then goes to stderr); default json with --out")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write report.<ext> per format here (default: no files; see --format)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no summary and no progress: the exit code (and any report asked for) only")
    p.add_argument("--color", "--colour", choices=MODES, default="auto",
                   help="colour severities and statuses in the summary: auto (a terminal, unless NO_COLOR is "
                        "set), always, never; reports are never coloured (default auto)")


def judge_options(args: argparse.Namespace) -> JudgeOptions:
    return JudgeOptions(rules=rule_options(args), waivers=tuple(args.waivers))


def compare_options(args: argparse.Namespace) -> CompareOptions:
    return CompareOptions(baseline=args.baseline, group_by=args.group_by, symptom=args.symptom,
                          top=args.top, min_score=args.min_split_score)


def render_options(args: argparse.Namespace) -> RenderOptions:
    return RenderOptions(formats=args.format or "json", out=args.out,
                         stdout=args.format is not None and args.out is None, quiet=args.quiet, color=args.color)
