"""Faults on real fleet hosts reached over SSH: a host dying mid-probe, sshd gone, a silent port, a hanging
`systemctl`, refused authentication, unknown and changed host keys, huge and garbage output.

Each case breaks one host for real (a3, restored afterwards, or a listener of its own), scans it beside two
healthy fleet hosts with the real CLI, and checks what tests/system/faults/harness.py lists.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fleet import Fleet

from .conftest import kill_in_host, probe_pids
from .harness import (
    FAULTY,
    HEALTHY,
    REPO,
    HostView,
    check_scan,
    finish_scan,
    fleet_entry,
    run_scan,
    start_scan,
    write_inventory,
)

pytestmark = pytest.mark.fleet
NAMES = [*HEALTHY, FAULTY]


def _inventory(fleet: Fleet, tmp: Path, **ssh: object) -> Path:
    return write_inventory(fleet, tmp / "inventory.yaml", [fleet_entry(fleet, FAULTY, **ssh)])


def _wait_for_probe(fleet: Fleet, name: str, proc: subprocess.Popen[str], timeout: float = 60) -> int:
    """The PID of the probe's shell on `name` once it runs (the scan is then mid-collection there)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = probe_pids(fleet, name)
        if pids:
            return pids[0]
        assert proc.poll() is None, "the scan ended before the probe was seen running"
        time.sleep(0.02)
    raise AssertionError(f"no probe seen on {name} within {timeout:.0f} s")


