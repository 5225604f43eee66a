"""`collect -o` streams: each snapshot is staged on disk as its host completes (and dropped from memory),
and the set replaces the previous snapshots only when every host is done, through the real CLI.

Two real targets: an unbooted image root (done in well under a second) and an ssh:// loopback server that
accepts and never says a word (paramiko waits for its banner until --deadline). While the mute host still
holds the run, the image's snapshot must already be on disk as a staged temporary file.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.paths import ROOT
from tests.system.test_interrupt_bound import mute_server  # noqa: F401 - the fixture
from tests.unit.test_image_transport import make_root

DEADLINE_S = 6


def start(root: Path, port: int, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "auditor.cli", "collect", f"image://{root}",
                             f"ssh://root@127.0.0.1:{port}", "--deadline", str(DEADLINE_S), "-o", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def staged_while_running(proc: subprocess.Popen[str], out: Path) -> list[str]:
    """The staged temporary files seen in `out` while the run is still going (empty if it ended first)."""
    while proc.poll() is None:
        temps = sorted(p.name for p in out.glob(".*.tmp")) if out.is_dir() else []
        if temps:
            return temps
        time.sleep(0.05)
    return []


def test_a_finished_host_is_on_disk_while_another_still_runs(mute_server: int, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "snaps"
    out.mkdir()
    (out / "old.json").write_text('{"previous": true}\n')
    proc = start(make_root(tmp_path / "root"), mute_server, out)
    try:
        temps = staged_while_running(proc, out)
        _, err = proc.communicate(timeout=DEADLINE_S + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert len(temps) == 1 and ".json." in temps[0], temps  # the image host, staged before the run ended
    assert proc.returncode == 3, err  # the mute host timed out: incomplete
    written = sorted(p.name for p in out.iterdir())
    assert not [n for n in written if n.endswith(".tmp")], written  # every staged file renamed into place
    assert len(written) == 2 and "old.json" in written, written  # the image's snapshot beside the old file


def test_a_stop_while_staged_leaves_the_previous_snapshots_and_no_temporary(mute_server: int,  # noqa: F811
                                                                              tmp_path: Path) -> None:
    out = tmp_path / "snaps"
    out.mkdir()
    (out / "old.json").write_text('{"previous": true}\n')
    proc = start(make_root(tmp_path / "root"), mute_server, out)
    try:
        assert staged_while_running(proc, out), proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert sorted(p.name for p in out.iterdir()) == ["old.json"]
