"""contrib/systemd on a real fleet host: the wheel and the units installed, the timer enabled, its
service started for real by systemd (hardened, as a dynamic user), and the scan found in the store.

The fleet host has Debian's python3 (same minor version as this machine) but no pip and no network
beyond loopback, so the wheel is installed with this machine's pip into a directory of the host's
root (`pip install --target`, as a package manager would lay it out), beside copies of the already
installed distributions it requires (found through their metadata). /usr/local/bin/ami-auditor is a
two-line launcher, the role pip's console script plays on a real install.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.fleet import Fleet

ROOT = Path(__file__).resolve().parents[1]
HOST = "a2"
LIB = "opt/ami-auditor/lib"
UNITS = ("ami-auditor.service", "ami-auditor.timer")


def _requirements(name: str, seen: set[str]) -> None:
    """The distribution and everything it requires (markers for this Python honoured), by name."""
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return
    seen.add(key)
    for req in metadata.requires(name) or []:
        spec, _, marker = req.partition(";")
        if "extra ==" in marker:
            continue
        dep = re.match(r"[A-Za-z0-9._-]+", spec.strip())
        if dep:
            try:
                metadata.distribution(dep[0])
            except metadata.PackageNotFoundError:
                continue  # an optional dependency for another platform
            _requirements(dep[0], seen)


def _copy_distributions(names: set[str], target: Path) -> None:
    for name in sorted(names):
        dist = metadata.distribution(name)
        for file in dist.files or []:
            src = Path(str(dist.locate_file(file)))
            if ".." in file.parts or file.parts[0] == "bin" or not src.is_file():
                continue
            dst = target / file
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def _install(fleet: Fleet, tmp: Path) -> Path:
    root = fleet.host(HOST).root
    wheels = tmp / "wheels"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    wheel = next(wheels.glob("ami_auditor-*.whl"))
    lib = root / LIB
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                           str(lib), str(wheel)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    deps: set[str] = set()
    for req in metadata.requires("ami-auditor") or []:
        if "extra ==" not in req:
            _requirements(re.match(r"[A-Za-z0-9._-]+", req)[0], deps)  # type: ignore[index]
    _copy_distributions(deps, lib)
    launcher = root / "usr/local/bin/ami-auditor"
    launcher.write_text(f"#!/bin/sh\nPYTHONPATH=/{LIB} exec /usr/bin/python3 -m auditor.cli \"$@\"\n")
    launcher.chmod(0o755)
    units = root / "etc/systemd/system"
    for unit in UNITS:
        shutil.copy(ROOT / "contrib" / "systemd" / unit, units / unit)
    config = root / "etc/ami-auditor"
    config.mkdir(exist_ok=True)
    (config / "inventory.yaml").write_text("hosts:\n  - name: self\n    target: local\n    labels: {az: us-east-1a}\n")
    return root


def _sh(fleet: Fleet, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return fleet.exec(HOST, list(argv), timeout=timeout)


@pytest.mark.fleet
def test_the_timer_service_really_runs_a_scan_into_the_hosts_store(fleet: Fleet, tmp_path: Path) -> None:
    root = _install(fleet, tmp_path)
    try:
        assert _sh(fleet, "systemctl", "daemon-reload").returncode == 0
        enabled = _sh(fleet, "systemctl", "enable", "--now", "ami-auditor.timer")
        assert enabled.returncode == 0, enabled.stderr
        timer = _sh(fleet, "systemctl", "show", "ami-auditor.timer", "-p", "ActiveState,NextElapseUSecRealtime")
        assert "ActiveState=active" in timer.stdout
        run = _sh(fleet, "systemctl", "start", "ami-auditor.service", timeout=600)  # oneshot: returns when done
        show = _sh(fleet, "systemctl", "show", "ami-auditor.service", "-p", "Result,ExecMainStatus")
        journal = _sh(fleet, "journalctl", "-u", "ami-auditor.service", "--no-pager", "-n", "40").stdout
        assert run.returncode == 0, run.stderr + show.stdout + journal
        assert "Result=success" in show.stdout, show.stdout + journal
        listing = _sh(fleet, "/usr/local/bin/ami-auditor", "history", "list", "--store",
                      "/var/lib/ami-auditor/history.sqlite3", "--json")
        assert listing.returncode == 0, listing.stderr
        scans = json.loads(listing.stdout)["scans"]
        assert [(s["state"], s["hosts"]) for s in scans] == [("complete", 1)]
        prom = (root / "var/lib/private/ami-auditor/report/report.prom").read_text()
        assert 'ami_auditor_host_up{host="self",status="ok"} 1' in prom
        # the unit really ran as a throw-away user, not root, and left its files private to it
        store = root / "var/lib/private/ami-auditor/history.sqlite3"
        assert store.stat().st_uid != 0 and store.stat().st_mode & 0o077 == 0
    finally:
        _sh(fleet, "systemctl", "disable", "--now", "ami-auditor.timer")
        for unit in UNITS:
            (root / "etc/systemd/system" / unit).unlink(missing_ok=True)
        _sh(fleet, "systemctl", "daemon-reload")
        for path in ("opt/ami-auditor", "etc/ami-auditor", "var/lib/private/ami-auditor"):
            shutil.rmtree(root / path, ignore_errors=True)
        for path in ("usr/local/bin/ami-auditor", "var/lib/ami-auditor"):
            (root / path).unlink(missing_ok=True)
