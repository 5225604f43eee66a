"""Shared pytest fixtures. Fleet: one real systemd-nspawn fleet per session (tests/fleet)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make `tests.fleet` importable

from tests.fleet import Fleet, unavailable_reason  # noqa: E402


def _fleet_or_skip() -> None:
    """Skip (fail under CI=true) when this machine cannot run the fleet."""
    reason = unavailable_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the test fleet cannot run: {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def fleet(request: pytest.FixtureRequest) -> Iterator[Fleet]:
    """The booted test fleet (golden, a1-a3, b1-b3; plus $AMI_AUDITOR_FLEET_EXTRA hosts x01..).

    With AMI_AUDITOR_FLEET_ATTACH=1, use the fleet a running `python -m tests.fleet up` booted.
    """
    _fleet_or_skip()
    if os.environ.get("AMI_AUDITOR_FLEET_ATTACH") == "1":
        yield Fleet.attach()
        return
    f = Fleet(extra=int(os.environ.get("AMI_AUDITOR_FLEET_EXTRA", "0")))
    request.addfinalizer(f.down)
    f.up()
    yield f


@pytest.fixture
def fleet_ready_crashloop(fleet: Fleet) -> Fleet:
    """The fleet once ecs.service on every AZ-b host has restarted as often as the crash-loop rule needs."""
    fleet.wait_crashloop()
    return fleet
