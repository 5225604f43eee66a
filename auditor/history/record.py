"""Writing scans into the store: a `running` row first, then the whole scan in ONE transaction.

A scan killed midway (SIGKILL, power loss) leaves its `running` row and nothing else: SQLite's WAL
rolls the unfinished transaction back, earlier scans stay intact, and the next open marks the row
`interrupted` once its process is gone. An imported report is one transaction, row and all. Values
read back are checked (values.py): a crafted pid is bad input, never a signal sent to it. First-seen
and resolved times are kept per identity — (finding: rule + host + item) or (drift: path + host) — in
`issues`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator, Mapping
from typing import Any

from .conn import Store
from .feed import Pending
from .values import PID_MAX, integer, text


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def mark_interrupted(conn: Store) -> list[int]:
    """Mark `running` scans of this machine whose process is gone as `interrupted`; returns their ids."""
    node = socket.gethostname()
    gone = []
    for sid, pid, where in conn.execute("SELECT id, pid, node FROM scans WHERE state = 'running'"):
        at = f"scan {integer(sid, conn.path, 'scans.id', low=1)}"
        if text(where, conn.path, f"{at} node", null=True) != node:
            continue
        if integer(pid, conn.path, f"{at} pid", low=1, high=PID_MAX, null=True) is None or not _alive(pid):
            gone.append(sid)
    for sid in gone:
        conn.execute("UPDATE scans SET state = 'interrupted' WHERE id = ? AND state = 'running'", (sid,))
    return gone


def begin_scan(conn: Store, started_at: str, source: str = "scan") -> int:
    """Insert this scan's `running` row (committed at once) and return its monotonic id."""
    mark_interrupted(conn)
    cur = conn.execute("INSERT INTO scans (started_at, state, pid, node, source) VALUES (?, 'running', ?, ?, ?)",
                       (started_at, os.getpid(), socket.gethostname(), source))
    assert cur.lastrowid is not None
    return int(cur.lastrowid)


def _identity(kind: str, row: dict[str, Any]) -> tuple[str, str, str, str]:
    if kind == "finding":
        return kind, row["host"], row["rule"], row.get("item") or ""
    return kind, row["host"], row["path"], ""


def open_issues(conn: Store) -> dict[tuple[str, str, str, str], str]:
    """Identity → first-seen time, for every finding and drift item not resolved yet."""
    where = conn.path
    return {(text(k, where, "issues.kind", choices=frozenset({"finding", "drift"})), text(h, where, "issues.host"),
             text(key, where, "issues.key"), text(item, where, "issues.item")): text(first, where, "issues.first_seen")
            for k, h, key, item, first in conn.execute(
                "SELECT kind, host, key, item, first_seen FROM issues WHERE resolved_scan IS NULL")}


def known_hosts(conn: Store) -> dict[str, tuple[int, str]]:
    """Host name → (first scan id, first-seen time)."""
    where = conn.path
    return {text(name, where, "hosts.name"): (integer(sid, where, "hosts.first_scan"),
                                              text(at, where, "hosts.first_seen"))
            for name, sid, at in conn.execute("SELECT name, first_scan, first_seen FROM hosts")}


def _complete(conn: Store, scan_id: int, doc: Mapping[str, Any], pending: Pending, finished_at: str) -> None:
    at = doc["generated_at"]
    _write(conn, scan_id, doc, pending, at)
    conn.execute("UPDATE scans SET state = 'complete', finished_at = ?, generated_at = ?, exit_code = ?, "
                 "hosts = ?, findings = ?, drift = ? WHERE id = ?",
                 (finished_at, at, doc["summary"]["exit_code"], len(doc["hosts"]),
                  sum(1 for f in doc["findings"] if not f["waived"]), len(doc["drift"]), scan_id))


