"""Hosts unlike their group: the comparison's outliers per host (count, main kinds) with each host's own
outliers to drill into, for the HTML and Markdown reports. One odd host is one row, not a thousand."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ..reporttypes import ReportDoc

Doc = dict[str, Any]


@dataclass
class OutlierHost:
    host: str
    group: str | None
    count: int
    kinds: list[tuple[str, int]]  # the main kinds of its outliers, most first
    outliers: list[Doc]  # the drill-down, at most OUTLIERS_PER_HOST


OUTLIERS_PER_HOST = 50  # shown per host in the HTML drill-down; the JSON report has every one


def outlier_hosts(doc: ReportDoc) -> tuple[list[OutlierHost], int]:
    """The comparison's outliers per host (its `outlier_hosts`, at most --top hosts, most outliers first) with
    each host's own outliers to drill into; and how many hosts have outliers. A report from before
    `outlier_hosts`: every host with outliers, counted, no kinds."""
    comparison = doc.get("comparison") or {}
    outliers = [o for o in comparison.get("outliers") or [] if isinstance(o, dict)]
    by_host: dict[str, list[Doc]] = defaultdict(list)
    for o in outliers:
        by_host[str(o.get("host"))].append(o)
    summary = comparison.get("outlier_hosts")
    if not isinstance(summary, list):
        summary = [{"host": h, "group": os[0].get("group"), "outliers": len(os), "kinds": {}}
                   for h, os in sorted(by_host.items(), key=lambda ho: (-len(ho[1]), ho[0]))]
    rows = [OutlierHost(str(s["host"]), s.get("group"), int(s.get("outliers") or 0),
                        [(str(k), int(n)) for k, n in (s.get("kinds") or {}).items()],
                        by_host.get(str(s["host"]), [])[:OUTLIERS_PER_HOST])
            for s in summary if isinstance(s, dict) and "host" in s]
    return rows, int(comparison.get("outlier_hosts_total") or len(by_host))
