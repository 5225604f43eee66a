"""Fleet rules: a rule evaluated over all snapshots of a scan (rules with `fleet:`; see rules.FleetSpec).

`unique: PATH` groups hosts by each value of PATH (a list path gives several values per host) and flags
every host of a value two or more hosts hold — the AMI-baking mistakes: a shared SSH host key or
machine-id, duplicate host names. `agree: PATH, within: LABEL` flags, in each LABEL group whose hosts
disagree, the hosts that do not hold the group's most common value (all of them on a tie). Findings are
per host (so waivers, JUnit and `--fail-on` treat them like any other) and name every host of the group
(the first MAX_NAMED; `count` is the whole group).

`outlier: PATH, within: LABEL` flags, in each LABEL group of at least `min_hosts` hosts with a number, every
host whose value is above `factor` × the group's median AND at least `min_delta` above it (a median of 0
makes any value a multiple of it: the floor keeps 3 among 0s quiet). A host without a number (null, not a
finite number, beyond ±2^63: no counter is) takes no part. Each host keeps only its number and group; a
finding names its group, value, median and host count, and the first MAX_NAMED outliers of its group.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any, TypedDict

from ..models import Finding
from ..snapshotdoc import Facts, HostInfo, Snapshot
from .functions import OPTIONS
from .rules import FleetSpec, Rule
from .templates import render_title

MAX_NAMED = 50  # host names carried in one finding (a baked AMI can make 10,000 hosts share one key)
LIMIT = 2**63  # an `outlier` number beyond this is no counter (and a float product of it stays finite)


class FleetSlice(TypedDict, total=False):
    """What the fleet step keeps of a host: who it is and the facts the fleet rules' titles read (a cut of
    its snapshot, evaluate/retained.fleet_slice). A whole snapshot is one too (`as_slice`)."""

    name: str
    target: str
    labels: dict[str, str]
    errors: dict[str, str]
    not_applicable: dict[str, str]
    host: HostInfo
    facts: Facts


def as_slice(snapshot: Snapshot) -> FleetSlice:
    """A whole snapshot as a fleet slice: it holds everything a slice does."""
    return snapshot


def _name(snapshot: FleetSlice) -> str:
    return str(snapshot.get("name") or snapshot.get("target") or "?")


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _values(spec: FleetSpec, snapshot: Snapshot) -> list[str]:
    """The distinct non-empty values PATH gives on one host."""
    result = spec.expr.search(snapshot, options=OPTIONS)
    items = result if isinstance(result, list) else [result]
    return sorted({_shown(v) for v in items if v not in (None, "", [], {})})


def _group(spec: FleetSpec, snapshot: FleetSlice) -> str | None:
    if spec.within is None:
        return ""
    value: object = (snapshot.get("labels") or {}).get(spec.within)
    if value is None:
        value = (snapshot.get("host") or {}).get(spec.within)
    return None if value is None else str(value)


def _finding(rule: Rule, snapshot: FleetSlice, item: dict[str, Any], evidence: dict[str, Any],
             label: str | None = None) -> Finding:
    title = render_title(rule.title, {
        "item": item, "facts": snapshot.get("facts"), "host": snapshot.get("host"), "labels": snapshot.get("labels"),
        "name": snapshot.get("name"), "params": rule.params, "evidence": evidence,
    }, rule.id)
    return Finding(host=_name(snapshot), rule=rule.id, severity=rule.severity, title=title,
                   description=rule.description, remediation=rule.remediation,
                   item=str(item["value"]) if label is None else label,
                   evidence=evidence, tags=rule.tags)


def _named(hosts: list[str]) -> list[str]:
    return sorted(hosts)[:MAX_NAMED]


@dataclass(frozen=True, slots=True)
class Taking:
    """What one host gives one fleet rule: its group (None: it has no value for `within`) and the distinct
    values PATH gives on it (`outlier`: its number instead, None when it has none). Worked out as each
    host is judged, so the fleet step only groups."""

    group: str | None
    values: tuple[str, ...]
    number: int | float | None = None


def read(rule: Rule, snapshot: Snapshot) -> Taking | None:
    """The host's part in a fleet rule, or None when `where` leaves it out."""
    spec = rule.fleet
    assert spec is not None
    if spec.where is not None and not _truthy(spec.where.search(snapshot, options=OPTIONS)):
        return None
    group = _group(spec, snapshot)
    if spec.kind == "outlier":
        return Taking(group, (), _number(spec.expr.search(snapshot, options=OPTIONS)) if group is not None else None)
    return Taking(group, tuple(_values(spec, snapshot)) if group is not None else ())


