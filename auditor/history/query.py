"""Reading the store: scans in order, one scan, the previous snapshot of each host, a fact's series.

Every stored value is read as untrusted-ish input: a blob that does not inflate or parse is an
InputError naming the store, never a traceback.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any

from ..errors import InputError
from . import pack


def _load(blob: bytes | None, where: Path) -> Any:
    if blob is None:
        return None
    try:
        return pack.decompress(blob)
    except (zlib.error, ValueError, TypeError) as exc:
        raise InputError(f"the history store holds a damaged value ({exc})", str(where)) from exc


def _text(value: str | None, where: Path) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError as exc:
        raise InputError(f"the history store holds a damaged value ({exc})", str(where)) from exc


SCAN_COLUMNS = ("id", "started_at", "finished_at", "generated_at", "state", "exit_code", "hosts", "findings",
                "drift", "source")


def list_scans(conn: sqlite3.Connection, last: int = 0) -> list[dict[str, Any]]:
    """Scans oldest first (by id); `last` > 0 keeps only the newest `last`."""
    sql = f"SELECT {', '.join(SCAN_COLUMNS)} FROM scans ORDER BY id"
    rows = [dict(zip(SCAN_COLUMNS, r)) for r in conn.execute(sql)]
    return rows[-last:] if last > 0 else rows


def get_scan(conn: sqlite3.Connection, scan_id: int, where: Path) -> dict[str, Any]:
    """One scan: its row, hosts, findings (with first-seen times) and drift."""
    row = conn.execute(f"SELECT {', '.join(SCAN_COLUMNS)} FROM scans WHERE id = ?", (scan_id,)).fetchone()
    if row is None:
        raise InputError(f"no scan {scan_id} in the history store", str(where))
    scan = dict(zip(SCAN_COLUMNS, row))
    scan["hosts_detail"] = [
        {"name": n, "status": s, "error": e, "target": t, "labels": _text(lb, where), "complete": bool(c),
         "facts_summary": _text(fs, where), "snapshot": h}
        for n, s, e, t, lb, c, fs, h in conn.execute(
            "SELECT host, status, error, target, labels, complete, summary, snapshot FROM scan_hosts "
            "WHERE scan_id = ? ORDER BY host", (scan_id,))]
    scan["findings_detail"] = [
        {"host": h, "rule": r, "item": i or None, "severity": s, "title": t, "evidence": _text(ev, where),
         "waived": bool(w), "first_seen": first_seen(conn, "finding", h, r, i, scan_id)}
        for h, r, i, s, t, ev, w in conn.execute(
            "SELECT host, rule, item, severity, title, evidence, waived FROM findings WHERE scan_id = ? "
            "ORDER BY host, rule, item", (scan_id,))]
    scan["drift_detail"] = [
        {"host": h, "path": p, "kind": k, "severity": s, "expected": _text(e, where), "actual": _text(a, where)}
        for h, p, k, s, e, a in conn.execute(
            "SELECT host, path, kind, severity, expected, actual FROM drift WHERE scan_id = ? ORDER BY host, path",
            (scan_id,))]
    return scan


def first_seen(conn: sqlite3.Connection, kind: str, host: str, key: str, item: str, scan_id: int) -> str | None:
    """When the occurrence of this identity that was open at `scan_id` was first seen."""
    row = conn.execute("SELECT first_seen FROM issues WHERE kind = ? AND host = ? AND key = ? AND item = ? "
                       "AND first_scan <= ? AND (resolved_scan IS NULL OR resolved_scan > ?) "
                       "ORDER BY first_scan DESC LIMIT 1", (kind, host, key, item, scan_id, scan_id)).fetchone()
    return row[0] if row else None


def snapshot_of(conn: sqlite3.Connection, scan_id: int, host: str, where: Path) -> dict[str, Any] | None:
    """A stored snapshot, put back together (None when the host was not reached in that scan)."""
    row = conn.execute("SELECT s.body, h.volatile FROM scan_hosts h JOIN snapshots s ON s.hash = h.snapshot "
                       "WHERE h.scan_id = ? AND h.host = ?", (scan_id, host)).fetchone()
    if row is None:
        return None
    body, volatile = _load(row[0], where), _load(row[1], where)
    if not isinstance(body, dict) or not isinstance(volatile, dict):
        raise InputError("the history store holds a damaged snapshot", str(where))
    try:
        return pack.join(body, volatile)
    except (IndexError, TypeError) as exc:
        raise InputError(f"the history store holds a damaged snapshot ({exc})", str(where)) from exc


def previous_snapshots(conn: sqlite3.Connection, hosts: list[str], before: int,
                       where: Path) -> dict[str, tuple[int, dict[str, Any]]]:
    """Per host, the newest complete scan before `before` that reached it: (scan id, snapshot)."""
    out: dict[str, tuple[int, dict[str, Any]]] = {}
    for host in hosts:
        row = conn.execute("SELECT h.scan_id FROM scan_hosts h JOIN scans s ON s.id = h.scan_id WHERE h.host = ? "
                           "AND h.snapshot IS NOT NULL AND s.state = 'complete' AND h.scan_id < ? "
                           "ORDER BY h.scan_id DESC LIMIT 1", (host, before)).fetchone()
        if row is not None:
            snap = snapshot_of(conn, row[0], host, where)
            if snap is not None:
                out[host] = (int(row[0]), snap)
    return out


def scans_seen(conn: sqlite3.Connection, hosts: list[str], before: int) -> dict[str, int]:
    """Per host, how many complete scans before `before` reached it."""
    return {h: int(conn.execute("SELECT count(*) FROM scan_hosts h JOIN scans s ON s.id = h.scan_id WHERE "
                                "h.host = ? AND h.snapshot IS NOT NULL AND s.state = 'complete' AND h.scan_id < ?",
                                (h, before)).fetchone()[0]) for h in hosts}


def host_series(conn: sqlite3.Connection, where: Path, host: str | None = None,
                last: int = 0) -> list[tuple[int, str, str, dict[str, Any]]]:
    """(scan id, generated_at, host, snapshot) for every stored snapshot, oldest first."""
    sql = ("SELECT h.scan_id, s.generated_at, h.host FROM scan_hosts h JOIN scans s ON s.id = h.scan_id "
           "WHERE s.state = 'complete' AND h.snapshot IS NOT NULL")
    params: tuple[Any, ...] = ()
    if host is not None:
        sql += " AND h.host = ?"
        params = (host,)
    rows = list(conn.execute(sql + " ORDER BY h.scan_id, h.host", params))
    if last > 0:
        keep = sorted({r[0] for r in rows})[-last:]
        rows = [r for r in rows if r[0] in set(keep)]
    out = []
    for sid, at, name in rows:
        snap = snapshot_of(conn, sid, name, where)
        if snap is not None:
            out.append((int(sid), str(at), str(name), snap))
    return out
