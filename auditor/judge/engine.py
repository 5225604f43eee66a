"""Evaluate compiled rules on snapshots → Findings.

Each rule runs once per distinct content of what it reads (the facts areas, and host/labels/name when
it reads those): results are cached by a digest of that content and fanned out to every host that
shares it, so a fleet of 10,000 hosts with 50 distinct configurations costs ~50 evaluations per rule.
A facts area that was not collected (`facts[area]` is None) yields an explicit "could not be evaluated"
finding (severity info, evidence.status = unknown), never a silent pass. A rule reading an area that
does not apply to the target (the snapshot's `not_applicable`: an image's runtime facts) is not run and
makes no finding: the report lists those areas per host.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, TypeAlias

from jmespath.exceptions import JMESPathError
from jmespath.visitor import TreeInterpreter

from ..collect.schema import derived_areas, fact_tree
from ..contentkey import content_digest
from ..models import Finding
from ..snapshotdoc import Snapshot
from . import fleet
from .functions import OPTIONS
from .rowmemo import RowMemoInterpreter
from .rules import Rule, RuleSet
from .shapes import Shape, projector
from .templates import render_title

UNKNOWN_SEVERITY = "info"
_FIELDS = ("rule", "severity", "title", "description", "remediation", "item", "evidence", "tags", "link")


def truthy(value: Any) -> bool:
    """JMESPath truthiness: false, null, "", [] and {} are false; every number (0 too) is true."""
    return not (value is None or value is False or value == "" or value == [] or value == {})


def _digest(value: Any) -> bytes:
    """Digest of parsed-JSON content (contentkey); what marshal cannot write digests as canonical JSON."""
    digest = content_digest(value)
    if digest is None:
        data = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
        digest = hashlib.blake2b(data, digest_size=16).digest()
    return digest


class _Digests:
    """Per-snapshot memo of content digests (an area, host, labels, …)."""

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot
        self.facts = snapshot.get("facts") or {}
        self.memo: dict[str, bytes] = {}
        self.shaped: dict[tuple[str, Shape], bytes] = {}

    def area(self, name: str, shape: Shape) -> bytes:
        """Digest of the part of area `name` that `shape` reads (judge/shapes.py)."""
        memo_key = (name, shape)
        got = self.shaped.get(memo_key)
        if got is None:
            got = self.shaped[memo_key] = _digest(projector(shape)(self.facts.get(name)))
        return got

    def root(self, name: str, keys: tuple[str, ...] | None = None) -> bytes:
        """Digest of a top-level value, or of only `keys` of it (a rule that reads host.az alone)."""
        memo_key = f"{name}:{','.join(keys)}" if keys else name
        if memo_key not in self.memo:
            value = self.snapshot if name == "*" else self.snapshot.get(name)
            if keys and isinstance(value, dict):
                value = {k: value.get(k) for k in keys}
            self.memo[memo_key] = _digest(value)
        return self.memo[memo_key]


def _item_name(rule: Rule, match: Any, ctx: Mapping[str, Any], interp: TreeInterpreter) -> str | None:
    if rule.item_expr is not None:
        value = interp.visit(rule.item_expr.parsed, ctx)
    elif isinstance(match, dict):
        value = match.get(rule.item_key) if rule.item_key else None
    else:
        value = match
    return None if value is None else str(value)


def _evaluate(rule: Rule, snapshot: Snapshot, interp: TreeInterpreter) -> list[Finding]:
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


def _not_evaluated(rule: Rule, status: str, why: str, evidence: dict[str, Any]) -> Finding:
    return Finding(host="", rule=rule.id, severity=UNKNOWN_SEVERITY, title=f"{rule.id} could not be evaluated: {why}",
                   description=rule.description, evidence={"status": status, **evidence},
                   tags=(*rule.tags, status))


def _unknown(rule: Rule, snapshot: Snapshot, absent: set[str]) -> Finding | None:
    """The not-evaluated finding when an area the rule reads is in `absent` (not collected on this host)."""
    missing = sorted(rule.areas & absent)
    if not missing:
        return None
    errors = snapshot.get("errors") or {}
    failed = set((snapshot.get("probe") or {}).get("failed_areas") or ())
    why = "; ".join(f"{a} {'failed' if a in failed else 'not collected'}" + (f" ({errors[a]})" if errors.get(a) else "")
                    for a in missing)
    return _not_evaluated(rule, "unknown", why, {"missing": missing,
                                                 "errors": {a: errors[a] for a in missing if a in errors}})


@lru_cache(maxsize=1)
def _all_areas() -> frozenset[str]:
    return frozenset(fact_tree().children["facts"].children)


@dataclass(frozen=True, slots=True)
class FleetError:
    """A fleet rule's expression failed on a host: the rule gives one error finding for the scan."""

    why: str


