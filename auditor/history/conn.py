"""The store's connection, bounded: every statement runs in a time bound, honours SIGINT/SIGTERM, waits for
another process's lock a bounded time, and fails as an error that names the store (never a bare sqlite3 one).

Statements run to completion inside `execute` (rows are fetched there), so the time bound, the lock wait
and the error mapping cover the whole statement. The bound is a progress handler (called every
PROGRESS_STEPS virtual-machine steps): it aborts when QUERY_SECONDS have passed or a stop was asked for.
Python runs the SIGTERM handler inside that callback, where sqlite3 swallows its exception; a hook keeps
that exception and the statement re-raises it, so the process ends with 143 at once. A lock held by
another process (SQLITE_BUSY) is retried here, not in SQLite's busy handler (which sleeps where no signal
is seen), for at most LOCK_WAIT_SECONDS.
"""

from __future__ import annotations

import sqlite3
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .. import interrupt
from ..errors import AuditorError, InputError

QUERY_SECONDS = 60.0  # one statement; the largest legit store (README: Store size) needs a few seconds in all
LOCK_WAIT_SECONDS = 30.0  # another process holding the store's write lock (a concurrent scan writes ~2 s)
PROGRESS_STEPS = 10_000
_RETRY_SECONDS = 0.05
# SQLite's primary result codes (sqlite.org/rescode.html; stable C API; not all in typeshed's sqlite3)
PERM, BUSY, LOCKED, READONLY, INTERRUPT, IOERR, FULL, CANTOPEN = 3, 5, 6, 8, 9, 10, 13, 14
_BUSY = {BUSY, LOCKED}
# The file system refused the write (full, read-only, permission, I/O): the environment, not the file's content.
_UNAVAILABLE = {FULL, READONLY, IOERR, CANTOPEN, PERM}
T = TypeVar("T")


class StoreUnavailable(AuditorError):
    """The store could not be written or read for a reason outside it (locked, disk full, read-only): exit 3."""

    def __init__(self, path: Path, why: str):
        self.path = path
        self.why = why
        super().__init__(f"history store {path}: {why}")


class Rows:
    """A statement's result, fetched: iterate it, or fetchone(); lastrowid of an INSERT."""

    def __init__(self, rows: list[Any], lastrowid: int | None):
        self._rows = rows
        self.lastrowid = lastrowid

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return list(self._rows)


_caught: dict[int, BaseException] = {}  # id(progress handler's Store) -> the signal exception it swallowed
_previous_hook = sys.unraisablehook


def _keep_signal(unraisable: Any) -> None:
    owner = getattr(unraisable.object, "__self__", None)
    if isinstance(owner, Store) and isinstance(unraisable.exc_value, KeyboardInterrupt):
        _caught[id(owner)] = unraisable.exc_value
        return
    _previous_hook(unraisable)


class Store:
    """One open store file: `execute`, `executemany`, `executescript` as sqlite3's, bounded (module doc)."""

    def __init__(self, path: Path, immutable: bool = False):
        self.path = path
        self.query_seconds = QUERY_SECONDS
        self._until = 0.0
        self._timed_out = False
        # immutable: a file nobody can write (a read-only file system), read without its -shm/-wal files
        where = f"file:{urllib.parse.quote(str(path))}?immutable=1" if immutable else str(path)
        self._conn = sqlite3.connect(where, timeout=0, isolation_level=None, uri=immutable)
        if sys.unraisablehook is not _keep_signal:
            sqlite3.enable_callback_tracebacks(True)  # a callback's exception reaches the hook, not the void
            sys.unraisablehook = _keep_signal
        self._conn.set_progress_handler(self._progress, PROGRESS_STEPS)

    def _progress(self) -> int:
        if interrupt.STOP.is_set():
            return 1
        if time.monotonic() > self._until:
            self._timed_out = True
            return 1
        return 0

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def close(self) -> None:
        _caught.pop(id(self), None)
        self._conn.close()

    def execute(self, sql: str, parameters: Iterable[Any] = ()) -> Rows:
        def step() -> Rows:
            cur = self._conn.execute(sql, tuple(parameters))
            return Rows(cur.fetchall(), cur.lastrowid)
        return self._run(step)

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        batch = [tuple(r) for r in rows]
        self._run(lambda: self._conn.executemany(sql, batch))

    def executescript(self, script: str) -> None:
        self._run(lambda: self._conn.executescript(script))

    def _run(self, step: Callable[[], T]) -> T:
        give_up = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            self._until = time.monotonic() + self.query_seconds
            self._timed_out = False
            try:
                return step()
            except sqlite3.Error as exc:
                code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
                if code in _BUSY and time.monotonic() < give_up:
                    interrupt.wait(_RETRY_SECONDS)
                    continue
                raise self._error(exc, code) from exc

    def _error(self, exc: sqlite3.Error, code: int) -> BaseException:
        swallowed = _caught.pop(id(self), None)
        if swallowed is not None:
            return swallowed
        if interrupt.STOP.is_set():
            return interrupt.Interrupted("interrupted")
        if code == INTERRUPT and self._timed_out:
            return InputError(f"a query of the history store took longer than {self.query_seconds:g} s "
                              "(move it aside or choose another with --store PATH)", str(self.path))
        if code in _BUSY:
            return StoreUnavailable(self.path, f"locked by another process (waited {LOCK_WAIT_SECONDS:g} s)")
        if code in _UNAVAILABLE:
            return StoreUnavailable(self.path, _reason(exc, code))
        return InputError(f"cannot use the history store: {exc} (move it aside or choose another with --store PATH)",
                          str(self.path))


def _reason(exc: sqlite3.Error, code: int) -> str:
    if code == FULL:
        return "the disk is full"
    if code == READONLY:
        return "read-only (file system or permissions)"
    return str(exc)
