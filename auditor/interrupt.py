"""SIGINT/SIGTERM as a clean stop: work in any thread sees `STOP` and unwinds through its `finally`.

Python's default SIGTERM ends the process at once, skipping every `finally`; an `ami://` scan would then
leave an EBS volume attached and mounted. `handlers()` (the CLI wraps each command in it) makes both
signals set `STOP` and raise in the main thread; worker threads call `check()` between steps (and in
their polling loops) so they stop too, run their cleanup, and the pool they run in is joined.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

STOP = threading.Event()


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
