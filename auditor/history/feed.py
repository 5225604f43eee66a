"""Snapshots into the store as they arrive, for a scan's (or an analysis') one transaction at the end.

Before a host is judged, `Feed` publishes its `facts.trends` (from the host's previous stored snapshot)
and packs its store row: the stable body compressed once per distinct content in this process, the
volatile part per host. The packed rows wait in memory (`Pending`, small per host; bodies per distinct
configuration) until `record.record_scan` writes the whole scan at once; the snapshot itself is dropped.
In a forked worker the feed reads the store through its own connection (SQLite connections must not
cross a fork)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..snapshotdoc import Snapshot
from . import pack, query, trends
from .conn import Store


@dataclass(frozen=True, slots=True)
class Packed:
    """One host's store row: its stable body's digest (and the compressed body, the first time this
    process packed that content), its compressed volatile part, when it was collected."""

    digest: str
    body: bytes | None
    volatile: bytes
    collected_at: str | None


@dataclass
class Pending:
    """A scan's packed rows by host, and each distinct stable body once."""

    rows: dict[str, Packed] = field(default_factory=dict)
    bodies: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def of(cls, hosts: Iterable[tuple[str, Packed]], spare: Iterable[Packed] = ()) -> Pending:
        """Rows by host; bodies from them and from `spare` (packed, then not recorded: a duplicate host)."""
        out = cls()
        for packed in spare:
            if packed.body is not None:
                out.bodies.setdefault(packed.digest, packed.body)
        for name, packed in hosts:
            if packed.body is not None:
                out.bodies.setdefault(packed.digest, packed.body)
            out.rows[name] = packed
        return out


def pending_of(snapshots: dict[str, Snapshot]) -> Pending:
    """The rows of snapshots held in memory (an import, a test, a benchmark)."""
    known: set[str] = set()
    return Pending.of((name, pack_snapshot(snap, known)) for name, snap in snapshots.items())


def pack_snapshot(snap: Snapshot, known: set[str]) -> Packed:
    """The snapshot's store row; its body is compressed only when `known` lacks its digest."""
    body, volatile = pack.split(snap)
    digest, raw = pack.digest(body)
    new = digest not in known
    known.add(digest)
    collected = snap.get("collected_at")
    return Packed(digest, pack.compress_raw(raw) if new else None, pack.compress(volatile),
                  collected if isinstance(collected, str) else None)


class Feed:
    """The per-snapshot history step (the evaluation core's sidecar): trends on, row packed; without a
    store, empty trends and no row."""

    def __init__(self, path: Path | None, scan_id: int = 0, conn: Store | None = None):
        self.path = path
        self.scan_id = scan_id
        self._conn = conn
        self._pid = os.getpid()
        self._known: set[str] = set()

    def _store(self) -> Store:
        assert self.path is not None
        if self._conn is None or self._pid != os.getpid():  # a forked worker: a connection of its own
            self._pid = os.getpid()
            self._conn = Store(self.path)
        return self._conn

    def __call__(self, snap: Snapshot) -> Packed | None:
        if self.path is None:
            trends.attach(snap, trends.empty())
            return None
        conn, name = self._store(), str(snap.get("name"))
        previous = query.previous_snapshots(conn, [name], self.scan_id, self.path)
        seen = query.scans_seen(conn, [name], self.scan_id)
        scan_id, before = previous.get(name, (None, None))
        trends.attach(snap, trends.derive(snap, before, scan_id, seen.get(name, 0) + 1))
        return pack_snapshot(snap, self._known)
