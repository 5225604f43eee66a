"""The judge stage: load and validate rules and waivers up front; after the evaluation core (auditor/evaluate/)
judged every host, waivers, the rules section and chains."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from ..chaingraph import positions
from ..models import Finding, Report
from ..options import JudgeOptions, RuleOptions
from .chains import host_chains
from .params import Override, load_config, parse_set
from .rules import RuleSet, load_rules
from .waivers import Waiver, apply_waivers, load_waivers


@dataclass
class JudgePlan:
    """Everything the judge needs, validated before any host is contacted."""

    ruleset: RuleSet
    waivers: list[Waiver] = field(default_factory=list)
    today: dt.date = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).date())  # reports are UTC


def load_ruleset(opts: RuleOptions) -> RuleSet:
    """The rule packs chosen by `opts`, parameters applied (InputError naming file and line if bad)."""
    overrides: list[Override] = []
    if opts.config:
        overrides.extend(load_config(opts.config))
    overrides.extend(parse_set(text) for text in opts.settings)
    return load_rules(list(opts.rule_paths), builtin=opts.builtin, overrides=overrides)


def prepare(opts: JudgeOptions) -> JudgePlan:
    ruleset = load_ruleset(opts.rules)
    ids = ruleset.ids()
    waivers = [w for path in opts.waivers for w in load_waivers(path, ids)]
    return JudgePlan(ruleset, waivers)


def apply(plan: JudgePlan, report: Report, findings: list[Finding], labels: dict[str, dict[str, str]]) -> None:
    """Waivers over `findings` (every host's and the fleet rules', judged by the evaluation core), then the
    rules and chains sections."""
    for host in report.hosts:
        labels.setdefault(host.name, dict(host.spec.labels))
    findings, notes = apply_waivers(findings, plan.waivers, labels, plan.today)
    report.findings.extend(findings)
    graph = plan.ruleset.graph()
    chain_position = positions(graph)
    report.rules = [{"id": r.id, "severity": r.severity, "title": r.name, "pack": r.pack, "tags": list(r.tags),
                     "source": r.source, "leads_to": list(r.leads_to), "chain_position": chain_position.get(r.id),
                     "reads": [f"facts.{area}.{key}" if key else f"facts.{area}" for area, key in r.reads],
                     "refs": list(r.refs)}
                    for r in plan.ruleset.rules]
    report.chains = host_chains(report.findings, graph)
    report.notes.extend(notes)
