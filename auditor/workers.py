"""A bounded pool of daemon threads whose results arrive as they finish, and that a stop never waits out.

`concurrent.futures` joins its worker threads when the pool closes and at interpreter exit, so a stop
would wait for the slowest worker (an ssh connect to a host that never answers, a reader deep in a
hostile image). Here a stop (interrupt.py) lets running tasks unwind for `STOP_GRACE_S` (an
image reader checks the stop at every read; `finally` blocks run), then runs the cleanups still pending
(interrupt.on_stop: an `ami://` volume is not left behind a busy reader), waits for cleanups under way,
and leaves the rest: daemon threads end with the process.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

from . import interrupt

T = TypeVar("T")
R = TypeVar("R")
STOP_GRACE_S = 1.0  # of the 2 s a stop may take: tasks that unwind by then finish cleanly


def run(tasks: list[Callable[[], Iterable[T]]], workers: int) -> Iterator[T]:
    """Every result each task yields, as it is yielded, at most `workers` tasks at once; a task's exception
    is raised here. A task is a callable returning an iterable: one host's result, or a batch that streams
    (the SSM batch yields each host's outcome as its output is read).

    Back-pressure: at most 2 × `workers` results are waiting for the caller; a task that has one more to
    hand over waits, so a caller slower than the tasks (judging each snapshot as it comes) holds a few
    results, not all of them."""
    todo: queue.SimpleQueue[Callable[[], Iterable[T]] | None] = queue.SimpleQueue()
    done: queue.SimpleQueue[tuple[int, object]] = queue.SimpleQueue()  # (_ITEM | _ERROR | _END, value)
    for task in tasks:
        todo.put(task)
    running = threading.Semaphore(0)  # released by each worker as it exits
    cancel = threading.Event()  # the caller gave up: take no new task, hand over nothing more
    count = max(1, min(workers, len(tasks)))
    slots = threading.Semaphore(2 * count)  # taken before a result is handed over, given back as the caller takes it

    def work() -> None:
        try:
            while not cancel.is_set() and (task := _next(todo)) is not None:
                try:
                    for item in task():
                        if not _slot(slots, cancel):
                            return
                        done.put((_ITEM, item))
                    done.put((_END, None))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
                    done.put((_ERROR, exc))
        finally:
            running.release()

    for _ in range(count):
        threading.Thread(target=work, daemon=True, name="ami-auditor-worker").start()
    try:
        finished = 0
        while finished < len(tasks):
            kind, value = _take(done)
            if kind == _ERROR:
                raise value  # type: ignore[misc]
            if kind == _END:
                finished += 1
                continue
            yield value  # type: ignore[misc]
            slots.release()  # the caller is done with this one
    except BaseException:
        cancel.set()
        if interrupt.STOP.is_set():
            _settle(running, count)
        raise


_ITEM, _ERROR, _END = 0, 1, 2


def _take(done: queue.SimpleQueue[tuple[int, object]]) -> tuple[int, object]:
    while True:  # a timed wait: the main thread handles a signal at once
        try:
            return done.get(timeout=0.2)
        except queue.Empty:
            interrupt.check()  # a stop seen here too when this is not the thread the signal hit


def _slot(slots: threading.Semaphore, cancel: threading.Event) -> bool:
    """Wait for room for one more result; False when the caller gave up or a stop came."""
    while not cancel.is_set() and not interrupt.STOP.is_set():
        if slots.acquire(timeout=0.2):
            return True
    return False


def _next(todo: queue.SimpleQueue[Callable[[], Iterable[T]] | None]) -> Callable[[], Iterable[T]] | None:
    try:
        return todo.get_nowait()
    except queue.Empty:
        return None


def _settle(running: threading.Semaphore, count: int) -> None:
    """Give running tasks the grace to unwind, run the cleanups they left pending, wait for those under way."""
    deadline = time.monotonic() + STOP_GRACE_S
    for _ in range(count):
        if not running.acquire(timeout=max(0.0, deadline - time.monotonic())):
            break
    interrupt.run_pending_cleanups()


class DaemonExecutor(Executor):
    """A `concurrent.futures` executor on daemon threads: an S3 read stuck on a server that never answers
    never holds the process at exit (ThreadPoolExecutor's threads are joined then), so a SIGTERM ends
    the run within its 2 s. `shutdown` never waits for a running task."""

    def __init__(self, max_workers: int):
        self.max_workers = max_workers
        self.todo: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = \
            queue.SimpleQueue()
        self.threads = 0
        self.closed = False
        self.lock = threading.Lock()

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        future: Future[R] = Future()
        with self.lock:
            if self.closed:
                raise RuntimeError("cannot submit after shutdown")
            self.todo.put((future, functools.partial(fn, **kwargs), args))
            if self.threads < self.max_workers:
                self.threads += 1
                threading.Thread(target=self._work, daemon=True, name="ami-auditor-io").start()
        return future

    def _work(self) -> None:
        while (job := self.todo.get()) is not None:
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
                future.set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self.lock:
            self.closed = True
            while cancel_futures:  # jobs not started are never run
                try:
                    job = self.todo.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
            for _ in range(self.threads):
                self.todo.put(None)
