"""Symptom ranking: which facts separate the hosts with a symptom (a rule firing, a label) from the rest.

Each fact=value is a 2×2 table (symptom yes/no × value yes/no) scored with Fisher's exact test and
information gain; facts about one subject with the same table collapse into one entry. Facts that
separate equally well are ordered by cause (causes.py): the symptom's own subject, then facts read by
rules declared upstream of it, then the rest; then severity, field priority and path.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..models import Finding
from .causes import RELATION, Causes, causes_for
from .index import FleetIndex
from .normalize import display
from .severity import rank_key, subject
from .stats import fisher_exact, information_gain

MEASURE = "fisher_exact"


@dataclass(frozen=True)
class Symptom:
    """`rule:ID` (an unwaived finding of that rule) or a host attribute `key=value`."""

    rule: str | None = None
    key: str | None = None
    value: str | None = None

    @classmethod
    def parse(cls, text: str) -> Symptom:
        if "=" in text:
            key, value = text.split("=", 1)
            return cls(key=key.strip(), value=value.strip())
        return cls(rule=text.strip())

    def __str__(self) -> str:
        return self.rule if self.rule else f"{self.key}={self.value}"

    def hosts(self, index: FleetIndex, findings: Iterable[Finding]) -> set[str]:
        known = set(index.hosts)
        if self.rule:
            return {f.host for f in findings if f.rule == self.rule and not f.waived} & known
        return {h for h in known if index.attr(h, self.key or "") == self.value}


def rank(index: FleetIndex, with_symptom: set[str], top: int = 10, exclude: str | None = None,
         causes: Causes | None = None) -> list[dict[str, Any]]:
    """The `top` fact=value pairs most enriched among hosts with the symptom, best first."""
    causes = causes or Causes()
    w = [sum(h in with_symptom for h in c.hosts) for c in index.configs]
    wo = [len(c.hosts) - w[i] for i, c in enumerate(index.configs)]
    paths = sorted({p for c in index.configs for p in c.view.flat} - {exclude})
    entries = []
    for path in paths:
        by_value: dict[str, list[int]] = defaultdict(list)
        for i, config in enumerate(index.configs):
            value = config.value(path)
            if value is not None:
                by_value[display(value)].append(i)
        if len(by_value) < 2:
            continue
        known = [i for cs in by_value.values() for i in cs]
        n_with, n_without = sum(w[i] for i in known), sum(wo[i] for i in known)
        for value, configs in by_value.items():
            a, c = sum(w[i] for i in configs), sum(wo[i] for i in configs)
            b, d = n_with - a, n_without - c
            if a == 0 or (n_without and a / max(1, n_with) <= c / n_without):
                continue  # only values enriched among symptom hosts
            entries.append(_entry(path, value, a, b, c, d, frozenset(configs)))
    return _collapse(entries, causes)[:top]


def _entry(path: str, value: str, a: int, b: int, c: int, d: int, configs: frozenset[int]) -> dict[str, Any]:
    p = fisher_exact(a, b, c, d)
    return {
        "path": path, "value": value, "subject": subject(path),
        "score": round(max(0.0, -math.log10(max(p, 1e-300))), 4) + 0.0, "measure": MEASURE, "p_value": p,
        "information_gain": round(information_gain(a, b, c, d), 4),
        "with_symptom": {"have": a, "total": a + b}, "without_symptom": {"have": c, "total": c + d},
        "evidence": f"hosts with symptom: {a}/{a + b} have {path} = {value}; without: {c}/{c + d}",
        "_key": (subject(path), a, b, c, d, configs),
    }


def _collapse(entries: list[dict[str, Any]], causes: Causes) -> list[dict[str, Any]]:
    buckets: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        buckets[e["_key"]].append(e)
    out = []
    for members in buckets.values():
        members.sort(key=lambda m: (causes.tier(m["path"]), *rank_key(m["path"])))
        head = {k: v for k, v in members[0].items() if not k.startswith("_")}
        head["related"] = [{"path": m["path"], "value": m["value"]} for m in members[1:]]
        tier = causes.tier(head["path"])
        if tier in RELATION:
            head["relation"] = RELATION[tier]
        head["_tier"] = tier
        out.append(head)
    # equally separating facts (same p-value and information gain): the likelier cause first, then deterministic
    out.sort(key=lambda e: (float(f"{e['p_value']:.9g}"), -e["information_gain"], e["_tier"],
                            *rank_key(e["path"])[:2], e["path"], e["value"]))
    return [{k: v for k, v in e.items() if k != "_tier"} for e in out]


def symptom_section(index: FleetIndex, symptom: Symptom, findings: Iterable[Finding], top: int,
                    rules: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The report's `symptom` section; `rules` (the report's rules: id, leads_to, reads) order equal ties."""
    findings = list(findings)
    with_symptom = symptom.hosts(index, findings)
    without = sorted(set(index.hosts) - with_symptom)
    exclude = symptom.key if symptom.key and symptom.key.startswith("facts.") else None
    causes = causes_for(symptom.rule, symptom.key, with_symptom, findings, rules)
    ranked = rank(index, with_symptom, top, exclude, causes) if with_symptom and without else []
    return {
        "symptom": str(symptom),
        "kind": "rule" if symptom.rule else "label",
        "hosts_with": sorted(with_symptom),
        "hosts_without": without,
        "measure": MEASURE,
        "ranked": ranked,
    }