FleetRead: TypeAlias = "fleet.Taking | Finding | FleetError | None"

_PROBATION = 512  # lookups before a rule whose cache hardly ever hits stops being cached
_MAX_UNKNOWNS = 4096  # distinct "could not be evaluated" findings shared across hosts

Found = list[dict[str, Any]]


class Judge:
    """Judges snapshots with a rule set, caching results by the content each rule reads.

    A rule whose key misses on nearly every host (it reads per-host counters: restarts, dying memcgs) is
    just run once its probation shows it: its digest costs as much as running it, and its cache would
    grow with the fleet."""

    def __init__(self, ruleset: RuleSet):
        self.rules = list(ruleset.rules)
        self._roots = [tuple(sorted(r.roots)) for r in self.rules]
        self._caches: list[dict[tuple[bytes, ...], Found]] = [{} for _ in self.rules]
        self._lookups = [0] * len(self.rules)
        self._hits = [0] * len(self.rules)
        self._cached = [True] * len(self.rules)
        self._derived = derived_areas()  # trends: absent without history, which is no trend, not an unknown
        self.evaluations = 0  # rule runs actually performed (cache misses)
        self._interp = RowMemoInterpreter(OPTIONS)  # filters remember their verdict per distinct row
        self._unknowns: dict[tuple[Any, ...], Finding | None] = {}

    def _key(self, index: int, rule: Rule, digests: _Digests) -> tuple[bytes, ...]:
        if "*" in rule.roots:
            return (digests.root("*"),)
        parts = [digests.area(a, shape) for a, shape in rule.shapes]
        parts.extend(digests.root(r, rule.root_keys.get(r)) for r in self._roots[index])
        return tuple(parts)

    def _shared_unknown(self, index: int, rule: Rule, snapshot: Snapshot, absent: set[str]) -> Finding | None:
        """`_unknown`, one Finding per distinct reason: hosts lacking the same areas with the same collector
        errors share its title and evidence (each host's finding is a copy naming the host)."""
        missing = rule.areas & absent
        if not missing:
            return None
        errors = snapshot.get("errors") or {}
        failed = missing.intersection((snapshot.get("probe") or {}).get("failed_areas") or ())
        key = (index, frozenset(missing), frozenset(failed),
               tuple((a, errors[a]) for a in sorted(missing) if a in errors))
        try:
            got = self._unknowns.get(key)
        except TypeError:  # an error that is no string (unhashable): not shared
            return _unknown(rule, snapshot, absent)
        if got is None:
            if len(self._unknowns) >= _MAX_UNKNOWNS:  # per-host error texts: a bound, not a fleet-sized memo
                self._unknowns.clear()
            got = self._unknowns[key] = _unknown(rule, snapshot, absent)
        return got

    def uncached(self) -> list[str]:
        """The rules that came out of probation as per-host readers: run on every host, nothing cached."""
        return [r.id for r, cached in zip(self.rules, self._cached) if not cached]

    def _run(self, rule: Rule, snapshot: Snapshot) -> Found:
        self.evaluations += 1
        try:
            results = _evaluate(rule, snapshot, self._interp)
        except (JMESPathError, TypeError, ValueError) as exc:
            results = [_not_evaluated(rule, "error", f"{type(exc).__name__}: {exc}", {})]
        return [{k: getattr(f, k) for k in _FIELDS} for f in results]

    def _found(self, index: int, rule: Rule, snapshot: Snapshot, digests: _Digests) -> Found:
        """The rule's results on this snapshot: from its cache by the digest of what it reads, or run."""
        if not self._cached[index]:
            return self._run(rule, snapshot)
        cache = self._caches[index]
        key = self._key(index, rule, digests)
        found = cache.get(key)
        self._lookups[index] += 1
        if found is not None:
            self._hits[index] += 1
            return found
        found = cache[key] = self._run(rule, snapshot)
        if self._lookups[index] == _PROBATION and self._hits[index] * 8 < _PROBATION:
            self._cached[index] = False  # a per-host reader: run it from now on, its cache let go
            cache.clear()
        return found

    def judge(self, snapshot: Snapshot) -> list[Finding]:
        """All findings (including not-evaluated ones) for one snapshot."""
        host = str(snapshot.get("name") or snapshot.get("target") or "?")
        digests = _Digests(snapshot)
        not_applicable = set(snapshot.get("not_applicable") or ())
        absent = {a for a, v in digests.facts.items() if v is None} - not_applicable
        absent |= {a for r in self.rules for a in r.areas if a not in digests.facts and a not in self._derived}
        out: list[Finding] = []
        for index, rule in enumerate(self.rules):
            if rule.fleet is not None:
                continue  # over all hosts: judge_all
            if not_applicable and rule.areas & not_applicable and not rule.areas >= _all_areas():
                continue  # reads a fact that does not apply here (a rule over all facts still runs)
            unknown = self._shared_unknown(index, rule, snapshot, absent) if absent else None
            if unknown is not None:
                out.append(replace(unknown, host=host))
                continue
            found = self._found(index, rule, snapshot, digests)
            out.extend(Finding(host=host, **f) for f in found)
        return out

    def judge_all(self, snapshots: list[Snapshot]) -> list[Finding]:
        """Every host's findings, then the fleet rules' over all of them."""
        findings: list[Finding] = []
        for snapshot in snapshots:
            findings.extend(self.judge(snapshot))
        return findings + self.judge_fleet(snapshots)

    def judge_fleet(self, snapshots: list[Snapshot]) -> list[Finding]:
        """The fleet rules' findings over all `snapshots` (one scan)."""
        return self.fleet_findings([(s, self.fleet_reads(s)) for s in snapshots])

    def fleet_reads(self, snapshot: Snapshot) -> tuple[FleetRead, ...]:
        """What the host gives each fleet rule (in rule order), worked out as it is judged: its part
        (fleet.Taking), None when it takes no part (an area that does not apply, `where` false), a
        "could not be evaluated" finding when it lacks an area the rule reads, or the error a rule hit."""
        return tuple(self._fleet_read(index, rule, snapshot) for index, rule in enumerate(self.rules)
                     if rule.fleet is not None)

    def _fleet_read(self, index: int, rule: Rule, snapshot: Snapshot) -> FleetRead:
        facts = snapshot.get("facts") or {}
        missing = {a for a in rule.areas if facts.get(a) is None}
        if missing & set(snapshot.get("not_applicable") or ()):
            return None
        unknown = self._shared_unknown(index, rule, snapshot, missing) if missing else None
        if unknown is not None:
            return replace(unknown, host=str(snapshot.get("name") or snapshot.get("target") or "?"))
        try:
            return fleet.read(rule, snapshot)
        except (JMESPathError, TypeError, ValueError) as exc:
            return FleetError(f"{type(exc).__name__}: {exc}")

    def fleet_findings(self, hosts: list[tuple[Snapshot, tuple[FleetRead, ...]]]) -> list[Finding]:
        """The fleet rules' findings from each host's reads (`fleet_reads`), hosts in input order; a
        snapshot needs only what the rules' titles read (evaluate/keep.fleet_slice)."""
        out: list[Finding] = []
        for index, rule in enumerate(r for r in self.rules if r.fleet is not None):
            taking: list[tuple[Snapshot, fleet.Taking]] = []
            failed: FleetError | None = None
            for snap, reads in hosts:
                got = reads[index]
                if isinstance(got, fleet.Taking):
                    taking.append((snap, got))
                elif isinstance(got, Finding):  # a host lacking what the rule reads
                    out.append(got)
                elif isinstance(got, FleetError) and failed is None:  # the first error stands for the rule
                    failed = got
            if failed is not None:
                out.append(replace(_not_evaluated(rule, "error", failed.why, {}), host="*"))
            else:
                out.extend(fleet.findings(rule, taking))
        return out
