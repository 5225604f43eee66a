"""The history stage of `scan` and `analyze`: the SQLite store, trend facts before judging, first-seen
times, recording.

Order within a run: `prepare` (before any host: the store opens, or its directory can be made) →
`begin` (a `running` row, right before collecting) → `feed` (per snapshot as it arrives, before the
judge: facts.trends, and its store row packed) → `add_since` (first-seen times, new/gone hosts, after
judge and compare) → `add_series` (each host's earlier numbers, for the report's trend pictures) →
`finish` (the whole scan in one transaction, after its exit code is known).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import AuditorError
from ..models import HostResult, Report
from ..options import HistoryOptions
from ..textsafe import one_line
from . import charts, record
from .conn import Store, StoreUnavailable
from .db import check_usable, default_path, open_store
from .feed import Feed, Packed, Pending, Spool, Spooled, SpoolLost
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
    spool: Spool = field(default_factory=Spool)  # the packed rows' volatile parts until `finish`


def prepare(opts: HistoryOptions) -> StorePlan:
    """Before any host is contacted: the store opens cleanly (or can be created)."""
    if opts.no_store:
        return StorePlan(None)
    path = Path(opts.store).expanduser() if opts.store else default_path()
    check_usable(path)
    return StorePlan(path)


def begin(plan: StorePlan, started_at: str, source: str = "scan") -> tuple[Session | None, str | None]:
    """Open the store and insert this run's `running` row (committed: a killed scan stays visible).

    A store locked past the wait, or a file system that refuses it, gives no session and the reason: the
    run goes on without history, its reports are written, and it ends incomplete unless findings fail."""
    if plan.path is None:
        return None, None
    try:
        conn = open_store(plan.path)
    except StoreUnavailable as exc:
        return None, _not_recorded(exc)
    try:
        scan_id = record.begin_scan(conn, started_at, source)
        return Session(plan.path, conn, scan_id, record.open_issues(conn), record.known_hosts(conn)), None
    except StoreUnavailable as exc:
        conn.close()
        return None, _not_recorded(exc)
    except BaseException:
        conn.close()
        raise


def _not_recorded(exc: Exception) -> str:
    return one_line(f"{exc}: this scan is not recorded in it")


def feed(session: Session | None) -> Feed:
    """The per-snapshot step for the evaluation core: `facts.trends` on each snapshot before it is judged
    (empty ones without a store or an earlier scan), its store row packed for `finish`."""
    if session is None:
        return Feed(None)
    return Feed(session.path, session.scan_id, session.conn, session.spool)


def pending(session: Session | None, extras: Iterable[tuple[HostResult, Any]], spare: Iterable[Any] = ()) -> Pending:
    """The packed rows the feed returned, by host (what the evaluation core kept of each), and the bodies
    carried by rows it did not keep (`spare`: duplicate hosts)."""
    return Pending.of(((host.name, packed) for host, packed in extras if isinstance(packed, (Packed, Spooled))),
                      (packed for packed in spare if isinstance(packed, Packed)),
                      session.spool if session is not None else None)


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


def finish(session: Session | None, doc: Mapping[str, Any], rows: Pending, finished_at: str) -> str | None:
    """Record the scan (one transaction). When the store refuses it (locked past the wait, disk full,
    read-only) the scan keeps its results (reports are written before): the reason is returned (one safe
    line), and the scan's row stays `running` until the next open sees its process gone."""
    if session is None:
        return None
    try:
        record.record_scan(session.conn, session.scan_id, doc, rows, finished_at)
    except (StoreUnavailable, SpoolLost) as exc:
        return _not_recorded(exc)
    return None


def close(session: Session | None) -> None:
    if session is not None:
        session.spool.close()
        session.conn.close()