@pytest.mark.parametrize("case", ["container-killed-mid-probe", "probe-killed-mid-run"])
def test_host_dies_mid_probe(fleet: Fleet, clean: dict[str, HostView], faulty_host: str, tmp_path: Path,
                             case: str) -> None:
    """The container (systemd-nspawn and its init, SIGKILL) or only the probe's shell is killed while the
    probe runs. Before the fix both read as `ok` with exit 0: a partial snapshot counted as collected."""
    deadline = 30.0
    proc, started = start_scan(_inventory(fleet, tmp_path), tmp_path, deadline)
    try:
        pid = _wait_for_probe(fleet, faulty_host, proc)
        if case == "container-killed-mid-probe":
            host = fleet.host(faulty_host)
            init = fleet.init_pid(faulty_host)
            assert host.nspawn_pid is not None
            os.kill(init, signal.SIGKILL)
            os.kill(host.nspawn_pid, signal.SIGKILL)
        else:
            kill_in_host(fleet, faulty_host, [pid])
        scan = finish_scan(proc, started, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
    if case == "container-killed-mid-probe":
        expect = ("unreachable", r"connection lost during the probe after \d+ bytes of output: the host went down")
    else:
        expect = ("error", r"the probe was killed before it finished \(no exit status")
    check_scan(scan, case, deadline, {faulty_host: expect}, clean, NAMES)


@pytest.mark.parametrize("case", ["sshd-stopped"])
def test_sshd_stopped(fleet: Fleet, clean: dict[str, HostView], faulty_host: str, tmp_path: Path, case: str) -> None:
    fleet.exec(faulty_host, ["systemctl", "stop", "ssh.service"], check=True)
    scan = run_scan(_inventory(fleet, tmp_path), tmp_path, 20)
    check_scan(scan, case, 20, {faulty_host: ("unreachable", r"127\.0\.\d+\.13:22: Connection refused")},
               clean, NAMES)


@pytest.mark.parametrize("case", ["tcp-accepted-no-banner"])
def test_tcp_accepted_but_no_banner(fleet: Fleet, clean: dict[str, HostView], silent_listener: tuple[str, int],
                                    tmp_path: Path, case: str) -> None:
    """A port that accepts and never speaks SSH. Before the fix: held for connect_timeout (10 s) whatever
    --deadline said, then reported as paramiko's "No existing session"."""
    address, port = silent_listener
    deadline = 5.0
    silent = {"name": "silent", "target": f"ssh://root@{address}:{port}", "labels": {"az": "us-east-1a"}}
    scan = run_scan(write_inventory(fleet, tmp_path / "inventory.yaml", [silent]), tmp_path, deadline)
    check_scan(scan, case, deadline,
               {"silent": ("unreachable", r"no SSH banner within [\d.]+s: the port accepts TCP connections but "
                                          "does not speak SSH")},
               clean, [*HEALTHY, "silent"])
    assert scan.host("silent")["duration_s"] < deadline + 2  # the deadline, not connect_timeout (10 s)


HANG_ALWAYS = "#!/bin/sh\nexec sleep 86399\n"
HANG_VERSION = '#!/bin/sh\n[ "$1" = --version ] && exec sleep 86399\nexec /usr/bin/systemctl "$@"\n'


@pytest.mark.parametrize("case", ["systemctl-hangs-past-deadline", "systemctl-version-hangs-per-command-timeout"])
def test_systemctl_never_returns(fleet: Fleet, clean: dict[str, HostView], faulty_host: str, tmp_path: Path,
                                 case: str) -> None:
    """A `systemctl` that never returns, first on the probe's PATH (/usr/local/bin). Always hanging, the
    per-command timeouts add up past --deadline: the deadline ends it (status timeout). Hanging only for
    `--version`, its 5 s `timeout` ends it: the host is collected, and the systemd area says it failed
    (before the fix: no error at all, systemd.version silently null)."""
    fake = fleet.host(faulty_host).root / "usr/local/bin/systemctl"
    always = case == "systemctl-hangs-past-deadline"
    fake.write_text(HANG_ALWAYS if always else HANG_VERSION)
    fake.chmod(0o755)
    deadline = 8.0 if always else 40.0
    scan = run_scan(_inventory(fleet, tmp_path), tmp_path, deadline)
    if always:
        expect = ("timeout", r"probe did not finish within 8s")
    else:
        expect = ("ok", r"systemd_version.*(timed out|status 124)")
        assert scan.host(faulty_host)["duration_s"] < 5 + 10  # one 5 s timeout, not the 40 s deadline
        assert set(scan.host(faulty_host)["collector_errors"]) == {"systemd"}  # only what hung is lost
    check_scan(scan, case, deadline, {faulty_host: expect}, clean, NAMES)


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


@pytest.mark.parametrize("case", ["auth-wrong-identity", "auth-wrong-user"])
def test_auth_refused(fleet: Fleet, clean: dict[str, HostView], tmp_path: Path, case: str) -> None:
    if case == "auth-wrong-identity":
        entry = fleet_entry(fleet, FAULTY, identity_file=str(_keygen(tmp_path / "stranger")))
    else:
        entry = fleet_entry(fleet, FAULTY)
        entry["target"] = entry["target"].replace("root@", "ghost@")
    inventory = write_inventory(fleet, tmp_path / "inventory.yaml", [entry])
    # --fail-on medium: the healthy hosts' medium finding makes it exit 1 although a host was refused
    extra = ("--fail-on", "medium") if case == "auth-wrong-user" else ()
    scan = run_scan(inventory, tmp_path, 20, *extra)
    check_scan(scan, case, 20, {FAULTY: ("auth_failed", r"authentication failed")}, clean, NAMES)
    assert scan.code == (1 if extra else 3)


@pytest.mark.parametrize("case", ["host-key-unknown", "host-key-changed"])
def test_host_key_not_trusted(fleet: Fleet, clean: dict[str, HostView], tmp_path: Path, case: str) -> None:
    address = fleet.host(FAULTY).address
    lines = [ln for ln in fleet.known_hosts.read_text().splitlines() if not ln.startswith(address + " ")]
    if case == "host-key-changed":
        kind, blob = (_keygen(tmp_path / "impostor").with_suffix(".pub")).read_text().split()[:2]
        lines.append(f"{address} {kind} {blob}")
    known = tmp_path / "known_hosts"
    known.write_text("\n".join(lines) + "\n")
    before = known.read_text()
    scan = run_scan(_inventory(fleet, tmp_path, known_hosts=str(known)), tmp_path, 20)
    pattern = r"CHANGED: server offers ssh-ed25519" if case == "host-key-changed" else r"is not in .*known_hosts"
    check_scan(scan, case, 20, {FAULTY: ("host_key_rejected", pattern)}, clean, NAMES)
    assert known.read_text() == before  # nothing pinned


def _write_50mb(path: Path) -> None:
    line = b"x" * 1023 + b"\n"
    with open(path, "wb") as fh:
        for _ in range(50 * 1024):
            fh.write(line)


@pytest.mark.parametrize("case", ["output-50mb", "output-invalid-utf8", "output-binary-garbage"])
def test_hostile_output(fleet: Fleet, clean: dict[str, HostView], faulty_host: str, tmp_path: Path,
                        case: str) -> None:
    """Files the probe prints: /etc/eks/release 50 MB (past the 16 MiB output cap), os-release with
    invalid UTF-8 and control characters, random bytes as /etc/eks/release and cloud-init's instance data.
    The host is collected (status ok); an oversized output is cut, said in `errors`, and the rest drained."""
    root = fleet.host(faulty_host).root
    (root / "etc/eks").mkdir(exist_ok=True)
    if case == "output-50mb":
        _write_50mb(root / "etc/eks/release")
    elif case == "output-invalid-utf8":
        (root / "etc/os-release").unlink()
        (root / "etc/os-release").write_bytes(
            b'PRETTY_NAME="Debian \xff\xfe\xc3\x28 \xed\xa0\x80 \x1b[31mred\x1b[0m \x00nul"\nID=debian\n'
            b"VERSION_ID=\xf4\x90\x80\x80\n" + b"\xc0\xaf" * 1000 + b"\n")
    else:
        (root / "etc/eks/release").write_bytes(os.urandom(1 << 20))
        fleet.exec(faulty_host, ["sh", "-c", "head -c 262144 /dev/urandom > /run/cloud-init/instance-data.json"],
                   check=True)
    deadline = 60.0
    scan = run_scan(_inventory(fleet, tmp_path), tmp_path, deadline, "--format", "json,html,md,junit")
    if case == "output-50mb":
        expect = ("ok", r"probe did not finish \(output truncated\)")
    else:
        expect = ("ok", r".")
        assert scan.host(faulty_host)["collector_errors"] == {}
    check_scan(scan, case, deadline, {faulty_host: expect}, clean, NAMES)
    assert {p.name for p in scan.out.iterdir()} == {"report.json", "report.html", "report.md", "report.xml"}
    if case == "output-invalid-utf8":
        shown = scan.host(faulty_host)["facts_summary"]["os"]
        assert "\ufffd" in shown and shown.startswith("Debian ")
        (scan.out / "report.html").read_text(encoding="utf-8")  # valid UTF-8 throughout
        assert "\x1b" not in (scan.out / "report.md").read_text(encoding="utf-8")
    if case == "output-50mb":
        snapshot = _collect_one(fleet, tmp_path)
        assert snapshot["probe"]["truncated"] and not snapshot["probe"]["complete"]
        assert snapshot["probe"]["stdout_bytes"] <= 16 * 1024 * 1024
        assert snapshot["facts"]["os"]["id"] == "debian"  # sections before the cut still parse


def _collect_one(fleet: Fleet, tmp: Path) -> dict:
    """The faulty host's snapshot from `collect` (a report carries no snapshots)."""
    inventory = write_inventory(fleet, tmp / "one.yaml", [fleet_entry(fleet, FAULTY)], healthy=())
    proc = subprocess.run([sys.executable, "-m", "auditor.cli", "collect", "-i", str(inventory), "-o",
                           str(tmp / "snaps")], cwd=REPO, capture_output=True, check=False)
    assert proc.returncode == 3, proc.stderr[-2000:]  # collected, but only partly: incomplete
    return json.loads((tmp / "snaps" / f"{FAULTY}.json").read_text())
