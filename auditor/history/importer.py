"""`history import DIR`: record the report JSONs of a `scan --history DIR` folder, oldest first.

Every report is loaded and validated before the first is written (a bad one — schema, or a host listed
twice — is exit 2 naming the file, nothing recorded); each is then one transaction, its scan row
included; a report already imported (same file name and time) is skipped, so importing twice adds
nothing. Those folders hold reports, not snapshots: the scans carry hosts, findings and
drift, and trends start from the first scan recorded with a snapshot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError
from . import record
from .db import open_store
from .folder import PREFIX, load_scan, scan_files


def _checked(path: Path) -> dict[str, Any]:
    """A saved report that can be recorded: valid by its schema, each host once (the store keys hosts by name)."""
    doc = load_scan(path)
    seen: set[str] = set()
    for i, host in enumerate(doc["hosts"]):
        if host["name"] in seen:
            raise InputError(f"at JSON pointer /hosts/{i}/name: host {host['name']!r} is listed twice", str(path))
        seen.add(host["name"])
    return doc


def import_folder(directory: Path, store: Path) -> tuple[list[str], list[str]]:
    """(imported file names, skipped file names)."""
    files = scan_files(directory)
    if not files:  # before the store is opened: nothing is made for nothing
        others = sorted(p.name for p in directory.glob("*.json"))
        held = f"; it holds {', '.join(others[:3])}{', …' if len(others) > 3 else ''}" if others else ""
        raise InputError(f"nothing to import: no {PREFIX}*.json scans here (what an older `scan --history DIR` "
                         f"saved){held}. scan and analyze record each run in the store themselves "
                         "(`ami-auditor history list`)", str(directory))
    docs = [(p.name, _checked(p)) for p in files]
    conn = open_store(store)
    added: list[str] = []
    skipped: list[str] = []
    try:
        for name, doc in docs:
            if conn.execute("SELECT 1 FROM scans WHERE source = ? AND generated_at = ?",
                            (name, doc["generated_at"])).fetchone():
                skipped.append(name)
                continue
            record.import_scan(conn, doc, name)
            added.append(name)
    finally:
        conn.close()
    return added, skipped
