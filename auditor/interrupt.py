"""SIGINT/SIGTERM as a clean stop: work in any thread sees `STOP` and unwinds through its `finally`.

Python's default SIGTERM ends the process at once, skipping every `finally`; an `ami://` scan would then
leave an EBS volume attached and mounted. `handlers()` (the CLI wraps each command in it) makes both
signals set `STOP` and raise in the main thread; worker threads call `check()` between steps (and in
their polling loops) so they stop too and run their cleanup. The pool (workers.py) waits for them only a
moment, then runs the cleanups registered with `on_stop` itself (`run_pending_cleanups`), so a cleanup
never waits behind the busy work it cleans up after.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

STOP = threading.Event()
_PENDING: dict[int, Callable[[], object]] = {}  # cleanups registered with on_stop whose scope is still open
_PENDING_LOCK = threading.Lock()


class Interrupted(KeyboardInterrupt):
    """SIGINT: stop what you are doing, clean up, exit 130."""

    exit_code = 130


class Terminated(Interrupted):
    """SIGTERM: the same, exit 143."""

    exit_code = 143


def check() -> None:
    """Raise Interrupted when a stop was asked for (call between steps of long work)."""
    if STOP.is_set():
        raise Interrupted("interrupted")


def wait(seconds: float) -> None:
    """Sleep up to `seconds`, waking (and raising) at once when a stop is asked for."""
    if STOP.wait(max(0.0, seconds)):
        raise Interrupted("interrupted")


def _on_signal(signum: int, frame: FrameType | None) -> None:
    STOP.set()
    raise Terminated("terminated") if signum == signal.SIGTERM else Interrupted("interrupted")


@contextlib.contextmanager
def handlers() -> Iterator[None]:
    """Install the SIGINT/SIGTERM handlers for the duration (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    STOP.clear()
    saved = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, previous in saved.items():
            signal.signal(sig, previous)
        STOP.clear()  # the command is over: work started later in this process (a test, a library caller) runs


@contextlib.contextmanager
def on_stop(cleanup: Callable[[], object]) -> Iterator[None]:
    """Register `cleanup` for the duration: on a stop the main thread may call it (run_pending_cleanups)
    while the registering thread is still busy, so it must be idempotent and thread-safe."""
    with _PENDING_LOCK:
        _PENDING[id(cleanup)] = cleanup
    try:
        yield
    finally:
        with _PENDING_LOCK:
            _PENDING.pop(id(cleanup), None)


def run_pending_cleanups() -> None:
    """Run every registered cleanup now (signals held meanwhile: a second Ctrl-C must not cut one short);
    their errors are left to their own threads, which run them again as they unwind."""
    with _PENDING_LOCK:
        pending = list(_PENDING.values())
    main = threading.current_thread() is threading.main_thread()
    blocked = {signal.SIGINT, signal.SIGTERM}
    if main:
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        for cleanup in pending:
            with contextlib.suppress(Exception):
                cleanup()
    finally:
        if main:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)


def forked_child_signals() -> None:
    """In a forked helper process (a pool worker): leave SIGINT to the parent, which stops the pool, and die
    on SIGTERM. The parent's clean-stop handler raising inside a child could leave a pool's queue lock held
    for good."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
