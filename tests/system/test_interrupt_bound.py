"""SIGTERM/SIGINT end a scan within 2 s whatever a worker is doing, through the real CLI in a child process.

Two workers that do not finish on their own: the image reader busy in a hostile image (thousands of 1 MB
unit files, --deadline far away), and an ssh scan of a loopback TCP server that accepts the connection and
never says a word (paramiko waits for its banner). The signal is really delivered to the scanner process.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import ROOT
from tests.system.test_image_deadline import big_unit_files
from tests.unit.test_image_transport import make_root

BOUND_S = 2.0
MARGIN_S = 1.0  # the process's own exit (interpreter shutdown) on a loaded machine
BUSY_S = 2.0  # how long the worker is left busy before the signal


def stop_time(argv: list[str], sig: int, tmp_path: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Start `ami-auditor ARGV`, let it work BUSY_S, send `sig`; seconds from the signal to the exit."""
    proc = subprocess.Popen([sys.executable, "-m", "auditor.cli", *argv, "--format", "json", "--out",
                             str(tmp_path / "out")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        time.sleep(BUSY_S)
        assert proc.poll() is None, proc.communicate()  # still working: the signal lands mid-scan
        sent = time.monotonic()
        proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=BOUND_S + MARGIN_S + 10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {BOUND_S + MARGIN_S + 10} s after the signal")
        return time.monotonic() - sent, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def mute_server() -> Iterator[int]:
    """A loopback TCP server that accepts every connection and never sends a byte; its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_a_scan_busy_in_the_image_reader(sig: int, code: int, tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    big_unit_files(root)
    took, proc = stop_time(["scan", f"image://{root}", "--deadline", "300"], sig, tmp_path)
    assert proc.returncode == code, proc.stderr
    assert ("terminated" if sig == signal.SIGTERM else "interrupted") in proc.stderr
    assert took < BOUND_S + MARGIN_S, f"{took:.1f} s from the signal to the exit"


def test_sigterm_ends_an_ssh_scan_of_a_host_that_never_answers(mute_server: int, tmp_path: Path) -> None:
    took, proc = stop_time(["scan", f"ssh://root@127.0.0.1:{mute_server}", "--deadline", "300"],
                           signal.SIGTERM, tmp_path)
    assert proc.returncode == 143, proc.stderr
    assert "terminated" in proc.stderr
    assert took < BOUND_S + MARGIN_S, f"{took:.1f} s from the signal to the exit"


def test_a_stop_does_not_outlive_its_command(tmp_path: Path) -> None:
    """An interrupted in-process command (as the ami:// tests run them) leaves no stop behind: the image
    reader checks it at every read, so a stale one would interrupt whatever this process reads next."""
    from auditor import interrupt
    from auditor.models import HostSpec
    from auditor.run.live_hosts import collect_host

    with interrupt.handlers():
        interrupt.STOP.set()  # what a SIGTERM during the command does
    result = collect_host(HostSpec("img", f"image://{make_root(tmp_path / 'root')}"), binaries=["kubelet"])
    assert result.status == "ok", result.error
