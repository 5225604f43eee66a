"""Tasks on forked worker processes, each result handed over in task order; a worker that dies (the OOM
killer's SIGKILL) makes the task it held a `Lost` result naming how it died, never a wait without end.
Each worker gets the pool's state as an argument (inherited at the fork, never pickled), not a global.

Each worker holds its tasks on its own pipe, and the parent waits on the pipes and on the processes' exit
together (multiprocessing.Pool replaces a dead worker but drops its task, so a wait for it never ends). A
worker that stays alive but answers nothing for `stall_s` (a lock copied locked at the fork, a task that
never ends) is killed and its task is `Lost` too: a wait is bounded.

A stop (SIGTERM/SIGINT raised in the parent) leaves the `with` block, which ends every worker with SIGKILL
(they die at once, whatever they hold or whatever handler they inherited).
A parent that ends without unwinding (`kill -9`) takes its workers with it: each asks the kernel for SIGKILL
when its parent dies (Linux PR_SET_PDEATHSIG): a worker busy in a batch would not notice its pipe close (its
siblings' forks hold copies of it).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Generic, TypeVar

from .. import interrupt

T = TypeVar("T")
S = TypeVar("S")
POLL_S = 0.5  # the parent's wait between checks for a stop seen by another thread
DEPTH = 2  # tasks sent to a worker ahead of its results (each a few bytes: a pipe never fills)
QUIT_S = 10.0  # how long a worker told to quit may take before it is killed
PR_SET_PDEATHSIG = 1  # linux/prctl.h
STALL_S = 900.0  # a worker holding a task that answers nothing for this long is killed (far beyond any batch)


@dataclass(frozen=True)
class Lost:
    """A task whose worker died holding it."""

    how: str  # "killed by SIGKILL, signal 9", "exited with status 1"


@dataclass
class _Worker:
    proc: Any  # multiprocessing's forked Process
    conn: Connection
    held: deque[int] = field(default_factory=deque)  # the indices of the tasks sent to it, oldest first
    since: float = 0.0  # monotonic time of its last answer (or of the task that ended its idleness)


class Forked(Generic[S, T]):
    """`jobs` forked processes, each running `init(state)` once, then `work(state, task)` per task; use as a
    context manager."""

    def __init__(self, work: Callable[[S, T], Any], jobs: int, init: Callable[[S], None], state: S,
                 stall_s: float = STALL_S):
        self._work, self._jobs, self._init, self._stall_s = work, max(1, jobs), init, stall_s
        self._state = state
        self._ctx = multiprocessing.get_context("fork")
        self._workers: list[_Worker] = []

    def __enter__(self) -> Forked[S, T]:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        self.close(kill=kind is not None)

    def ordered(self, tasks: Sequence[T]) -> Iterator[tuple[T, Any]]:
        """(task, its result or Lost) for every task, in task order; a task's exception is raised here."""
        done: dict[int, Any] = {}
        todo = deque(range(len(tasks)))  # task indices not handed out (or handed back by a dead worker)
        given = 0
        while given < len(tasks):
            while todo and len(self._workers) < min(self._jobs, len(tasks)):
                self._start()
            self._hand(tasks, todo, done)
            self._collect(done, todo)
            while given in done:
                yield tasks[given], done.pop(given)
                given += 1

    def _hand(self, tasks: Sequence[T], todo: deque[int], done: dict[int, Any]) -> None:
        """Keep each worker DEPTH tasks ahead: it starts its next while this process merges."""
        for w in list(self._workers):
            while todo and len(w.held) < DEPTH:
                index = todo.popleft()
                try:
                    w.conn.send(tasks[index])
                except OSError:  # it died: the task goes to another worker
                    todo.appendleft(index)
                    self._lose(w, done, todo)
                    break
                if not w.held:
                    w.since = time.monotonic()
                w.held.append(index)

    def _start(self) -> None:
        mine, theirs = self._ctx.Pipe()
        proc = self._ctx.Process(target=_serve, args=(self._work, theirs, self._init, self._state, os.getpid()),
                                 daemon=True, name="ami-auditor-worker")
        proc.start()
        theirs.close()
        self._workers.append(_Worker(proc, mine))

    def _collect(self, done: dict[int, Any], todo: deque[int]) -> None:
        """Wait for results or a death; file each result under its task."""
        busy = [w for w in self._workers if w.held]
        ready = set(wait([o for w in busy for o in (w.conn, w.proc.sentinel)], timeout=POLL_S))
        interrupt.check()
        for w in busy:
            if w.conn not in ready and w.proc.sentinel not in ready:
                if time.monotonic() - w.since > self._stall_s:
                    w.proc.kill()
                    self._lose(w, done, todo, f"no answer in {self._stall_s:.0f} s: killed")
                continue
            while w.held and (reply := _reply(w.conn)) is not None:
                ok, value = reply
                if not ok:
                    raise value
                done[w.held.popleft()] = value
                w.since = time.monotonic()
            if w.held and not w.proc.is_alive():  # nothing (more) to read, and gone
                self._lose(w, done, todo)

    def _lose(self, w: _Worker, done: dict[int, Any], todo: deque[int], how: str | None = None) -> None:
        """A dead worker: the task it was running is Lost, the ones queued behind it go to another."""
        w.proc.join()
        if w.held:
            done[w.held.popleft()] = Lost(how or _how(w.proc.exitcode))
            todo.extendleft(reversed(w.held))
        self._drop(w)

    def _drop(self, w: _Worker) -> None:
        w.proc.join()
        w.conn.close()
        self._workers.remove(w)

    def close(self, kill: bool) -> None:
        """Tell each worker to quit (kill: SIGKILL each at once), and reap them all."""
        for w in self._workers:
            if kill:  # SIGKILL: a handler the worker inherited (SIGTERM turned into an exception) cannot delay it
                w.proc.kill()
            else:
                with contextlib.suppress(OSError):
                    w.conn.send(None)
        for w in self._workers:
            w.proc.join(None if kill else QUIT_S)
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join()
            w.conn.close()
        self._workers = []


def _reply(conn: Connection) -> tuple[bool, Any] | None:
    """A worker's reply, or None when there is none (its pipe closed, a reply cut off by its death)."""
    try:
        return conn.recv() if conn.poll() else None
    except (EOFError, OSError):
        return None


def _how(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}, signal {-code}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _die_with(parent: int) -> None:
    """SIGKILL for this process when the thread that forked it ends, whatever ends it (the pool runs in the
    main thread: the parent process). Where prctl is missing (not Linux) the pipe's end stops an idle worker."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # it died before the request was made
        os._exit(1)


def _serve(work: Callable[[S, Any], Any], conn: Connection, init: Callable[[S], None], state: S, parent: int) -> None:
    """A worker: tasks from the pipe until None or the parent is gone, each reply (True, result) or
    (False, the exception), so the parent raises a task's bug as Pool did."""
    _die_with(parent)
    init(state)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        try:
            reply: tuple[bool, Any] = (True, work(state, task))
        except Exception as exc:  # noqa: BLE001 - raised in the parent
            reply = (False, exc)
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - an exception that does not pickle: its text does
            conn.send((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
