"""The history stage of `scan`: the SQLite store, trend facts before judging, first-seen times, recording.

Order within a scan: `prepare` (before any host: the store opens, or its directory can be made) →
`begin` (a `running` row, right before collecting) → `add_trends` (facts.trends on each snapshot,
before the judge) → `add_since` (first-seen times, new/gone hosts, after judge and compare) → `add_series` (each host's
earlier numbers, for the report's trend pictures) →
`finish` (the whole scan in one transaction, after its exit code is known).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import AuditorError
from ..models import Report
from ..options import HistoryOptions
from ..snapshotdoc import Snapshot
from ..textsafe import one_line
from . import charts, query, record, trends
from .conn import Store, StoreUnavailable
from .db import check_usable, default_path, open_store
from .values import integer, text


@dataclass(frozen=True)
class StorePlan:
    path: Path | None  # None: --no-store


@dataclass
class Session:
    """One scan's open store: its connection and its monotonic scan id."""

    path: Path
    conn: Store
    scan_id: int
    open_before: dict[tuple[str, str, str, str], str]
    hosts_before: dict[str, tuple[int, str]]


def prepare(opts: HistoryOptions) -> StorePlan:
    """Before any host is contacted: the store opens cleanly (or can be created)."""
    if opts.no_store:
        return StorePlan(None)
    path = Path(opts.store).expanduser() if opts.store else default_path()
    check_usable(path)
    return StorePlan(path)


def begin(plan: StorePlan, started_at: str) -> Session | None:
    """Open the store and insert this scan's `running` row (committed: a killed scan stays visible)."""
    if plan.path is None:
        return None
    conn = open_store(plan.path)
    scan_id = record.begin_scan(conn, started_at)
    return Session(plan.path, conn, scan_id, record.open_issues(conn), record.known_hosts(conn))


def add_trends(session: Session | None, snapshots: list[Snapshot]) -> None:
    """Publish `facts.trends` on every snapshot (empty ones without a store or an earlier scan)."""
    if session is None:
        for snap in snapshots:
            trends.attach(snap, trends.empty())
        return
    names = [str(s.get("name")) for s in snapshots]
    previous = query.previous_snapshots(session.conn, names, session.scan_id, session.path)
    seen = query.scans_seen(session.conn, names, session.scan_id)
    for snap, name in zip(snapshots, names):
        scan_id, before = previous.get(name, (None, None))
        trends.attach(snap, trends.derive(snap, before, scan_id, seen.get(name, 0) + 1))


def add_since(session: Session | None, report: Report) -> None:
    """First-seen time of every finding and drift item; new, gone and resolved since the previous scan."""
    if session is None:
        return
    at = report.generated_at
    report.findings[:] = [replace(f, first_seen=session.open_before.get(("finding", f.host, f.rule, f.item or ""), at))
                          for f in report.findings]
    report.drift[:] = [replace(d, first_seen=session.open_before.get(("drift", d.host, d.path, ""), at))
                       for d in report.drift]
    names = {h.name for h in report.hosts}
    reached = {h.name for h in report.hosts if h.status == "ok"}
    row = session.conn.execute("SELECT max(id) FROM scans WHERE state = 'complete' AND id < ?",
                               (session.scan_id,)).fetchone()
    previous = integer(row[0], session.path, "scans.id", low=1, null=True) if row else None
    before = {text(h, session.path, f"scan {previous} host")
              for (h,) in session.conn.execute("SELECT host FROM scan_hosts WHERE scan_id = ?", (previous,))}
    current = {("finding", f.host, f.rule, f.item or "") for f in report.findings}
    current |= {("drift", d.host, d.path, "") for d in report.drift}
    resolved = [{"kind": k, "host": h, "key": key, "item": item or None, "first_seen": first}
                for (k, h, key, item), first in sorted(session.open_before.items())
                if h in reached and (k, h, key, item) not in current]
    report.history = {
        "store": str(session.path), "scan_id": session.scan_id, "previous_scan_id": previous,
        "new_hosts": sorted(n for n in names if n not in session.hosts_before),
        "gone_hosts": sorted(before - names), "resolved": resolved,
    }


def add_series(session: Session | None, report: Report) -> None:
    """Each host's numbers in the previous scans (`history.series`), for the host detail's trend pictures."""
    if session is not None and report.history is not None:
        report.history["series"] = charts.host_series(session.conn, session.path, [h.name for h in report.hosts],
                                                      session.scan_id)


def abandon(session: Session | None) -> None:
    """Mark a scan that will not finish (an exception, Ctrl-C) as interrupted."""
    if session is None:
        return
    with contextlib.suppress(AuditorError, KeyboardInterrupt):  # locked, disk full, a stop: the next open marks it
        session.conn.execute("UPDATE scans SET state = 'interrupted' WHERE id = ? AND state = 'running'",
                             (session.scan_id,))


def finish(session: Session | None, doc: dict[str, Any], snapshots: list[Snapshot],
           finished_at: str) -> str | None:
    """Record the scan (one transaction). When the store refuses it (locked past the wait, disk full,
    read-only) the scan keeps its results (reports are written before): the reason is returned (one safe
    line), and the scan's row stays `running` until the next open sees its process gone."""
    if session is None:
        return None
    try:
        record.record_scan(session.conn, session.scan_id, doc, {str(s.get("name")): s for s in snapshots},
                           finished_at)
    except StoreUnavailable as exc:
        return one_line(f"{exc}: this scan is not recorded in it")
    return None


def close(session: Session | None) -> None:
    if session is not None:
        session.conn.close()
