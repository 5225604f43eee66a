"""The plain judge: every rule evaluated on every host, nothing remembered between hosts.

It is the reference the caching judge (judge/engine.py) must equal finding for finding. A facts area that
was not collected (`facts[area]` is None) yields an explicit "could not be evaluated" finding (severity
info, evidence.status = unknown), never a silent pass. A rule reading an area that does not apply to the
target (the snapshot's `not_applicable`: an image's runtime facts) is not run and makes no finding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Protocol, TypeAlias

from jmespath.exceptions import JMESPathError
from jmespath.visitor import TreeInterpreter

from ..collect.schema import derived_areas, fact_tree
from ..models import Finding
from ..snapshotdoc import Snapshot
from . import fleet
from .functions import OPTIONS
from .rules import Rule, RuleSet
from .templates import render_title

UNKNOWN_SEVERITY = "info"
FIELDS = ("rule", "severity", "title", "description", "remediation", "item", "evidence", "tags", "link")

Found = list[dict[str, Any]]  # a rule's findings on a host, each as Finding fields without `host`
Results = Callable[[int, Rule, Snapshot], Found]
Unknowns = Callable[[int, Rule, Snapshot, set[str]], "Finding | None"]


def truthy(value: Any) -> bool:
    """JMESPath truthiness: false, null, "", [] and {} are false; every number (0 too) is true."""
    return not (value is None or value is False or value == "" or value == [] or value == {})


def host_name(snapshot: Snapshot) -> str:
    return str(snapshot.get("name") or snapshot.get("target") or "?")


def _item_name(rule: Rule, match: Any, ctx: Mapping[str, Any], interp: TreeInterpreter) -> str | None:
    if rule.item_expr is not None:
        value = interp.visit(rule.item_expr.parsed, ctx)
    elif isinstance(match, dict):
        value = match.get(rule.item_key) if rule.item_key else None
    else:
        value = match
    return None if value is None else str(value)


def evaluate(rule: Rule, snapshot: Snapshot, interp: TreeInterpreter) -> list[Finding]:
    """Run one rule on one snapshot; findings carry host="" (filled in by the caller)."""
    if rule.when is not None and not truthy(interp.visit(rule.when.parsed, snapshot)):
        return []
    if rule.select is None:
        matches: list[Any] = [None]
    else:
        result = interp.visit(rule.select.parsed, snapshot)
        matches = [m for m in result if truthy(m)] if isinstance(result, list) else [result] * truthy(result)
    out = []
    for match in matches:
        ctx = snapshot if rule.select is None else {**snapshot, "item": match}
        if rule.evidence:
            evidence = {name: interp.visit(expr.parsed, ctx) for name, expr in rule.evidence}
        elif isinstance(match, dict):
            evidence = dict(match)
        else:
            evidence = {} if match is None else {"value": match}
        context = {
            "item": match, "facts": snapshot.get("facts"), "host": snapshot.get("host"),
            "labels": snapshot.get("labels"), "name": snapshot.get("name"), "params": rule.params,
            "evidence": evidence,
        }
        title = render_title(rule.title, context, rule.id)
        link = render_title(rule.link, context, title) if rule.link is not None else None
        out.append(Finding(host="", rule=rule.id, severity=rule.severity, title=title, description=rule.description,
                           remediation=rule.remediation, item=_item_name(rule, match, ctx, interp), evidence=evidence,
                           tags=rule.tags, link=link))
    return out


def not_evaluated(rule: Rule, status: str, why: str, evidence: dict[str, Any]) -> Finding:
    return Finding(host="", rule=rule.id, severity=UNKNOWN_SEVERITY, title=f"{rule.id} could not be evaluated: {why}",
                   description=rule.description, evidence={"status": status, **evidence},
                   tags=(*rule.tags, status))


def unknown(rule: Rule, snapshot: Snapshot, absent: set[str]) -> Finding | None:
    """The not-evaluated finding when an area the rule reads is in `absent` (not collected on this host)."""
    missing = sorted(rule.areas & absent)
    if not missing:
        return None
    errors = snapshot.get("errors") or {}
    failed = set((snapshot.get("probe") or {}).get("failed_areas") or ())
    why = "; ".join(f"{a} {'failed' if a in failed else 'not collected'}" + (f" ({errors[a]})" if errors.get(a) else "")
                    for a in missing)
    return not_evaluated(rule, "unknown", why, {"missing": missing,
                                                "errors": {a: errors[a] for a in missing if a in errors}})


@lru_cache(maxsize=1)
def _all_areas() -> frozenset[str]:
    return frozenset(fact_tree().children["facts"].children)


@dataclass(frozen=True, slots=True)
class FleetError:
    """A fleet rule's expression failed on a host: the rule gives one error finding for the scan."""

    why: str


FleetRead: TypeAlias = "fleet.Taking | Finding | FleetError | None"


class Judging(Protocol):
    """What the evaluation core asks of a judge (the plain one and the caching one alike)."""

    rules: list[Rule]

    def judge(self, snapshot: Snapshot) -> list[Finding]: ...

    def fleet_reads(self, snapshot: Snapshot) -> tuple[FleetRead, ...]: ...

    def fleet_findings(self, hosts: list[tuple[fleet.FleetSlice, tuple[FleetRead, ...]]]) -> list[Finding]: ...


class WholeScan:
    """Judging a list of snapshots held at once (tests, `rules check`), for any judge."""

    def judge_all(self: Judging, snapshots: list[Snapshot]) -> list[Finding]:
        """Every host's findings, then the fleet rules' over all of them."""
        findings: list[Finding] = []
        for snapshot in snapshots:
            findings.extend(self.judge(snapshot))
        return findings + WholeScan.judge_fleet(self, snapshots)

    def judge_fleet(self: Judging, snapshots: list[Snapshot]) -> list[Finding]:
        """The fleet rules' findings over all `snapshots` (one scan)."""
        return self.fleet_findings([(fleet.as_slice(s), self.fleet_reads(s)) for s in snapshots])


