"""Trends across saved scans (pure): per-host series, growth rates, new and resolved findings."""

from __future__ import annotations

from datetime import datetime
from typing import Any

DEFAULT_DYING_GROWTH_PER_HOUR = 100.0


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _dying(host: dict[str, Any]) -> int | None:
    return (host.get("facts_summary") or {}).get("dying_memcgs")


def growth_per_hour(before: dict[str, Any], after: dict[str, Any], host: str) -> float | None:
    """Dying-memcg growth per hour of one host between two reports (None when either is unknown).

    A drop (reboot, cache drop) restarts the count: it is not growth.
    """
    old = next((h for h in before["hosts"] if h["name"] == host), None)
    new = next((h for h in after["hosts"] if h["name"] == host), None)
    dying_old, dying_new = (_dying(old), _dying(new)) if old and new else (None, None)
    if dying_old is None or dying_new is None:
        return None
    hours = (parse_time(after["generated_at"]) - parse_time(before["generated_at"])).total_seconds() / 3600
    if hours <= 0:
        return None
    return max(dying_new - dying_old, 0) / hours


def finding_keys(doc: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(host, rule, item) of every unwaived finding."""
    return {(f["host"], f["rule"], f.get("item") or "") for f in doc["findings"] if not f["waived"]}


def host_series(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per host, one point per scan: time, status, dying memcgs, unwaived findings, drift items."""
    series: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        findings: dict[str, int] = {}
        for f in doc["findings"]:
            if not f["waived"]:
                findings[f["host"]] = findings.get(f["host"], 0) + 1
        drift: dict[str, int] = {}
        for d in doc["drift"]:
            drift[d["host"]] = drift.get(d["host"], 0) + 1
        for host in doc["hosts"]:
            series.setdefault(host["name"], []).append({
                "at": doc["generated_at"],
                "status": host["status"],
                "dying_memcgs": _dying(host),
                "findings": findings.get(host["name"], 0),
                "drift": drift.get(host["name"], 0),
            })
    return series


def summarize(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """What changed over the saved scans: per-host trend rows and findings new/resolved since the previous."""
    rows = []
    for host, points in sorted(host_series(docs).items()):
        known = [p for p in points if p["dying_memcgs"] is not None]
        rate = None
        if len(known) >= 2:
            hours = (parse_time(known[-1]["at"]) - parse_time(known[0]["at"])).total_seconds() / 3600
            if hours > 0:
                rate = round((known[-1]["dying_memcgs"] - known[0]["dying_memcgs"]) / hours, 1)
        rows.append({
            "host": host,
            "scans": len(points),
            "last_status": points[-1]["status"],
            "dying_first": known[0]["dying_memcgs"] if known else None,
            "dying_last": known[-1]["dying_memcgs"] if known else None,
            "dying_per_hour": rate,
            "findings_last": points[-1]["findings"],
            "drift_last": points[-1]["drift"],
        })
    new: list[tuple[str, str, str]] = []
    resolved: list[tuple[str, str, str]] = []
    if len(docs) >= 2:
        before, after = finding_keys(docs[-2]), finding_keys(docs[-1])
        new, resolved = sorted(after - before), sorted(before - after)
    return {"scans": len(docs), "hosts": rows, "new_findings": new, "resolved_findings": resolved}
