"""Shared pytest fixtures. Fleet: one real systemd-nspawn fleet per session (tests/fleet)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make `tests.fleet` importable

from tests import reliability  # noqa: E402
from tests.fleet import RELEASE_FLEET, Fleet, unavailable_reason  # noqa: E402

IN_CI = os.environ.get("CI") == "true"
# No timed asserts: Hypothesis's per-example deadline (200 ms) fails property tests on a loaded machine.
settings.register_profile("ami-auditor", deadline=None)
settings.load_profile("ami-auditor")
# Which reliability suite a test belongs to, by folder (for the end-of-run summary).
_SUITES = {"bad_input": "bad input", "faults": "fault", "fuzz": "fuzz"}
_failed_by_suite: dict[str, int] = {}


@pytest.fixture(autouse=True, scope="module")
def _module_history_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Module-scoped fixtures that scan (set up before any function fixture) get a store of their module's
    own, never the user's data directory nor another module's scans as their previous ones."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-module")))
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-module-cache")))
        yield


@pytest.fixture(autouse=True)
def _own_history_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own default history store (scan records every run) and cache directory (`rules list`
    caches its listing): no test sees another's scans as its previous one or another's cache entries, and none
    writes into the user's data or cache directory."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


# Fixtures only the system tier may use: a unit test requesting one fails (tests/unit runs in two minutes
# without root, fleet, browsers or AWS stand-ins), and a test whose fixtures reach the fleet is marked `fleet`.
FLEET_FIXTURES = frozenset({"fleet", "release_fleet", "fleet_ready_crashloop"})
SYSTEM_FIXTURES = FLEET_FIXTURES | {"browser", "aws", "moto_sns", "hub", "endpoint", "node_exporter"}
TIERS = ("unit", "system")
# Modules that start the fleet or the AWS stand-ins: a unit test module that names one fails, whatever its
# fixtures (an inline `with AwsStandIns()` asks for no fixture).
SYSTEM_MODULES = ("tests.fleet", "tests.ssm_endpoint", "tests.deploy_host", "tests.s3_fault_proxy", "moto")
_NAMES_SYSTEM: dict[Path, list[str]] = {}


def _system_modules_named(path: Path) -> list[str]:
    if path not in _NAMES_SYSTEM:
        text = path.read_text(encoding="utf-8", errors="replace")
        _NAMES_SYSTEM[path] = [m for m in SYSTEM_MODULES if f"from {m} import" in text or f"import {m}" in text]
    return _NAMES_SYSTEM[path]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & FLEET_FIXTURES:
            item.add_marker(pytest.mark.fleet)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture is set up: a test outside the two tiers, or a unit test asking for a system fixture, fails."""
    parts = Path(str(item.path)).resolve().relative_to(Path(__file__).resolve().parent).parts
    if parts[0] not in TIERS:
        pytest.fail(f"{item.nodeid}: a test belongs in tests/unit or tests/system", pytrace=False)
    used = sorted(set(getattr(item, "fixturenames", ())) & SYSTEM_FIXTURES)
    if parts[0] == "unit" and used:
        pytest.fail(f"{item.nodeid}: the unit tier may not use {', '.join(used)}: move it to tests/system",
                    pytrace=False)
    named = _system_modules_named(Path(str(item.path))) if parts[0] == "unit" else []
    if named:
        pytest.fail(f"{item.nodeid}: the unit tier may not import {', '.join(named)}: move it to tests/system",
                    pytrace=False)


def _suite_of(nodeid: str) -> str | None:
    parts = nodeid.split("/")  # tests/<tier>/<suite>/test_x.py::…
    return _SUITES.get(parts[2]) if len(parts) > 3 and parts[0] == "tests" else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """With CI=true a skipped test is a failure: CI installs everything, so a skip hides a broken setup."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"CI=true: a skipped test is a failure here ({reason})"
    if report.failed:
        suite = _suite_of(report.nodeid)
        if suite:
            _failed_by_suite[suite] = _failed_by_suite.get(suite, 0) + 1


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """The reliability summary: fault cases, bad-input kinds, fuzz examples, crashes, results lost."""
    lines = reliability.summary_lines(_failed_by_suite)
    if lines:
        terminalreporter.section("reliability summary")
        for line in lines:
            terminalreporter.write_line(line)


def _fleet_or_skip() -> None:
    """Skip (fail under CI=true) when this machine cannot run the fleet."""
    reason = unavailable_reason()
    if reason:
        if IN_CI:
            pytest.fail(f"CI=true but the test fleet cannot run: {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback TCP listener standing in for a host: a bad-input case passes only if nobody connected to it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        s.setblocking(False)
        yield s


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


@pytest.fixture(scope="session")
def release_fleet(request: pytest.FixtureRequest) -> Iterator[Fleet]:
    """bullseye-a/-b and trixie-a/-b (tests/fleet README), beside the main fleet; only for the
    multi-release tests, so a run that selects none of them never boots it."""
    _fleet_or_skip()
    f = Fleet(releases=RELEASE_FLEET)
    request.addfinalizer(f.down)
    f.up()
    yield f


@pytest.fixture
def fleet_ready_crashloop(fleet: Fleet) -> Fleet:
    """The fleet once ecs.service on every AZ-b host has restarted as often as the crash-loop rule needs."""
    fleet.wait_crashloop()
    return fleet
