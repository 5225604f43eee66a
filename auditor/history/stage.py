"""The history stage of a run: the SQLite store, trend facts before judging, first-seen times, recording.

`prepare` checks the store before any host is contacted; the run driver then enters history through one
`RunHistory` (open → its `hook` per snapshot → `annotate` → `record` → `close`, `abandon` on a crash).
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


def pending(session: Session | None, rows: Iterable[tuple[HostResult, object]],
            refused: Iterable[object] = ()) -> Pending:
    """The packed rows the feed returned, by host (what the evaluation core kept of each), and the bodies
    carried by rows it did not keep (`refused`: duplicate hosts)."""
    return Pending.of(((host.name, packed) for host, packed in rows if isinstance(packed, (Packed, Spooled))),
                      (packed for packed in refused if isinstance(packed, Packed)),
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


class RunHistory:
    """A run's history, the one object the run driver calls: a `running` row when it opens (a killed run
    stays visible), the per-snapshot `hook` for the evaluation core, first-seen times on the report, the
    run recorded once its results are written. Without a store (--no-store, or a store that refused the
    run: `not_recorded` says why) every step is a no-op but the empty trend facts."""

    def __init__(self, session: Session | None, not_recorded: str | None):
        self.session = session
        self.not_recorded = not_recorded

    @classmethod
    def open(cls, plan: StorePlan, started_at: str, source: str) -> RunHistory:
        return cls(*begin(plan, started_at, source))

    @property
    def recording(self) -> bool:
        return self.session is not None

    def hook(self) -> Feed:
        """The evaluation core's HostHook: facts.trends on each snapshot before it is judged, its row packed."""
        return feed(self.session)

    def annotate(self, report: Report, series: bool) -> None:
        """First-seen times, new/gone/resolved hosts; with `series`, each host's earlier numbers (trend pictures)."""
        add_since(self.session, report)
        if series:
            add_series(self.session, report)

    def record(self, doc: Mapping[str, Any], rows: Iterable[tuple[HostResult, object]], refused: Iterable[object],
               finished_at: str) -> None:
        """The run in one transaction; a store that refuses it sets `not_recorded` (the reports stand)."""
        if self.session is not None:
            self.not_recorded = finish(self.session, doc, pending(self.session, rows, refused), finished_at)

    def where(self) -> str | None:
        """`recorded as scan N in PATH`, once recorded."""
        if self.session is None or self.not_recorded:
            return None
        return f"recorded as scan {self.session.scan_id} in {self.session.path}"

    def abandon(self) -> None:
        abandon(self.session)

    def close(self) -> None:
        close(self.session)
