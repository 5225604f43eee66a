"""Reading the store: scans in order, one scan, the previous snapshot of each host, a fact's series.

Every stored value is read as untrusted input (values.py): a blob that does not inflate, JSON that is not
strict, a column of the wrong kind, a snapshot that is not a valid snapshot is an InputError naming the
store and the row, never a traceback.
"""

from __future__ import annotations

import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..collect.schema import snapshot_json_schema
from ..errors import InputError
from ..jsonload import json_pointer
from ..models import SEVERITIES as _SEVERITIES
from ..schemacheck import FastCheck
from ..snapshotdoc import Snapshot
from . import pack
from .conn import Store
from .values import damaged, integer, json_value, text

STATES = frozenset({"running", "complete", "interrupted"})
SEVERITIES = frozenset(_SEVERITIES)


def _load(blob: Any, where: Path, what: str) -> Any:
    if blob is None:
        return None
    if not isinstance(blob, bytes):
        raise damaged(where, what, f"is {type(blob).__name__}, not a compressed value")
    try:
        return pack.decompress(blob)
    except (zlib.error, ValueError) as exc:
        raise damaged(where, what, f"does not inflate ({exc})") from exc
    except InputError as exc:
        raise damaged(where, what, f"is not strict JSON ({exc.message})") from None


SCAN_COLUMNS = ("id", "started_at", "finished_at", "generated_at", "state", "exit_code", "hosts", "findings",
                "drift", "source")


def _scan_row(row: Any, where: Path) -> dict[str, Any]:
    scan_id = integer(row[0], where, "scans.id", low=1)
    at = f"scan {scan_id}"
    return {"id": scan_id, "started_at": text(row[1], where, f"{at} started_at"),
            "finished_at": text(row[2], where, f"{at} finished_at", null=True),
            "generated_at": text(row[3], where, f"{at} generated_at", null=True),
            "state": text(row[4], where, f"{at} state", choices=STATES),
            "exit_code": integer(row[5], where, f"{at} exit_code", high=255, null=True),
            **{k: integer(v, where, f"{at} {k}") for k, v in zip(("hosts", "findings", "drift"), row[6:9])},
            "source": text(row[9], where, f"{at} source", null=True)}


def list_scans(conn: Store, where: Path, last: int = 0) -> list[dict[str, Any]]:
    """Scans oldest first (by id); `last` > 0 keeps only the newest `last`."""
    sql = f"SELECT {', '.join(SCAN_COLUMNS)} FROM scans ORDER BY id"
    rows = [_scan_row(r, where) for r in conn.execute(sql)]
    return rows[-last:] if last > 0 else rows


def get_scan(conn: Store, scan_id: int, where: Path) -> dict[str, Any]:
    """One scan: its row, hosts, findings (with first-seen times) and drift."""
    row = conn.execute(f"SELECT {', '.join(SCAN_COLUMNS)} FROM scans WHERE id = ?", (scan_id,)).fetchone()
    if row is None:
        raise InputError(f"no scan {scan_id} in the history store", str(where))
    scan = _scan_row(row, where)
    at = f"scan {scan_id}"
    scan["hosts_detail"] = [
        {"name": text(n, where, f"{at} host"), "status": text(s, where, f"{at} host status"),
         "error": text(e, where, f"{at} host error", null=True), "target": text(t, where, f"{at} target", null=True),
         "labels": json_value(lb, where, f"{at} labels"), "complete": bool(integer(c, where, f"{at} complete")),
         "facts_summary": json_value(fs, where, f"{at} summary"), "snapshot": text(h, where, f"{at} snapshot", True)}
        for n, s, e, t, lb, c, fs, h in conn.execute(
            "SELECT host, status, error, target, labels, complete, summary, snapshot FROM scan_hosts "
            "WHERE scan_id = ? ORDER BY host", (scan_id,))]
    scan["findings_detail"] = [
        {"host": text(h, where, f"{at} finding host"), "rule": text(r, where, f"{at} finding rule"),
         "item": text(i, where, f"{at} finding item") or None,
         "severity": text(s, where, f"{at} finding severity", choices=SEVERITIES),
         "title": text(t, where, f"{at} finding title"), "evidence": json_value(ev, where, f"{at} finding evidence"),
         "waived": bool(integer(w, where, f"{at} finding waived")),
         "first_seen": first_seen(conn, "finding", h, r, i, scan_id, where)}
        for h, r, i, s, t, ev, w in conn.execute(
            "SELECT host, rule, item, severity, title, evidence, waived FROM findings WHERE scan_id = ? "
            "ORDER BY host, rule, item", (scan_id,))]
    scan["drift_detail"] = [
        {"host": text(h, where, f"{at} drift host"), "path": text(p, where, f"{at} drift path"),
         "kind": text(k, where, f"{at} drift kind"),
         "severity": text(s, where, f"{at} drift severity", choices=SEVERITIES),
         "expected": json_value(e, where, f"{at} drift expected"), "actual": json_value(a, where, f"{at} drift actual")}
        for h, p, k, s, e, a in conn.execute(
            "SELECT host, path, kind, severity, expected, actual FROM drift WHERE scan_id = ? ORDER BY host, path",
            (scan_id,))]
    return scan


