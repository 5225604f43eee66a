"""The compare stage of `scan`: --baseline drift, --group-by comparison, --symptom ranking.

prepare() loads and validates the baseline and options before any host is contacted (bad input:
InputError naming file and line, exit 2); apply() takes the fleet index the evaluation core built
(deduplicated by content) and fills report.drift, report.baseline, report.comparison and report.symptom.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import get_close_matches

from ..collect.facthints import unknown_fact_path
from ..errors import InputError
from ..models import Report
from ..options import DEFAULT_TOP, CompareOptions
from .baseline import Baseline, load_baseline
from .drift import fleet_drift
from .groups import MIN_SCORE, compare_groups
from .index import FleetIndex
from .normalize import leaf_spec
from .symptom import Symptom, symptom_section


@dataclass(frozen=True)
class ComparePlan:
    baseline: Baseline | None = None
    group_by: str | None = None
    symptom: Symptom | None = None
    top: int = DEFAULT_TOP
    min_score: float = MIN_SCORE

    @property
    def active(self) -> bool:
        return bool(self.baseline or self.group_by or self.symptom)

    def keys(self) -> list[str]:
        """Host attributes the index must keep (labels / host facts used for grouping)."""
        return [key for _, key in self.options()]

    def options(self) -> list[tuple[str, str]]:
        """(option, key) for each host attribute an option names: what must be a label some host defines."""
        keys = [("--group-by", self.group_by)] if self.group_by else []
        if self.symptom and self.symptom.key:
            keys.append(("--symptom", self.symptom.key))
        return keys


def _check_key(key: str, option: str) -> str:
    key = key.strip()
    if not key:
        raise InputError(f"{option}: empty key")
    if key.startswith("facts."):
        resolved = leaf_spec(key)
        if resolved is None:
            raise InputError(f"{option}: {unknown_fact_path(key)}")
        if resolved[0].volatile:
            raise InputError(f"{option}: {key} is volatile and cannot group hosts")
    return key


_RULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
MAX_TOP = 1000


def _check_symptom(text: str, known_rules: frozenset[str] | None) -> Symptom:
    """`RULE_ID` (one of the loaded rules) or `KEY=VALUE` (a fact path in the schema, or a label)."""
    symptom = Symptom.parse(text)
    if symptom.key is not None:
        if not symptom.key:
            raise InputError(f"--symptom {text!r}: KEY=VALUE needs a key (a label or a facts.… path)")
        _check_key(symptom.key, "--symptom")
        if not symptom.value:
            raise InputError(f"--symptom {text!r}: KEY=VALUE needs a value")
        return symptom
    if not symptom.rule:
        raise InputError("--symptom: give a rule id or KEY=VALUE")
    if not _RULE_ID.match(symptom.rule):
        raise InputError(f"--symptom {text!r}: not a rule id and not KEY=VALUE")
    if known_rules is not None and symptom.rule not in known_rules:
        close = get_close_matches(symptom.rule, sorted(known_rules), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else " (see `ami-auditor rules list`)"
        raise InputError(f"--symptom: unknown rule {symptom.rule!r}: not among the loaded rules{hint}")
    return symptom


def prepare(opts: CompareOptions, known_rules: frozenset[str] | None = None) -> ComparePlan:
    """Validate compare options; `known_rules` (the rule ids the judge loaded) checks --symptom RULE."""
    baseline = load_baseline(opts.baseline) if opts.baseline else None
    group_by = _check_key(opts.group_by, "--group-by") if opts.group_by else None
    symptom = _check_symptom(opts.symptom, known_rules) if opts.symptom is not None else None
    if not 1 <= opts.top <= MAX_TOP:
        raise InputError(f"--top must be between 1 and {MAX_TOP}, not {opts.top}")
    if not 0.0 <= opts.min_score <= 1.0:
        raise InputError("--min-split-score must be between 0 and 1")
    return ComparePlan(baseline, group_by, symptom, opts.top, opts.min_score)


def apply(plan: ComparePlan, report: Report, index: FleetIndex) -> None:
    """Drift, comparison and symptom ranking over the fleet index the evaluation core built."""
    if plan.baseline is not None:
        report.baseline = plan.baseline.summary()
        report.drift.extend(fleet_drift(plan.baseline, index))
    if plan.group_by:
        report.comparison = compare_groups(index, plan.group_by, plan.min_score, plan.top)
        if not report.comparison["groups"]:
            report.notes.append(f"--group-by {plan.group_by}: no host has it, so nothing was compared")
    if plan.symptom:
        if plan.symptom.rule and report.rules and plan.symptom.rule not in {r.get("id") for r in report.rules}:
            report.notes.append(f"symptom rule {plan.symptom.rule!r} is not among the rules that ran")
        report.symptom = symptom_section(index, plan.symptom, report.findings, plan.top, report.rules)
        if not report.symptom["hosts_with"]:
            report.notes.append(f"no host shows the symptom {plan.symptom}; nothing to rank")