class PlainJudge(WholeScan):
    """Judges snapshots with a rule set, every rule afresh on every host. `interpreter`: what evaluates
    JMESPath (the caching judge passes one that remembers filter verdicts per distinct row)."""

    def __init__(self, ruleset: RuleSet, interpreter: TreeInterpreter | None = None):
        self.rules = list(ruleset.rules)
        self.interpreter = interpreter or TreeInterpreter(OPTIONS)
        self._derived = derived_areas()  # trends: absent without history, which is no trend, not an unknown
        self.evaluations = 0  # rule runs performed

    def results(self, index: int, rule: Rule, snapshot: Snapshot) -> Found:
        """The rule's findings on this snapshot, as Finding fields without the host (an expression that
        fails is the rule's "could not be evaluated" finding)."""
        self.evaluations += 1
        try:
            found = evaluate(rule, snapshot, self.interpreter)
        except (JMESPathError, TypeError, ValueError) as exc:
            found = [not_evaluated(rule, "error", f"{type(exc).__name__}: {exc}", {})]
        return [{k: getattr(f, k) for k in FIELDS} for f in found]

    def unknown(self, index: int, rule: Rule, snapshot: Snapshot, absent: set[str]) -> Finding | None:
        return unknown(rule, snapshot, absent)

    def host_rules(self, snapshot: Snapshot) -> Iterator[tuple[int, Rule]]:
        """The per-host rules that apply to this snapshot, with their index in `rules`."""
        not_applicable = set(snapshot.get("not_applicable") or ())
        for index, rule in enumerate(self.rules):
            if rule.fleet is not None:
                continue  # over all hosts: judge_fleet
            if not_applicable and rule.areas & not_applicable and not rule.areas >= _all_areas():
                continue  # reads a fact that does not apply here (a rule over all facts still runs)
            yield index, rule

    def absent(self, snapshot: Snapshot) -> set[str]:
        """The areas this host lacks that some rule reads: not collected, or failed."""
        facts: Mapping[str, Any] = snapshot.get("facts") or {}
        not_applicable = set(snapshot.get("not_applicable") or ())
        absent = {a for a, v in facts.items() if v is None} - not_applicable
        absent |= {a for r in self.rules for a in r.areas if a not in facts and a not in self._derived}
        return absent

    def judge(self, snapshot: Snapshot) -> list[Finding]:
        """All findings (including not-evaluated ones) for one snapshot."""
        return self.judge_with(snapshot, self.results, self.unknown)

    def judge_with(self, snapshot: Snapshot, results: Results, unknowns: Unknowns) -> list[Finding]:
        """`judge`, each rule's findings from `results` and its not-evaluated finding from `unknowns`."""
        host = host_name(snapshot)
        absent = self.absent(snapshot)
        out: list[Finding] = []
        for index, rule in self.host_rules(snapshot):
            lacking = unknowns(index, rule, snapshot, absent) if absent else None
            if lacking is not None:
                out.append(replace(lacking, host=host))
                continue
            out.extend(Finding(host=host, **f) for f in results(index, rule, snapshot))
        return out

    def fleet_reads(self, snapshot: Snapshot) -> tuple[FleetRead, ...]:
        """What the host gives each fleet rule (in rule order), worked out as it is judged: its part
        (fleet.Taking), None when it takes no part (an area that does not apply, `where` false), a
        "could not be evaluated" finding when it lacks an area the rule reads, or the error a rule hit."""
        return self.fleet_reads_with(snapshot, self.unknown)

    def fleet_reads_with(self, snapshot: Snapshot, unknowns: Unknowns) -> tuple[FleetRead, ...]:
        return tuple(self._fleet_read(index, rule, snapshot, unknowns) for index, rule in enumerate(self.rules)
                     if rule.fleet is not None)

    def _fleet_read(self, index: int, rule: Rule, snapshot: Snapshot, unknowns: Unknowns) -> FleetRead:
        facts: Mapping[str, Any] = snapshot.get("facts") or {}
        missing = {a for a in rule.areas if facts.get(a) is None}
        if missing & set(snapshot.get("not_applicable") or ()):
            return None
        lacking = unknowns(index, rule, snapshot, missing) if missing else None
        if lacking is not None:
            return replace(lacking, host=host_name(snapshot))
        try:
            return fleet.read(rule, snapshot)
        except (JMESPathError, TypeError, ValueError) as exc:
            return FleetError(f"{type(exc).__name__}: {exc}")

    def fleet_findings(self, hosts: list[tuple[fleet.FleetSlice, tuple[FleetRead, ...]]]) -> list[Finding]:
        """The fleet rules' findings from each host's reads (`fleet_reads`), hosts in input order; a
        host needs only the slice the rules' titles read (evaluate/retained.fleet_slice)."""
        out: list[Finding] = []
        for index, rule in enumerate(r for r in self.rules if r.fleet is not None):
            taking: list[tuple[fleet.FleetSlice, fleet.Taking]] = []
            failed: FleetError | None = None
            for cut, reads in hosts:
                got = reads[index]
                if isinstance(got, fleet.Taking):
                    taking.append((cut, got))
                elif isinstance(got, Finding):  # a host lacking what the rule reads
                    out.append(got)
                elif isinstance(got, FleetError) and failed is None:  # the first error stands for the rule
                    failed = got
            if failed is not None:
                out.append(replace(not_evaluated(rule, "error", failed.why, {}), host="*"))
            else:
                out.extend(fleet.findings(rule, taking))
        return out
