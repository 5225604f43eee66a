"""Fixtures of the fault cases: the clean reference scan, and a faulty host put back after every case."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest

from tests.fleet import Fleet
from tests.fleet.fleet import _ssh_banner

from .harness import FAULTY, HEALTHY, HostView, host_view, run_scan, write_inventory

PROBE_PATTERN = "^/bin/sh -s --"  # the probe's shell (and its subshells), as sshd runs it


@pytest.fixture(scope="session")
def clean(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> dict[str, HostView]:
    """Views of the healthy hosts and of the faulty host before any fault: what they must keep."""
    tmp = tmp_path_factory.mktemp("clean")
    names = (*HEALTHY, "a2", FAULTY)
    scan = run_scan(write_inventory(fleet, tmp / "inventory.yaml", [], healthy=names), tmp, 60)
    views = {name: host_view(scan.report, name) for name in names}
    assert all(v.status == "ok" and not v.collector_errors for v in views.values()), views
    return views


def probe_pids(fleet: Fleet, name: str) -> list[int]:
    """PIDs (in the host's namespace) of probe shells running on `name`, oldest first."""
    out = fleet.exec(name, ["pgrep", "-f", PROBE_PATTERN]).stdout
    return sorted(int(p) for p in out.split())


def kill_in_host(fleet: Fleet, name: str, pids: list[int]) -> None:
    if pids:
        fleet.exec(name, ["kill", "-KILL", *map(str, pids)])


def restore(fleet: Fleet, name: str) -> None:
    """Put `name` back as the fleet booted it: running, sshd answering, no planted files, no probe left."""
    h = fleet.host(name)
    if not h.running:
        fleet.stop(name)  # reaps a killed nspawn and removes its cgroups
        fleet.start(name)
    if _ssh_banner(h.address) is None:
        fleet.exec(name, ["systemctl", "start", "ssh.service"], check=True)
        deadline = time.monotonic() + 30
        while _ssh_banner(h.address) is None and time.monotonic() < deadline:
            time.sleep(0.1)
    for planted in ("usr/local/bin/systemctl", "etc/eks/release"):
        with contextlib.suppress(FileNotFoundError):
            (h.root / planted).unlink()
    os_release = h.root / "etc/os-release"
    if not os_release.is_symlink():
        os_release.unlink(missing_ok=True)
        os_release.symlink_to("../usr/lib/os-release")
    fleet.exec(name, ["cp", "/var/lib/cloud/data/instance-data.json", "/run/cloud-init/instance-data.json"],
               check=True)
    for pattern in (PROBE_PATTERN, "^sleep 86399$"):
        out = fleet.exec(name, ["pgrep", "-f", pattern]).stdout
        kill_in_host(fleet, name, [int(p) for p in out.split()])


@pytest.fixture
def faulty_host(fleet: Fleet) -> Iterator[str]:
    """The host a case breaks; restored after the case whatever happened (cases are order-independent)."""
    restore(fleet, FAULTY)
    yield FAULTY
    restore(fleet, FAULTY)


@pytest.fixture
def silent_listener() -> Iterator[tuple[str, int]]:
    """A TCP listener on a free loopback address that accepts connections and never says a word."""
    import socket
    import threading

    from tests.fleet.fleet import NET

    server = socket.socket()
    server.bind((f"127.0.{NET}.99", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()
    server.close()
    for conn in held:
        conn.close()