def _number(value: object) -> int | float | None:
    """A host's number for `outlier`: an int or a finite float within ±2^63 (every counter is), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if -LIMIT <= value <= LIMIT else None


def findings(rule: Rule, taking: list[tuple[FleetSlice, Taking]]) -> list[Finding]:
    """Findings of one fleet rule from the hosts taking part, each with what it gives the rule (`read`);
    a snapshot needs only what the rule's title reads. Hosts are grouped by position and named only
    where a finding names them: on a fleet of unique identities nothing is sorted but the groups."""
    spec = rule.fleet
    assert spec is not None
    if spec.kind == "outlier":
        return _outliers(rule, taking)
    groups: dict[str, dict[str, list[int]]] = {}  # group label value → fact value → positions in `taking`
    agree = spec.kind == "agree"
    for position, (_, took) in enumerate(taking):
        if took.group is None or not took.values:
            continue
        by_value = groups.setdefault(took.group, {})
        for value in [" | ".join(took.values)] if agree else took.values:
            by_value.setdefault(value, []).append(position)
    out: list[Finding] = []
    for group, by_value in sorted(groups.items()):
        context = {"within": spec.within, "group": group} if spec.within else {}
        if not agree:
            for value, at in sorted((v, at) for v, at in by_value.items() if len(at) > 1):
                named = {_name(taking[i][0]): taking[i][0] for i in at}
                if len(named) < 2:
                    continue
                item = {"value": value, "hosts": _named([_name(taking[i][0]) for i in at]), "count": len(named),
                        **context}
                out.extend(_finding(rule, named[h], item, dict(item)) for h in sorted(named))
        elif len(by_value) > 1:
            out.extend(_off_majority(rule, taking, by_value, context))
    return out


def _off_majority(rule: Rule, taking: list[tuple[FleetSlice, Taking]], by_value: dict[str, list[int]],
                  context: dict[str, Any]) -> list[Finding]:
    """`agree`: a finding for each host of a disagreeing group that does not hold its most common value."""
    names = {v: [_name(taking[i][0]) for i in at] for v, at in by_value.items()}
    snaps = {_name(taking[i][0]): taking[i][0] for at in by_value.values() for i in at}
    counts = Counter({v: len(h) for v, h in names.items()}).most_common()
    majority = counts[0][0] if counts[0][1] > counts[1][1] else None
    every = [h for hosts in names.values() for h in hosts]
    held = {v: _named(h) for v, h in sorted(names.items())}
    out = []
    for value, hosts in sorted(names.items()):
        if value == majority:
            continue
        for host in sorted(hosts):
            item = {"value": value, "hosts": _named(every), "count": len(every), "values": held,
                    "majority": majority, **context}
            out.append(_finding(rule, snaps[host], item, dict(item)))
    return out


def _outliers(rule: Rule, taking: list[tuple[FleetSlice, Taking]]) -> list[Finding]:
    """`outlier`: a finding for each host far above its group's median (the module docstring)."""
    spec = rule.fleet
    assert spec is not None
    groups: dict[str, tuple[list[int], list[int | float]]] = {}  # group → positions in `taking`, their numbers
    for position, (_, took) in enumerate(taking):
        if took.group is not None and took.number is not None:
            at, numbers = groups.setdefault(took.group, ([], []))
            at.append(position)
            numbers.append(took.number)
    out: list[Finding] = []
    for group, (at, numbers) in sorted(groups.items()):
        if len(at) < spec.min_hosts:
            continue
        median = _whole(statistics.median(numbers))
        bar = spec.factor * median
        named = {_name(taking[i][0]): (i, n) for i, n in zip(at, numbers, strict=True)
                 if n > bar and n - median >= spec.min_delta}
        context = {"within": spec.within, "group": group, "median": median, "count": len(at),
                   "factor": spec.factor, "min_delta": spec.min_delta, "outliers": _named(list(named))}
        for host in sorted(named):
            i, number = named[host]
            item = {"value": number, **context}
            out.append(_finding(rule, taking[i][0], item, dict(item), group))
    return out


def _whole(median: float) -> float:
    """The median as an int when it is whole (16, not 16.0, in a title)."""
    return int(median) if isinstance(median, float) and median.is_integer() else median


def _truthy(value: Any) -> bool:
    return not (value is None or value is False or value == "" or value == [] or value == {})