def first_seen(conn: Store, kind: str, host: str, key: str, item: str, scan_id: int, where: Path) -> str | None:
    """When the occurrence of this identity that was open at `scan_id` was first seen."""
    row = conn.execute("SELECT first_seen FROM issues WHERE kind = ? AND host = ? AND key = ? AND item = ? "
                       "AND first_scan <= ? AND (resolved_scan IS NULL OR resolved_scan > ?) "
                       "ORDER BY first_scan DESC LIMIT 1", (kind, host, key, item, scan_id, scan_id)).fetchone()
    return text(row[0], where, f"first_seen of {kind} {key} on {host}") if row else None


@lru_cache(maxsize=1)
def _snapshot_check() -> FastCheck:
    return FastCheck(snapshot_json_schema())


def _valid_snapshot(snap: Any, where: Path, what: str) -> Snapshot:
    """The snapshot, if it is one by the snapshot schema (jsonschema-rs first; jsonschema has the last word)."""
    if _snapshot_check().valid(snap, from_json=True):
        return snap
    import jsonschema  # only for a snapshot the fast check doubts

    error = next(iter(jsonschema.Draft202012Validator(snapshot_json_schema()).iter_errors(snap)), None)
    if error is None:
        return snap
    pointer = json_pointer(error.absolute_path) or "the top level"
    raise damaged(where, what, f"is not a valid snapshot at JSON pointer {pointer}: {error.message[:200]}")


def snapshot_of(conn: Store, scan_id: int, host: str, where: Path) -> Snapshot | None:
    """A stored snapshot, put back together and validated (None when the host was not reached in that scan)."""
    row = conn.execute("SELECT s.body, h.volatile FROM scan_hosts h JOIN snapshots s ON s.hash = h.snapshot "
                       "WHERE h.scan_id = ? AND h.host = ?", (scan_id, host)).fetchone()
    if row is None:
        return None
    what = f"scan {scan_id} snapshot of {host}"
    body, volatile = _load(row[0], where, what), _load(row[1], where, f"{what} (volatile part)")
    if not isinstance(body, dict) or not isinstance(volatile, dict):
        raise damaged(where, what, "is not a JSON object")
    try:
        snap = pack.join(body, volatile)
    except (IndexError, TypeError) as exc:
        raise damaged(where, what, f"does not join with its volatile part ({exc})") from exc
    return _valid_snapshot(snap, where, what)


def previous_snapshots(conn: Store, hosts: list[str], before: int,
                       where: Path) -> dict[str, tuple[int, Snapshot]]:
    """Per host, the newest complete scan before `before` that reached it: (scan id, snapshot)."""
    out: dict[str, tuple[int, Snapshot]] = {}
    for host in hosts:
        row = conn.execute("SELECT h.scan_id FROM scan_hosts h JOIN scans s ON s.id = h.scan_id WHERE h.host = ? "
                           "AND h.snapshot IS NOT NULL AND s.state = 'complete' AND h.scan_id < ? "
                           "ORDER BY h.scan_id DESC LIMIT 1", (host, before)).fetchone()
        if row is not None:
            scan_id = integer(row[0], where, "scan_hosts.scan_id", low=1)
            snap = snapshot_of(conn, scan_id, host, where)
            if snap is not None:
                out[host] = (scan_id, snap)
    return out


def scans_seen(conn: Store, hosts: list[str], before: int) -> dict[str, int]:
    """Per host, how many complete scans before `before` reached it."""
    return {h: int(conn.execute("SELECT count(*) FROM scan_hosts h JOIN scans s ON s.id = h.scan_id WHERE "
                                "h.host = ? AND h.snapshot IS NOT NULL AND s.state = 'complete' AND h.scan_id < ?",
                                (h, before)).fetchone()[0]) for h in hosts}


def host_series(conn: Store, where: Path, host: str | None = None,
                last: int = 0) -> list[tuple[int, str, str, Snapshot]]:
    """(scan id, generated_at, host, snapshot) for every stored snapshot, oldest first."""
    sql = ("SELECT h.scan_id, s.generated_at, h.host FROM scan_hosts h JOIN scans s ON s.id = h.scan_id "
           "WHERE s.state = 'complete' AND h.snapshot IS NOT NULL")
    params: tuple[Any, ...] = ()
    if host is not None:
        sql += " AND h.host = ?"
        params = (host,)
    rows = [(integer(sid, where, "scan_hosts.scan_id", low=1), text(at, where, f"scan {sid} generated_at"),
             text(name, where, f"scan {sid} host")) for sid, at, name in conn.execute(sql + " ORDER BY h.scan_id, "
                                                                                      "h.host", params)]
    if last > 0:
        keep = sorted({r[0] for r in rows})[-last:]
        rows = [r for r in rows if r[0] in set(keep)]
    out = []
    for sid, at, name in rows:
        snap = snapshot_of(conn, sid, name, where)
        if snap is not None:
            out.append((sid, at, name, snap))
    return out


