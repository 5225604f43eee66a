"""Snapshots into the store as they arrive, for a scan's (or an analysis') one transaction at the end.

Before a host is judged, `Feed` publishes its `facts.trends` (from the host's previous stored snapshot)
and packs its store row: the stable body compressed once per distinct content in this process, the
volatile part per host. The packed rows wait (`Pending`: each host's volatile part in the run's `Spool`
file, bodies in memory once per distinct configuration) until `record.record_scan` writes the whole scan
at once; the snapshot itself is dropped.
In a forked worker the feed reads the store through its own connection (SQLite connections must not
cross a fork)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

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


@dataclass(frozen=True, slots=True)
class Spooled:
    """A packed row whose volatile part waits in the spool file (at `offset`, `size` bytes)."""

    digest: str
    body: bytes | None
    offset: int
    size: int
    collected_at: str | None


class SpoolLost(Exception):
    """The spool file could not be read back: the scan's rows are not recorded."""


class Spool:
    """Packed rows' volatile parts in an unlinked temporary file until the scan is recorded: the largest
    per-host part a fleet's scan would otherwise hold in memory. If the file cannot be written (no space),
    rows stay in memory."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._end = 0
        self._failed = False

    def hold(self, packed: Packed) -> Packed | Spooled:
        """`packed`, its volatile part moved to the file (or kept, when the file fails)."""
        if self._failed or not packed.volatile:
            return packed
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="ami-auditor-rows-")  # noqa: SIM115 (closed by close)
            _write_at(self._file.fileno(), packed.volatile, self._end)
        except OSError:
            self._failed = True
            return packed
        offset, self._end = self._end, self._end + len(packed.volatile)
        return Spooled(packed.digest, packed.body, offset, len(packed.volatile), packed.collected_at)

    def volatile(self, row: Packed | Spooled) -> bytes:
        """A row's volatile part, read back from the file when it was spooled."""
        if isinstance(row, Packed):
            return row.volatile
        if self._file is None:
            raise SpoolLost("the scan's rows held in a temporary file were let go before it was recorded")
        try:
            data = os.pread(self._file.fileno(), row.size, row.offset)
        except OSError as exc:
            raise SpoolLost(f"the scan's rows held in a temporary file could not be read back: {exc}") from exc
        if len(data) != row.size:
            raise SpoolLost("the scan's rows held in a temporary file came back short")
        return data

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _write_at(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


@dataclass
class Pending:
    """A scan's packed rows by host, and each distinct stable body once."""

    rows: dict[str, Packed | Spooled] = field(default_factory=dict)
    bodies: dict[str, bytes] = field(default_factory=dict)
    spool: Spool = field(default_factory=Spool)

    @classmethod
    def of(cls, hosts: Iterable[tuple[str, Packed | Spooled]], spare: Iterable[Packed] = (),
           spool: Spool | None = None) -> Pending:
        """Rows by host; bodies from them and from `spare` (packed, then not recorded: a duplicate host)."""
        out = cls(spool=spool or Spool())
        for packed in spare:
            if packed.body is not None:
                out.bodies.setdefault(packed.digest, packed.body)
        for name, row in hosts:
            if row.body is not None:
                out.bodies.setdefault(row.digest, row.body)
            out.rows[name] = row
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
    """The per-snapshot history step (the evaluation core's HostHook): trends on, row packed; without a
    store, empty trends and no row."""

    def __init__(self, path: Path | None, scan_id: int = 0, conn: Store | None = None, spool: Spool | None = None):
        self.path = path
        self.scan_id = scan_id
        self._conn = conn
        self._pid = os.getpid()
        self._known: set[str] = set()
        self.spool = spool or Spool()  # the parent's: rows the core keeps wait here (`keep`)

    def hold(self, packed: object) -> object:
        """What the evaluation core keeps of a host's row (in the parent, as the host is accepted)."""
        return self.spool.hold(packed) if isinstance(packed, Packed) else packed

    def _store(self) -> Store:
        assert self.path is not None
        if self._conn is None or self._pid != os.getpid():  # a forked worker: a connection of its own
            self._pid = os.getpid()
            self._conn = Store(self.path)
        return self._conn

    def before_judge(self, snap: Snapshot) -> Packed | None:
        if self.path is None:
            trends.attach(snap, trends.empty())
            return None
        conn, name = self._store(), str(snap.get("name"))
        previous = query.previous_snapshots(conn, [name], self.scan_id, self.path)
        seen = query.scans_seen(conn, [name], self.scan_id)
        scan_id, before = previous.get(name, (None, None))
        trends.attach(snap, trends.derive(snap, before, scan_id, seen.get(name, 0) + 1))
        return pack_snapshot(snap, self._known)
