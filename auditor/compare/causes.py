"""Which facts a symptom is about: its own subject first, then what its incident chain declares upstream.

Among facts that separate a symptom equally well, the one about the symptom's own subject (the unit,
binary or area its findings name) is the likelier cause than one that merely travels with the same
hosts (an AZ's download source); next come the facts read by rules declared upstream of it
(`leads_to`) that fired on the symptom's hosts. The rule metadata comes from the report's `rules` section
(id, leads_to, reads).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..chaingraph import upstream as rules_upstream
from ..factpath import parse
from ..models import Finding

SUBJECT, UPSTREAM, OTHER = 0, 1, 2
RELATION = {SUBJECT: "subject", UPSTREAM: "upstream"}


@dataclass(frozen=True)
class Scope:
    """Fact paths one rule's findings are about: rows named by their items, or every fact the rule reads."""

    reads: tuple[str, ...] = ()
    items: frozenset[str] = frozenset()

    def covers(self, path: str, by_item: bool) -> bool:
        key = parse(path).key
        if self.items and key is not None:
            if by_item:  # the symptom's own subject: that unit/binary in any area
                return key in self.items
            return key in self.items and _under(path, self.reads)
        return _under(path, self.reads) and (key is None or not self.items)


def _under(path: str, prefixes: Iterable[str]) -> bool:
    return any(path == p or path.startswith((p + ".", p + "[")) for p in prefixes)


@dataclass(frozen=True)
class Causes:
    """Tiers for ranking: SUBJECT (the symptom's own), UPSTREAM (read by a rule upstream in its chain that fired
    on the symptom's hosts), OTHER."""

    own: Scope | None = None
    upstream: tuple[Scope, ...] = field(default_factory=tuple)

    def tier(self, path: str) -> int:
        if self.own is not None and self.own.covers(path, by_item=True):
            return SUBJECT
        if any(s.covers(path, by_item=False) for s in self.upstream):
            return UPSTREAM
        return OTHER


def _scope(rule: Mapping[str, Any] | None, findings: list[Finding]) -> Scope:
    reads = tuple(str(p) for p in (rule or {}).get("reads") or ())
    return Scope(reads, frozenset(f.item for f in findings if f.item is not None))


def causes_for(symptom_rule: str | None, symptom_key: str | None, hosts: set[str], findings: Iterable[Finding],
               rules: Iterable[Mapping[str, Any]]) -> Causes:
    """The tiers for a symptom: a rule (its findings on `hosts` name the subject), or a `facts.…` key."""
    if symptom_rule is None:
        if symptom_key and symptom_key.startswith("facts."):
            key = parse(symptom_key).key
            return Causes(Scope((symptom_key,), frozenset({key}) if key else frozenset()))
        return Causes()
    rules = list(rules)
    meta = {str(r.get("id")): r for r in rules}
    on_hosts: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        if f.host in hosts and not f.waived:
            on_hosts[f.rule].append(f)
    own = _scope(meta.get(symptom_rule), on_hosts.get(symptom_rule, []))
    graph = {rid: [str(n) for n in r.get("leads_to") or ()] for rid, r in meta.items()}
    # only the chain as seen on these hosts: with dozens of packs most rules are declared upstream of a common
    # symptom (a kubelet's swap and an ECS agent both end in a crash loop), but only those that fired say why
    upstream = tuple(_scope(meta.get(r), on_hosts[r]) for r in sorted(rules_upstream(graph, symptom_rule))
                     if on_hosts.get(r))
    return Causes(own, upstream)
