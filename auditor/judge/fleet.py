"""Fleet rules: a rule evaluated over all snapshots of a scan (rules with `fleet:`; see rules.FleetSpec).

`unique: PATH` groups hosts by each value of PATH (a list path gives several values per host) and flags
every host of a value two or more hosts hold — the AMI-baking mistakes: a shared SSH host key or
machine-id, duplicate host names. `agree: PATH, within: LABEL` flags, in each LABEL group whose hosts
disagree, the hosts that do not hold the group's most common value (all of them on a tie). Findings are
per host (so waivers, JUnit and `--fail-on` treat them like any other) and name every host of the group
(the first MAX_NAMED; `count` is the whole group).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..models import Finding
from ..snapshotdoc import Snapshot
from .functions import OPTIONS
from .rules import FleetSpec, Rule
from .templates import render_title

MAX_NAMED = 50  # host names carried in one finding (a baked AMI can make 10,000 hosts share one key)


def _name(snapshot: Snapshot) -> str:
    return str(snapshot.get("name") or snapshot.get("target") or "?")


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _values(spec: FleetSpec, snapshot: Snapshot) -> list[str]:
    """The distinct non-empty values PATH gives on one host."""
    result = spec.expr.search(snapshot, options=OPTIONS)
    items = result if isinstance(result, list) else [result]
    return sorted({_shown(v) for v in items if v not in (None, "", [], {})})


def _group(spec: FleetSpec, snapshot: Snapshot) -> str | None:
    if spec.within is None:
        return ""
    value: object = (snapshot.get("labels") or {}).get(spec.within)
    if value is None:
        value = (snapshot.get("host") or {}).get(spec.within)
    return None if value is None else str(value)


def _finding(rule: Rule, snapshot: Snapshot, item: dict[str, Any], evidence: dict[str, Any]) -> Finding:
    title = render_title(rule.title, {
        "item": item, "facts": snapshot.get("facts"), "host": snapshot.get("host"), "labels": snapshot.get("labels"),
        "name": snapshot.get("name"), "params": rule.params, "evidence": evidence,
    }, rule.id)
    return Finding(host=_name(snapshot), rule=rule.id, severity=rule.severity, title=title,
                   description=rule.description, remediation=rule.remediation, item=str(item["value"]),
                   evidence=evidence, tags=rule.tags)


def _named(hosts: list[str]) -> list[str]:
    return sorted(hosts)[:MAX_NAMED]


@dataclass(frozen=True, slots=True)
class Taking:
    """What one host gives one fleet rule: its group (None: it has no value for `within`) and the distinct
    values PATH gives on it. Worked out as each host is judged, so the fleet step only groups."""

    group: str | None
    values: tuple[str, ...]


def read(rule: Rule, snapshot: Snapshot) -> Taking | None:
    """The host's part in a fleet rule, or None when `where` leaves it out."""
    spec = rule.fleet
    assert spec is not None
    if spec.where is not None and not _truthy(spec.where.search(snapshot, options=OPTIONS)):
        return None
    group = _group(spec, snapshot)
    return Taking(group, tuple(_values(spec, snapshot)) if group is not None else ())


def findings(rule: Rule, taking: list[tuple[Snapshot, Taking]]) -> list[Finding]:
    """Findings of one fleet rule from the hosts taking part, each with what it gives the rule (`read`);
    a snapshot needs only what the rule's title reads."""
    spec = rule.fleet
    assert spec is not None
    by_name = {_name(s): s for s, _ in taking}
    groups: dict[str, dict[str, list[str]]] = {}  # group label value → fact value → hosts
    for snap, took in taking:
        if took.group is None:
            continue
        found = list(took.values)
        if spec.kind == "agree":
            found = [" | ".join(found)] if found else []
        for value in found:
            groups.setdefault(took.group, {}).setdefault(value, []).append(_name(snap))
    out: list[Finding] = []
    for group, by_value in sorted(groups.items()):
        context = {"within": spec.within, "group": group} if spec.within else {}
        if spec.kind == "unique":
            for value, hosts in sorted(by_value.items()):
                if len(set(hosts)) < 2:
                    continue
                item = {"value": value, "hosts": _named(hosts), "count": len(set(hosts)), **context}
                out.extend(_finding(rule, by_name[h], item, dict(item)) for h in sorted(set(hosts)))
        elif len(by_value) > 1:
            counts = Counter({v: len(h) for v, h in by_value.items()}).most_common()
            majority = counts[0][0] if counts[0][1] > counts[1][1] else None
            every = [h for hosts in by_value.values() for h in hosts]
            held = {v: _named(h) for v, h in sorted(by_value.items())}
            for value, hosts in sorted(by_value.items()):
                if value == majority:
                    continue
                for host in sorted(hosts):
                    item = {"value": value, "hosts": _named(every), "count": len(every), "values": held,
                            "majority": majority, **context}
                    out.append(_finding(rule, by_name[host], item, dict(item)))
    return out


def _truthy(value: Any) -> bool:
    return not (value is None or value is False or value == "" or value == [] or value == {})
