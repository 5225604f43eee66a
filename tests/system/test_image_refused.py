"""A file the image reader refuses makes THAT fact a named failure (issue 37, item 1).

A FIFO at /etc/machine-id, a symbolic-link loop at /root/.bash_history, a var/lib/dpkg/status over the
reader's cap, a home this scanner may not enter: each used to read as a healthy answer (machine_id_state
"absent", shell_histories [], exit 0, `host_complete 1`) while only errors.image said otherwise. Now the
fact is unknown and named in its area's error, the area is failed while its other facts stand, and the
run is incomplete (exit 3) the same way in the JSON, Prometheus, JUnit and the terminal.

Real image roots in tmp dirs: real FIFOs (os.mkfifo), real link loops, a real sparse 300 MB file, and a
directory this scanner really cannot enter (the CLI run as root without CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH through setpriv, as a non-root scan would be).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from auditor.image.packages import STATUS_CAP
from auditor.models import HostSpec
from auditor.run.live_hosts import collect_host
from tests.paths import ROOT
from tests.system.test_image_unhashed import NO_DAC
from tests.unit.test_image_transport import make_root


def with_history(root: Path) -> Path:
    """A second home whose history is readable: it must still be listed when root's is refused."""
    (root / "home/ubuntu").mkdir(parents=True)
    (root / "home/ubuntu/.bash_history").write_text("ls\n")
    (root / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    return root


def fifo_machine_id(root: Path) -> None:
    (root / "etc/machine-id").unlink()
    os.mkfifo(root / "etc/machine-id")


def history_loop(root: Path) -> None:
    (root / "root").mkdir(exist_ok=True)
    os.symlink(".bash_history", root / "root/.bash_history")


def huge_status(root: Path) -> None:
    with open(root / "var/lib/dpkg/status", "r+b") as f:
        f.truncate(STATUS_CAP + (16 << 20))  # sparse: nothing written


def snapshot(root: Path) -> dict:
    result = collect_host(HostSpec("img", f"image://{root}"), binaries=[])
    assert result.status == "ok", result.error
    assert result.snapshot is not None
    return result.snapshot


def test_a_fifo_machine_id_is_unknown_not_absent(tmp_path: Path) -> None:
    root = with_history(make_root(tmp_path / "root"))
    fifo_machine_id(root)
    snap = snapshot(root)
    hygiene = snap["facts"]["hygiene"]
    assert hygiene["machine_id_state"] is None  # was "absent"
    assert "hygiene" in snap["probe"]["failed_areas"]
    assert "machine_id_state not read: /etc/machine-id: not a regular file" in snap["errors"]["hygiene"]
    assert hygiene["shell_histories"] == [{"path": "/home/ubuntu/.bash_history", "bytes": 3}]  # the rest stands


def test_a_history_link_loop_fails_shell_histories_and_keeps_the_others(tmp_path: Path) -> None:
    root = with_history(make_root(tmp_path / "root"))
    history_loop(root)
    snap = snapshot(root)
    hygiene = snap["facts"]["hygiene"]
    assert hygiene["shell_histories"] == [{"path": "/home/ubuntu/.bash_history", "bytes": 3}]
    assert hygiene["machine_id_state"] == "populated"
    assert "shell_histories not read: /root/.bash_history: too many levels of symbolic links" \
        in snap["errors"]["hygiene"]
    assert snap["probe"]["failed_areas"] == ["hygiene"]


def test_a_status_database_over_the_cap_fails_packages_rather_than_list_part_of_it(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    huge_status(root)
    snap = snapshot(root)
    assert snap["facts"]["packages"] is None  # a cut list would read as packages removed
    assert "packages" in snap["probe"]["failed_areas"]
    assert f"/var/lib/dpkg/status: only the first {STATUS_CAP} of" in snap["errors"]["packages"]


def scan(root: Path, out: Path, prefix: list[str] = []) -> tuple[subprocess.CompletedProcess[str], dict]:  # noqa: B006
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "auditor.cli", "scan", f"image://{root}", "--binary", "kubelet",
         "--fail-on", "critical", "--no-store", "--format", "json,prom,junit", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return proc, report


def junit_errors(out: Path) -> dict[str, str]:
    cases = ET.parse(out / "report.xml").getroot().iter("testcase")
    return {c.get("name") or "": (c.find("error").text or "") for c in cases if c.find("error") is not None}


def prom_complete(out: Path) -> str:
    (line,) = [ln for ln in (out / "report.prom").read_text().splitlines()
               if ln.startswith("ami_auditor_host_complete{")]
    return line.rsplit(" ", 1)[1]


def test_the_cli_says_incomplete_the_same_way_everywhere(tmp_path: Path) -> None:
    """All three refusals in one image: exit 3, `complete` false, host_complete 0, JUnit errors for the
    failed areas, the terminal's failed list — and each area's error names its file."""
    root = with_history(make_root(tmp_path / "root"))
    fifo_machine_id(root)
    history_loop(root)
    huge_status(root)
    out = tmp_path / "out"
    proc, report = scan(root, out)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (host,) = report["hosts"]
    assert host["status"] == "ok" and host["complete"] is False
    assert {"hygiene", "packages"} <= set(host["failed_areas"])
    assert prom_complete(out) == "0"
    errors = junit_errors(out)
    assert "/etc/machine-id" in errors["collect hygiene"] and "/root/.bash_history" in errors["collect hygiene"]
    assert "/var/lib/dpkg/status" in errors["collect packages"]
    line = next(ln for ln in proc.stdout.splitlines() + proc.stderr.splitlines() if "failed:" in ln)
    assert "hygiene" in line and "packages" in line


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_a_home_the_scanner_cannot_enter_is_a_named_failure(tmp_path: Path) -> None:
    """/root 0700 and not this scanner's: its history and authorized keys cannot be looked for. They
    used to read as "none there"; now both facts are named, and the scan is incomplete."""
    root = with_history(make_root(tmp_path / "root"))
    (root / "root/.ssh").mkdir(parents=True)
    (root / "root/.ssh/authorized_keys").write_text("ssh-ed25519 AAAAC3Nza builder@ci\n")
    (root / "root/.bash_history").write_text("sudo su\n")
    os.chown(root / "root", 65534, 65534)
    (root / "root").chmod(0o700)
    out = tmp_path / "out"
    proc, report = scan(root, out, NO_DAC)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (host,) = report["hosts"]
    reason = host["collector_errors"]["hygiene"]
    assert "shell_histories not read: /root/.bash_history (and 8 more): Permission denied" in reason, reason
    assert "root_authorized_keys not read: /root/.ssh/authorized_keys (and 1 more): Permission denied" in reason, reason
    assert prom_complete(out) == "0" and "collect hygiene" in junit_errors(out)
    said = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "permission denied, so unknown" in ln]
    assert len(said) == 1 and "shell_histories" in said[0] and "root would read them" in said[0], proc.stdout


def test_a_link_read_as_chroot_would_is_a_note_on_a_complete_host(tmp_path: Path) -> None:
    """The other side: an absolute link whose target is not in the image (resolv.conf into /run, on every
    real image) is read as chroot would. Said in errors.image, but nothing is unknown: complete, exit 0,
    host_complete 1, and JUnit reports it without an error."""
    root = make_root(tmp_path / "root")
    (root / "etc/hostname").unlink()
    os.symlink("/run/hostname-of-the-build-host", root / "etc/hostname")
    out = tmp_path / "out"
    proc, report = scan(root, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (host,) = report["hosts"]
    assert host["complete"] is True and "escape /etc/hostname" in host["collector_errors"]["image"]
    assert prom_complete(out) == "1" and junit_errors(out) == {}
    assert "notes: image" in proc.stdout + proc.stderr
