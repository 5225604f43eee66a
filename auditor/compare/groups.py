"""Host vs peers: per fact, value counts per group; rank the facts the group explains (splits) and list
one-host oddities (outliers) apart, summarised per host (how many, of which kinds) so one odd host (no
systemd, another OS) is one line, not a thousand. Works on deduplicated configurations weighted by host count."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from ..options import DEFAULT_MIN_SCORE, DEFAULT_TOP
from .index import FleetIndex
from .normalize import display
from .severity import path_severity, rank_key, subject
from .stats import cramers_v, purity

MEASURE = "cramers_v_bias_corrected"
MIN_SCORE = DEFAULT_MIN_SCORE  # below this, a value pattern is not "explained by the group"
MIN_HOSTS = 3


@dataclass
class _Fact:
    """One fact across the fleet: value → {config index: hosts}, and which configs lack the area."""

    path: str
    by_value: dict[str, dict[int, int]]


def _facts(index: FleetIndex, exclude: str | None) -> list[_Fact]:
    """Facts whose value is not the same on every host whose area is known."""
    paths: set[str] = set()
    for config in index.configs:
        paths.update(config.view.flat)
    facts = []
    for path in sorted(paths):
        if path == exclude:
            continue
        by_value: dict[str, dict[int, int]] = defaultdict(dict)
        for i, config in enumerate(index.configs):
            value = config.value(path)
            if value is not None:
                by_value[display(value)][i] = len(config.hosts)
        if len(by_value) > 1:
            facts.append(_Fact(path, dict(by_value)))
    return facts


def _partition(fact: _Fact, configs: set[int] | None = None) -> frozenset[frozenset[int]]:
    """Which configurations share a value: facts with equal partitions say the same thing."""
    return frozenset(frozenset(c for c in cs if configs is None or c in configs) for cs in fact.by_value.values())


def compare_groups(index: FleetIndex, group_by: str, min_score: float = MIN_SCORE,
                   top: int = DEFAULT_TOP) -> dict[str, Any]:
    """The report's `comparison` section (see module docstring); `top`: hosts in `outlier_hosts`."""
    host_group = {h: index.attr(h, group_by) for h in index.hosts}
    ungrouped = sorted(h for h, g in host_group.items() if g is None)
    groups = Counter(g for g in host_group.values() if g is not None)
    # hosts per (config, group)
    weights: dict[int, Counter[str]] = defaultdict(Counter)
    for host, group in host_group.items():
        if group is not None:
            weights[index.host_config[host]][group] += 1
    splits: list[dict[str, Any]] = []
    outliers: list[dict[str, Any]] = []
    exclude = group_by if group_by.startswith("facts.") else None
    for fact in _facts(index, exclude):
        table: dict[str, Counter[str]] = defaultdict(Counter)
        totals: Counter[str] = Counter()
        for value, configs in fact.by_value.items():
            for c in configs:
                for group, n in weights[c].items():
                    table[group][value] += n
                    totals[value] += n
        n = sum(totals.values())
        if n < MIN_HOSTS:
            continue
        usual, usual_n = totals.most_common(1)[0]
        singles = {v for v, k in totals.items() if k == 1}
        if usual_n * 2 >= n:
            for value in singles - {usual}:
                outliers.append(_outlier(index, fact, value, usual, usual_n, host_group))
        kept = {g: Counter({v: k for v, k in row.items() if v not in singles}) for g, row in table.items()}
        kept = {g: row for g, row in kept.items() if sum(row.values())}
        if len({v for row in kept.values() for v in row}) < 2 or len(kept) < 2:
            continue
        modal = {g: row.most_common(1)[0][0] for g, row in kept.items()}
        score = cramers_v(kept)
        if score < min_score or len(set(modal.values())) < 2:
            continue
        splits.append({
            "path": fact.path, "group_by": group_by, "subject": subject(fact.path),
            "counts": {g: dict(sorted(row.items())) for g, row in sorted(kept.items())},
            "score": round(score, 4), "measure": MEASURE, "purity": round(purity(kept), 4),
            "modal": dict(sorted(modal.items())), "hosts": sum(sum(r.values()) for r in kept.values()),
            "severity": path_severity(fact.path), "_partition": _partition(fact),
        })
    return {
        "group_by": group_by,
        "groups": dict(sorted(groups.items())),
        "ungrouped_hosts": ungrouped,
        "distinct_configurations": len(index.configs),
        "measure": MEASURE,
        "min_score": min_score,
        "splits": _collapse(splits, key=lambda s: (s["subject"], s["_partition"]), order=_split_order),
        "outliers": (collapsed := _collapse(outliers, key=lambda o: (o["host"], o["subject"]), order=_outlier_order)),
        **_outlier_hosts(collapsed, top),
    }


KINDS_SHOWN = 3


def _kind(path: str) -> str:
    """What an outlier is about, coarsely: its collection (`facts.packages`), or a plain fact's area."""
    head = path.split("[", 1)[0]
    return head if "[" in path else ".".join(path.split(".")[:2])


def _outlier_hosts(outliers: list[dict[str, Any]], top: int) -> dict[str, Any]:
    """Outliers per host, most first, at most `top` hosts: each host's count and main kinds; the `outliers`
    list is the drill-down."""
    per_host: dict[str, Counter[str]] = defaultdict(Counter)
    group: dict[str, Any] = {}
    for o in outliers:
        per_host[o["host"]][_kind(o["path"])] += 1
        group.setdefault(o["host"], o.get("group"))
    ranked = sorted(per_host.items(), key=lambda hk: (-sum(hk[1].values()), hk[0]))
    return {
        "outlier_hosts": [{"host": host, "group": group[host], "outliers": sum(kinds.values()),
                           "kinds": dict(sorted(kinds.items(), key=lambda kn: (-kn[1], kn[0]))[:KINDS_SHOWN])}
                          for host, kinds in ranked[:top]],
        "outlier_hosts_total": len(ranked),
    }


def _outlier(index: FleetIndex, fact: _Fact, value: str, usual: str, usual_n: int,
             host_group: dict[str, str | None]) -> dict[str, Any]:
    config = next(iter(fact.by_value[value]))
    host = index.configs[config].hosts[0]
    return {
        "path": fact.path, "host": host, "group": host_group.get(host), "subject": subject(fact.path),
        "value": value, "usual_value": usual, "usual_hosts": usual_n, "severity": path_severity(fact.path),
    }


def _split_order(s: dict[str, Any]) -> tuple:
    return (-s["score"], *rank_key(s["path"])[:2], -len(s.get("related", ())), s["path"])


def _outlier_order(o: dict[str, Any]) -> tuple:
    return (*rank_key(o["path"])[:2], o["host"], o["path"])


def _collapse(items: list[dict[str, Any]], key, order) -> list[dict[str, Any]]:
    """Facts about one subject that say the same thing (a unit's 10 fields) become one entry whose
    `path` is the most telling fact and `related` lists the rest."""
    buckets: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        buckets[key(item)].append(item)
    out = []
    for members in buckets.values():
        members.sort(key=lambda m: rank_key(m["path"]))
        head = {k: v for k, v in members[0].items() if not k.startswith("_")}
        head["related"] = [m["path"] for m in members[1:]]
        out.append(head)
    return sorted(out, key=order)
