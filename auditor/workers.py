"""A bounded pool of daemon threads whose results arrive as they finish, and that a stop never waits out.

`concurrent.futures` joins its worker threads when the pool closes and again at interpreter exit, so
SIGTERM waited as long as the slowest worker (an ssh connect to a host that never answers, a reader
deep in a hostile image). Here a stop (interrupt.py) lets running tasks unwind for `STOP_GRACE_S` (an
image reader checks the stop at every read; `finally` blocks run), then runs the cleanups still pending
(interrupt.on_stop: an `ami://` volume is not left behind a busy reader), waits for cleanups under way,
and leaves the rest: daemon threads end with the process.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from . import interrupt

T = TypeVar("T")
STOP_GRACE_S = 1.0  # of the 2 s a stop may take: tasks that unwind by then finish cleanly


def run(tasks: list[Callable[[], T]], workers: int) -> Iterator[T]:
    """Each task's result as it finishes, at most `workers` at once; a task's exception is raised here.

    Back-pressure: at most 2 × `workers` results are running or waiting for the caller, so a caller that
    is slower than the tasks (judging each snapshot as it comes) holds a few results, not all of them."""
    todo: queue.SimpleQueue[Callable[[], T] | None] = queue.SimpleQueue()
    done: queue.SimpleQueue[tuple[bool, object]] = queue.SimpleQueue()
    for task in tasks:
        todo.put(task)
    running = threading.Semaphore(0)  # released by each worker as it exits
    cancel = threading.Event()  # the caller gave up: take no new task
    count = max(1, min(workers, len(tasks)))
    slots = threading.Semaphore(2 * count)  # taken by a worker before a task, given back as the caller takes one

    def work() -> None:
        try:
            while _slot(slots, cancel) and (task := _next(todo)) is not None:
                try:
                    done.put((True, task()))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
                    done.put((False, exc))
        finally:
            running.release()

    for _ in range(count):
        threading.Thread(target=work, daemon=True, name="ami-auditor-worker").start()
    try:
        for _ in tasks:
            while True:  # a timed wait: the main thread handles a signal at once
                try:
                    ok, value = done.get(timeout=0.2)
                    break
                except queue.Empty:
                    interrupt.check()  # a stop seen here too when this is not the thread the signal hit
            if not ok:
                raise value  # type: ignore[misc]
            yield value  # type: ignore[misc]
            slots.release()  # the caller is done with this one
    except BaseException:
        cancel.set()
        if interrupt.STOP.is_set():
            _settle(running, count)
        raise


def _slot(slots: threading.Semaphore, cancel: threading.Event) -> bool:
    """Wait for room for one more result; False when the caller gave up or a stop came."""
    while not cancel.is_set() and not interrupt.STOP.is_set():
        if slots.acquire(timeout=0.2):
            return True
    return False


def _next(todo: queue.SimpleQueue[Callable[[], T] | None]) -> Callable[[], T] | None:
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
