"""Garbage collection for a run that holds a fleet's results: collections walk every live object, and a
fleet's run holds millions that are acyclic and live to its end.

So: freeze what exists at the start (modules, rules: never garbage, skipped by every collection, and not
copied into forked workers by the collector touching them) and collect the young generation less often.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def fleet_gc() -> Iterator[None]:
    """Relaxed collection for the span of a run; the previous thresholds and nothing frozen after it."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