@contextlib.contextmanager
def _transaction(conn: Store) -> Iterator[None]:
    """BEGIN IMMEDIATE (waits for another writer, bounded: conn.py) … COMMIT; on any error roll back what began."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def record_scan(conn: Store, scan_id: int, doc: Mapping[str, Any], pending: Pending, finished_at: str) -> None:
    """Write one finished scan (the report document and the hosts' packed snapshots) in one transaction."""
    with _transaction(conn):
        _complete(conn, scan_id, doc, pending, finished_at)


def import_scan(conn: Store, doc: dict[str, Any], source: str) -> int:
    """Record a saved report (already validated) as a complete scan: its row and content in one transaction."""
    with _transaction(conn):
        cur = conn.execute("INSERT INTO scans (started_at, state, pid, node, source) VALUES (?, 'running', ?, ?, ?)",
                           (doc["generated_at"], os.getpid(), socket.gethostname(), source))
        assert cur.lastrowid is not None
        _complete(conn, int(cur.lastrowid), doc, Pending(), doc["generated_at"])
    return int(cur.lastrowid)


def _write(conn: Store, scan_id: int, doc: Mapping[str, Any], pending: Pending, at: str) -> None:
    reached: set[str] = set()
    stored: set[str] = set()  # bodies known to be in the store (this transaction's or older)
    written: set[str] = set()
    for host in doc["hosts"]:
        name = host["name"]
        if name in written:  # a second host of this name (an analysis' duplicate file): the report names it
            continue
        written.add(name)
        packed = pending.rows.get(name)
        digest = volatile = collected_at = None
        if packed is not None:
            digest, volatile, collected_at = packed.digest, pending.spool.volatile(packed), packed.collected_at
            if digest not in stored and conn.execute("SELECT 1 FROM snapshots WHERE hash = ?",
                                                     (digest,)).fetchone() is None:
                conn.execute("INSERT INTO snapshots (hash, body) VALUES (?, ?)", (digest, pending.bodies[digest]))
            stored.add(digest)
        if host["status"] == "ok":
            reached.add(name)
        conn.execute(
            "INSERT INTO scan_hosts (scan_id, host, status, error, target, labels, collected_at, duration_s, "
            "complete, summary, snapshot, volatile) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (scan_id, name, host["status"], host.get("error"), host.get("target"), _json(host.get("labels") or {}),
             collected_at, host.get("duration_s"), int(bool(host.get("complete"))),
             _json(host.get("facts_summary")), digest, volatile))
        conn.execute("INSERT INTO hosts (name, first_scan, first_seen, last_scan, last_seen) VALUES (?, ?, ?, ?, ?) "
                     "ON CONFLICT(name) DO UPDATE SET last_scan = excluded.last_scan, last_seen = excluded.last_seen",
                     (name, scan_id, at, scan_id, at))
    conn.executemany(
        "INSERT INTO findings (scan_id, host, rule, item, severity, title, evidence, waived) VALUES (?,?,?,?,?,?,?,?)",
        [(scan_id, f["host"], f["rule"], f.get("item") or "", f["severity"], f["title"], _json(f.get("evidence")),
          int(bool(f["waived"]))) for f in doc["findings"]])
    conn.executemany(
        "INSERT INTO drift (scan_id, host, path, kind, severity, expected, actual) VALUES (?,?,?,?,?,?,?)",
        [(scan_id, d["host"], d["path"], d["kind"], d["severity"], _json(d.get("expected")), _json(d.get("actual")))
         for d in doc["drift"]])
    _update_issues(conn, scan_id, doc, reached, at)


def _update_issues(conn: Store, scan_id: int, doc: Mapping[str, Any], reached: set[str], at: str) -> None:
    """Open new identities, keep seen ones open, resolve open ones of reached hosts that this scan no longer has."""
    current = {_identity("finding", f) for f in doc["findings"]} | {_identity("drift", d) for d in doc["drift"]}
    was_open = set(open_issues(conn))
    for ident in current - was_open:
        conn.execute("INSERT INTO issues (kind, host, key, item, first_scan, first_seen, last_scan) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)", (*ident, scan_id, at, scan_id))
    for ident in current & was_open:
        conn.execute("UPDATE issues SET last_scan = ? WHERE kind = ? AND host = ? AND key = ? AND item = ? "
                     "AND resolved_scan IS NULL", (scan_id, *ident))
    for ident in was_open - current:
        if ident[1] in reached:  # a host not reached this time keeps its findings open
            conn.execute("UPDATE issues SET resolved_scan = ?, resolved_at = ? WHERE kind = ? AND host = ? "
                         "AND key = ? AND item = ? AND resolved_scan IS NULL", (scan_id, at, *ident))
