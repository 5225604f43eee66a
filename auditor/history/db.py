"""The embedded SQLite store of scans: where it lives, opening it safely, schema version and migrations.

The store file is untrusted input: a file that is not a SQLite database, is corrupt, has a schema version
this program does not know, or a schema that is not exactly its own (schema.py: no foreign trigger, view,
table or index, none missing) is a clear error (exit 2) naming the file, found before any statement
touches a table; `trusted_schema=OFF` besides. Every statement is bounded in time and lock wait (conn.py).
WAL mode: readers (`history list`) never block a scan that is writing.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import InputError
from . import schema
from .conn import Store
from .record import mark_interrupted

STORE_NAME = "history.sqlite3"

# Each entry upgrades the schema by one version (index + 1). Never edit a released entry: append.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE scans (
        id INTEGER PRIMARY KEY AUTOINCREMENT,  -- monotonic: the order of scans, never a file name or a clock
        started_at TEXT NOT NULL,
        finished_at TEXT,
        generated_at TEXT,
        state TEXT NOT NULL CHECK (state IN ('running', 'complete', 'interrupted')),
        pid INTEGER,
        node TEXT,
        exit_code INTEGER,
        hosts INTEGER NOT NULL DEFAULT 0,
        findings INTEGER NOT NULL DEFAULT 0,
        drift INTEGER NOT NULL DEFAULT 0,
        source TEXT  -- 'scan', or the imported file's name
    );
    CREATE TABLE snapshots (  -- stable snapshot bodies, shared by every scan and host with the same content
        hash TEXT PRIMARY KEY,
        body BLOB NOT NULL
    );
    CREATE TABLE hosts (
        name TEXT PRIMARY KEY,
        first_scan INTEGER NOT NULL,
        first_seen TEXT NOT NULL,
        last_scan INTEGER NOT NULL,
        last_seen TEXT NOT NULL
    );
    CREATE TABLE scan_hosts (
        scan_id INTEGER NOT NULL REFERENCES scans(id),
        host TEXT NOT NULL,
        status TEXT NOT NULL,
        error TEXT,
        target TEXT,
        labels TEXT,
        collected_at TEXT,
        duration_s REAL,
        complete INTEGER NOT NULL DEFAULT 0,
        summary TEXT,
        snapshot TEXT REFERENCES snapshots(hash),
        volatile BLOB,
        PRIMARY KEY (scan_id, host)
    );
    CREATE INDEX scan_hosts_by_host ON scan_hosts(host, scan_id);
    CREATE TABLE findings (
        scan_id INTEGER NOT NULL REFERENCES scans(id),
        host TEXT NOT NULL,
        rule TEXT NOT NULL,
        item TEXT NOT NULL DEFAULT '',
        severity TEXT NOT NULL,
        title TEXT NOT NULL,
        evidence TEXT,
        waived INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX findings_by_scan ON findings(scan_id);
    CREATE TABLE drift (
        scan_id INTEGER NOT NULL REFERENCES scans(id),
        host TEXT NOT NULL,
        path TEXT NOT NULL,
        kind TEXT NOT NULL,
        severity TEXT NOT NULL,
        expected TEXT,
        actual TEXT
    );
    CREATE INDEX drift_by_scan ON drift(scan_id);
    CREATE TABLE issues (  -- one row per finding or drift identity (rule or path + host + item) and occurrence
        kind TEXT NOT NULL CHECK (kind IN ('finding', 'drift')),
        host TEXT NOT NULL,
        key TEXT NOT NULL,
        item TEXT NOT NULL DEFAULT '',
        first_scan INTEGER NOT NULL,
        first_seen TEXT NOT NULL,
        last_scan INTEGER NOT NULL,
        resolved_scan INTEGER,
        resolved_at TEXT
    );
    CREATE UNIQUE INDEX issues_open ON issues(kind, host, key, item) WHERE resolved_scan IS NULL;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


DEFAULT_SHOWN = "$XDG_DATA_HOME/ami-auditor/history.sqlite3, else ~/.local/share/ami-auditor/history.sqlite3"


def default_path() -> Path:
    """`$XDG_DATA_HOME/ami-auditor/history.sqlite3`, else `~/.local/share/ami-auditor/history.sqlite3`."""
    base = os.environ.get("XDG_DATA_HOME")
    if not base:
        try:
            base = str(Path.home() / ".local" / "share")
        except (RuntimeError, KeyError):  # a service's dynamic user has no home directory
            raise InputError("no home directory for the default history store: give --store PATH or --no-store") \
                from None
    return Path(base) / "ami-auditor" / STORE_NAME


def _fail(path: Path, why: str) -> InputError:
    return InputError(f"cannot use the history store: {why} (move it aside or choose another with --store PATH)",
                      str(path))


def _version(conn: Store, path: Path) -> int:
    """The file's schema version, once its schema is exactly that version's (before any table is touched)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if not isinstance(version, int) or version < 0:
        raise _fail(path, f"schema version {version!r} is not one this ami-auditor made")
    if version > SCHEMA_VERSION:
        raise _fail(path, f"schema version {version} is newer than this ami-auditor knows ({SCHEMA_VERSION})")
    if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise _fail(path, "a SQLite database that is not an ami-auditor store")
    if version:
        schema.check(conn, path, MIGRATIONS[:version])
    return version


def _migrate(conn: Store, version: int) -> None:
    for index in range(version, SCHEMA_VERSION):
        conn.executescript(f"BEGIN; {MIGRATIONS[index]}; PRAGMA user_version = {index + 1}; COMMIT;")


def check_usable(path: Path) -> None:
    """Before any host is contacted: an existing store must open; a new one's directory must be creatable."""
    if path.exists():
        if not path.is_file():
            raise _fail(path, "not a regular file")
        if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK):
            raise _fail(path, "not writable (read-only file system or permissions)")
        open_store(path, create=False).close()
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _fail(path, f"{parent} is not writable")


def _on_read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def open_store(path: Path, create: bool = True, reader: bool = False) -> Store:
    """Open (and create or upgrade) the store; every defect of the file is an InputError naming it, a lock
    held past the wait or a file system that refuses the write a StoreUnavailable (conn.py).

    A `reader` (the history commands) opens a store on a read-only file system (a mounted backup) as it
    is: nothing can write it, so it is read immutable, never upgraded, and no scan is marked interrupted."""
    if not path.exists() and not create:
        raise InputError("no history store here (run a scan first, or give --store PATH)", str(path))
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    frozen = reader and _on_read_only_fs(path)
    try:
        conn = Store(path, immutable=frozen)
    except sqlite3.Error as exc:
        raise _fail(path, str(exc)) from exc
    try:
        conn.execute("PRAGMA trusted_schema=OFF")  # no function a schema object names runs with its side effects
        version = _version(conn, path)
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise _fail(path, f"the database is damaged ({check})")
        if frozen:
            if version < SCHEMA_VERSION:
                raise _fail(path, f"schema version {version} needs an upgrade, which a read-only file system "
                                  "refuses (copy the store somewhere writable)")
            return conn
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
        _migrate(conn, version)
        mark_interrupted(conn)  # scans whose process died (SIGKILL, power loss) read as interrupted
    except BaseException:
        conn.close()
        raise
    return conn
