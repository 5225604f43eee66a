"""`history import DIR`: record the report JSONs of a `scan --history DIR` folder, oldest first.

Every report is loaded and validated before the first is written (a bad one is exit 2 naming the file,
nothing recorded); a report already imported (same file name and time) is skipped, so importing
twice adds nothing. Those folders hold reports, not snapshots: the scans carry hosts, findings and
drift, and trends start from the first scan recorded with a snapshot.
"""

from __future__ import annotations

from pathlib import Path

from . import record
from .db import open_store
from .folder import load_scan, scan_files


def import_folder(directory: Path, store: Path) -> tuple[list[str], list[str]]:
    """(imported file names, skipped file names)."""
    docs = [(p.name, load_scan(p)) for p in scan_files(directory)]
    conn = open_store(store)
    added: list[str] = []
    skipped: list[str] = []
    try:
        for name, doc in docs:
            if conn.execute("SELECT 1 FROM scans WHERE source = ? AND generated_at = ?",
                            (name, doc["generated_at"])).fetchone():
                skipped.append(name)
                continue
            scan_id = record.begin_scan(conn, doc["generated_at"], source=name)
            record.record_scan(conn, scan_id, doc, {}, doc["generated_at"])
            added.append(name)
    finally:
        conn.close()
    return added, skipped