def _ids(scan_ids: list[int]) -> str:
    return ", ".join(str(int(i)) for i in scan_ids) or "NULL"  # ints read back through integer(): no text in SQL


SUMMARY_FIELDS = ("dying_memcgs", "restarts", "unit_restarts")


def summaries(conn: Store, where: Path, scan_ids: list[int],
              hosts: list[str] | None = None) -> list[tuple[int, str, dict[str, Any] | None]]:
    """(scan id, host, the summary's dying_memcgs, restarts and unit_restarts, or None) of the given scans (and
    hosts), by scan then host: the headline numbers every recorded scan carries, so no snapshot is inflated
    (imported reports have none). SQLite picks the three fields out, so the CPU samples that make most of
    a many-core host's summary are never parsed in Python; a summary that is not JSON is
    damaged, the fields are type-checked by the caller, unit_restarts parsed strictly."""
    picks = ", ".join(f"CASE WHEN json_valid(summary) THEN json_extract(summary, '$.{f}') END" for f in SUMMARY_FIELDS)
    sql = (f"SELECT scan_id, host, summary IS NULL, json_valid(summary), {picks}, CASE WHEN json_valid(summary) "
           f"THEN json_type(summary, '$.unit_restarts') END FROM scan_hosts WHERE scan_id IN ({_ids(scan_ids)})")
    rows: list[tuple[int, str, dict[str, Any] | None]] = []
    wanted = set(hosts) if hosts is not None else None
    for sid, host, null, valid, dying, restarts, units, units_type in conn.execute(sql + " ORDER BY scan_id, host"):
        scan_id = integer(sid, where, "scan_hosts.scan_id", low=1)
        name = text(host, where, f"scan {scan_id} host")
        if wanted is not None and name not in wanted:
            continue
        if null:
            rows.append((scan_id, name, None))
            continue
        what = f"scan {scan_id} summary of {name}"
        if not valid:
            raise damaged(where, what, "is not JSON text")
        units = json_value(units, where, f"{what} (unit_restarts)") if units_type in ("object", "array") else None
        rows.append((scan_id, name, {"dying_memcgs": dying, "restarts": restarts, "unit_restarts": units}))
    return rows


def severity_counts(conn: Store, where: Path, scan_ids: list[int]) -> dict[int, dict[str, int]]:
    """Per scan, unwaived findings by severity."""
    out: dict[int, dict[str, int]] = {}
    for sid, severity, count in conn.execute(
            f"SELECT scan_id, severity, count(*) FROM findings WHERE scan_id IN ({_ids(scan_ids)}) AND waived = 0 "
            "GROUP BY scan_id, severity"):
        scan_id = integer(sid, where, "findings.scan_id", low=1)
        out.setdefault(scan_id, {})[text(severity, where, f"scan {scan_id} finding severity",
                                         choices=SEVERITIES)] = integer(count, where, "count")
    return out


def finding_spans(conn: Store, where: Path, first: int, last: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Findings (rule · item) open at some scan in [first, last], across hosts: when first seen, the last scan
    that saw it, on how many hosts, how many still open; earliest first, at most `limit` (and how many more)."""
    sql = ("SELECT key, item, min(first_scan), min(first_seen), max(last_scan), "
           "sum(resolved_scan IS NULL), count(DISTINCT host) FROM issues WHERE kind = 'finding' AND first_scan <= ? "
           "AND (resolved_scan IS NULL OR resolved_scan > ?) GROUP BY key, item ORDER BY min(first_scan), key, item")
    rows = conn.execute(sql, (last, first)).fetchall()
    out = []
    for key, item, f_scan, f_seen, last_seen, still, hosts in rows[:limit]:
        rule = text(key, where, "issues.key")
        sev = conn.execute("SELECT severity FROM findings WHERE rule = ? AND item = ? AND scan_id <= ? "
                           "ORDER BY scan_id DESC LIMIT 1", (rule, item, last)).fetchone()
        out.append({"rule": rule, "item": text(item, where, f"issue {rule} item") or None,
                    "first_scan": integer(f_scan, where, f"issue {rule} first_scan", low=1),
                    "first_seen": text(f_seen, where, f"issue {rule} first_seen"),
                    "last_scan": integer(last_seen, where, f"issue {rule} last_scan", low=1),
                    "open_hosts": integer(still, where, f"issue {rule} open"),
                    "hosts": integer(hosts, where, f"issue {rule} hosts"),
                    "severity": text(sev[0], where, f"issue {rule} severity", choices=SEVERITIES) if sev else "info"})
    return out, max(0, len(rows) - limit)
