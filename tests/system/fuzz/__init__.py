"""Fuzz tests (hypothesis) for parsers, loaders (through the real CLI) and renderers.

`EXAMPLES_RUN` counts the examples each fuzz test ran in this process (test name → count); `ran()`
also feeds tests/reliability.py, whose summary tests/conftest.py prints at the end of the run.
Example counts are bounded for CI; `AMI_AUDITOR_FUZZ_SCALE=N` multiplies every test's count by N, and
`AMI_AUDITOR_FUZZ_RANDOM=1` draws fresh examples each run instead of CI's fixed (derandomized) ones.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from tests import reliability

EXAMPLES_RUN: dict[str, int] = {}

SCALE = max(float(os.environ.get("AMI_AUDITOR_FUZZ_SCALE", "1") or 1), 0.01)
RANDOM = os.environ.get("AMI_AUDITOR_FUZZ_RANDOM") == "1"


def ran(name: str) -> None:
    """Count one example of the fuzz test `name` (call once per test-body execution)."""
    EXAMPLES_RUN[name] = EXAMPLES_RUN.get(name, 0) + 1
    reliability.fuzz_examples(name)
    reliability.record("fuzz", name)


def fuzz_settings(examples: int) -> settings:
    """Bounded, reproducible settings: `examples` x AMI_AUDITOR_FUZZ_SCALE, derandomized (unless
    AMI_AUDITOR_FUZZ_RANDOM=1), no deadline."""
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        derandomize=not RANDOM,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                               HealthCheck.function_scoped_fixture, HealthCheck.large_base_example],
    )
