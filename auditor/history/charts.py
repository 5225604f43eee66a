"""The series the pictures draw, read from the store: the fleet's trends (`history report`) and each host's
own past (the scan report's host detail).

Only the facts summary every recorded scan carries is read (no snapshot is inflated, and imported reports,
which have no snapshots, count too); every number is type-checked, a value that is not a count reads as
unknown. The work is bounded: the last N complete scans, the top k lines, a capped first-seen timeline.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..models import SEVERITIES
from . import query
from .conn import Store

DEFAULT_LAST = 30  # scans a history report draws unless --last says otherwise
DEFAULT_TOP = 8  # lines drawn per chart; the rest are summarized
SERIES_LAST = 20  # earlier scans carried into a scan report per host
HOST_UNITS = 4  # units per host in a scan report (the most restarts at their latest scan)
TIMELINE_ROWS = 30
COUNT_MAX = 2**53


def count(value: Any) -> int | None:
    """A count from the store (untrusted): an int in 0..2^53, else unknown."""
    return value if type(value) is int and 0 <= value <= COUNT_MAX else None


def unit_counts(summary: dict[str, Any] | None) -> dict[str, int]:
    """The summary's restarts per unit, only well-formed entries."""
    units = (summary or {}).get("unit_restarts")
    if not isinstance(units, dict):
        return {}
    return {name: n for name, v in units.items() if isinstance(name, str) and (n := count(v)) is not None}


def _latest(values: list[int | None]) -> int:
    return next((v for v in reversed(values) if v is not None), -1)


def top_lines(by_name: dict[str, dict[int, int]], ids: list[int], top: int) -> dict[str, Any]:
    """The `top` series with the largest latest value drawn as lines; the others as median and maximum per scan."""
    series = {name: [by.get(i) for i in ids] for name, by in by_name.items()}
    order = sorted(series, key=lambda n: (-_latest(series[n]), n))
    shown, rest = order[:top], order[top:]
    summary = None
    if rest:
        per_scan = [[v for n in rest if (v := series[n][j]) is not None] for j in range(len(ids))]
        summary = {"count": len(rest), "median": [statistics.median(v) if v else None for v in per_scan],
                   "max": [max(v) if v else None for v in per_scan]}
    return {"lines": [{"name": n, "values": series[n]} for n in shown], "rest": summary, "total": len(order)}


def _scans(conn: Store, where: Path, last: int, before: int | None = None) -> list[dict[str, Any]]:
    scans = [s for s in query.list_scans(conn, where) if s["state"] == "complete"
             and (before is None or s["id"] < before)]
    return scans[-last:] if last > 0 else scans


def _point(scan: dict[str, Any]) -> dict[str, Any]:
    return {"id": scan["id"], "at": scan["generated_at"] or scan["started_at"]}


def fleet_trends(conn: Store, where: Path, last: int = DEFAULT_LAST, top: int = DEFAULT_TOP) -> dict[str, Any]:
    """The history report's document: dying memcgs per host, restarts per unit (summed over hosts), unwaived
    findings by severity per scan, and when each finding (rule · item, across hosts) was first seen."""
    scans = _scans(conn, where, last)
    ids = [s["id"] for s in scans]
    dying: dict[str, dict[int, int]] = {}
    units: dict[str, dict[int, int]] = {}
    for scan_id, host, summary in query.summaries(conn, where, ids):
        value = count((summary or {}).get("dying_memcgs"))
        if value is not None:
            dying.setdefault(host, {})[scan_id] = value
        for unit, n in unit_counts(summary).items():
            by_scan = units.setdefault(unit, {})
            by_scan[scan_id] = by_scan.get(scan_id, 0) + n
    severities = query.severity_counts(conn, where, ids)
    spans, more = query.finding_spans(conn, where, ids[0], ids[-1], TIMELINE_ROWS) if ids else ([], 0)
    return {
        "store": str(where), "last": last, "top": top,
        "scans": [{**_point(s), "hosts": s["hosts"], "findings": s["findings"], "exit_code": s["exit_code"],
                   "source": s["source"]} for s in scans],
        "dying_memcgs": top_lines(dying, ids, top),
        "unit_restarts": top_lines({u: by for u, by in units.items() if any(by.values())}, ids, top),
        "severity": {sev: [severities.get(i, {}).get(sev, 0) for i in ids] for sev in SEVERITIES},
        "first_seen": {"rows": spans, "more": more},
    }


def host_series(conn: Store, where: Path, hosts: list[str], before: int, last: int = SERIES_LAST) -> dict[str, Any]:
    """Per host, its dying memcgs, restarts and restarts of its busiest units in the last `last` complete scans
    before scan `before` (the scan report adds its own point from the host's facts summary)."""
    scans = _scans(conn, where, last, before)
    ids = [s["id"] for s in scans]
    position = {scan_id: j for j, scan_id in enumerate(ids)}
    out: dict[str, dict[str, Any]] = {}
    for scan_id, host, summary in query.summaries(conn, where, ids, hosts):
        entry = out.setdefault(host, {"dying_memcgs": [None] * len(ids), "restarts": [None] * len(ids),
                                      "unit_restarts": {}})
        j = position[scan_id]
        entry["dying_memcgs"][j] = count((summary or {}).get("dying_memcgs"))
        entry["restarts"][j] = count((summary or {}).get("restarts"))
        for unit, n in unit_counts(summary).items():
            entry["unit_restarts"].setdefault(unit, [None] * len(ids))[j] = n
    for entry in out.values():
        busiest = sorted(entry["unit_restarts"].items(), key=lambda kv: (-_latest(kv[1]), kv[0]))[:HOST_UNITS]
        entry["unit_restarts"] = dict(busiest)
    return {"scans": [_point(s) for s in scans], "hosts": out}
