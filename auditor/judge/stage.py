"""The judge stage of `scan`: load and validate rules and waivers up front, then judge every snapshot."""

from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import dataclass, field

from ..models import Report
from .engine import Judge
from .params import Override, load_config, parse_set
from .rules import RuleSet, load_rules
from .waivers import Waiver, apply_waivers, load_waivers


@dataclass
class JudgePlan:
    """Everything the judge needs, validated before any host is contacted."""

    ruleset: RuleSet
    waivers: list[Waiver] = field(default_factory=list)
    today: dt.date = field(default_factory=dt.date.today)


def add_rule_options(parser: argparse.ArgumentParser) -> None:
    """Options that choose and configure rules (shared by `scan` and `rules`)."""
    parser.add_argument("--rules", action="append", default=[], metavar="DIR",
                        help="extra rule packs (a directory of *.yaml, or a file); repeatable; adds to the built-ins")
    parser.add_argument("--no-builtin-rules", action="store_true", help="do not load the built-in rule packs")
    parser.add_argument("--set", action="append", default=[], metavar="PACK.PARAM=VALUE", dest="rule_set",
                        help="override a rule-pack parameter, e.g. cgroups.dying_warn=500 (VALUE is YAML)")
    parser.add_argument("--rules-config", default=None, metavar="FILE",
                        help="YAML file of rule-pack parameters: {pack: {param: value}}")


def add_options(parser: argparse.ArgumentParser) -> None:
    add_rule_options(parser)
    parser.add_argument("--waivers", action="append", default=[], metavar="FILE",
                        help="waivers YAML (rule, hosts/labels, item, reason, expires); repeatable")


def ruleset_from_args(args: argparse.Namespace) -> RuleSet:
    overrides: list[Override] = []
    if args.rules_config:
        overrides.extend(load_config(args.rules_config))
    overrides.extend(parse_set(text) for text in args.rule_set)
    return load_rules(args.rules, builtin=not args.no_builtin_rules, overrides=overrides)


def prepare(args: argparse.Namespace) -> JudgePlan:
    ruleset = ruleset_from_args(args)
    ids = ruleset.ids()
    waivers = [w for path in args.waivers for w in load_waivers(path, ids)]
    return JudgePlan(ruleset, waivers)


def apply(plan: JudgePlan, report: Report, snapshots: list[dict]) -> None:
    """Append findings (waivers applied), list the rules that ran, and note expired waivers."""
    findings = Judge(plan.ruleset).judge_all(snapshots)
    labels = {str(s.get("name")): dict(s.get("labels") or {}) for s in snapshots}
    for host in report.hosts:
        labels.setdefault(host.name, dict(host.spec.labels))
    findings, notes = apply_waivers(findings, plan.waivers, labels, plan.today)
    report.findings.extend(findings)
    report.rules = [{"id": r.id, "severity": r.severity, "title": r.name, "pack": r.pack, "tags": list(r.tags),
                     "source": r.source} for r in plan.ruleset.rules]
    report.notes.extend(notes)
