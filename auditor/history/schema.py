"""The store's schema must be exactly its own: `sqlite_master` compared with the DDL of its migrations.

A store file is untrusted: a trigger can run a recursive CTE on every insert (a hang), RAISE, or delete
earlier scans; a view can stand in for a table; a missing table crashes a query. So before any statement
touches a table, every schema object (type, name, table and SQL text: tables, indexes, triggers, views,
SQLite's own `sqlite_sequence` and autoindexes) must be one the migrations up to the file's version make,
and none may be missing.
"""

from __future__ import annotations

import sqlite3
from functools import lru_cache
from pathlib import Path

from ..errors import InputError
from .conn import Store

SchemaObject = tuple[str, str, str, str | None]  # (type, name, tbl_name, sql)
_MASTER = "SELECT type, name, tbl_name, sql FROM sqlite_master"


@lru_cache(maxsize=8)
def expected(migrations: tuple[str, ...]) -> frozenset[SchemaObject]:
    """The objects the migrations make, in a fresh in-memory database (the same SQLite as the file's reader)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for step in migrations:
            conn.executescript(f"BEGIN; {step}; COMMIT;")
        return frozenset(conn.execute(_MASTER).fetchall())
    finally:
        conn.close()


def _describe(objects: set[SchemaObject]) -> str:
    shown = sorted(f"{kind} {name}" for kind, name, _, _ in objects)
    return ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")


def check(conn: Store, path: Path, migrations: tuple[str, ...]) -> None:
    """InputError naming the file unless its schema is exactly what `migrations` make."""
    found = {tuple(row) for row in conn.execute(_MASTER)}
    want = expected(migrations)
    foreign = found - want
    missing = want - found
    if not foreign and not missing:
        return
    parts = []
    if foreign:
        parts.append(f"not its own: {_describe(foreign)}")  # type: ignore[arg-type]
    if missing:
        parts.append(f"missing: {_describe(set(missing))}")
    raise InputError(f"cannot use the history store: its schema is not an ami-auditor store's ({'; '.join(parts)}) "
                     "(move it aside or choose another with --store PATH)", str(path))
