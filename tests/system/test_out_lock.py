"""Two runs writing one `--out` (issue 37 item 5): the replace phase is serialised by a flock on the directory, so
report sets never mix; what a SIGKILLed run left behind (hidden `.tmp`/`.old` files) is removed by the next run.

All real processes: the real CLI (`analyze --out`), and a second process holding the directory's lock as a run
does while it replaces its set (a real run holds it for milliseconds, too short to catch; this one holds it
until told to stop)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import ROOT

SNAPSHOTS = ROOT / "tests/data/snapshots"
HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)  # as a run holds it while it replaces its set
print("locked", flush=True)
sys.stdin.read()
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _analyze(snaps: Path, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "auditor.cli", "analyze", str(snaps), "--no-store",
                             "--format", "json,md,junit", "--out", str(out)], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _staged(out: Path, pid: int) -> list[str]:
    return sorted(p.name for p in out.glob(f".report.*.{pid}.*.tmp"))


def _wait_for(what, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s")


@pytest.fixture
def snaps(tmp_path: Path) -> Path:
    folder = tmp_path / "snaps"
    folder.mkdir()
    for path in SNAPSHOTS.glob("fleet-*.json"):
        shutil.copy(path, folder)
    return folder


def test_a_run_waits_for_another_writing_the_same_out_and_a_killed_run_s_leftovers_go(tmp_path: Path,
                                                                                        snaps: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], cwd=ROOT, env=_env(), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        killed = _analyze(snaps, out)
        # its set rendered and staged, it waits for the lock: nothing of it replaced yet
        left = _wait_for(lambda: _staged(out, killed.pid))
        assert killed.poll() is None and not (out / "report.json").exists()
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert _staged(out, killed.pid) == left  # a killed run leaves its hidden copies behind

        waiting = _analyze(snaps, out)
        _wait_for(lambda: _staged(out, waiting.pid))
        assert waiting.poll() is None and not (out / "report.json").exists()  # serialised: it waits
    finally:
        if holder.stdin is not None:
            holder.stdin.close()  # the holder's "run" ends: the lock is released
        holder.wait(timeout=30)
    _, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 1, err.decode()[-2000:]
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert doc["summary"]["exit_code"] == 1
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.md", "report.xml"]  # leftovers gone


def test_two_concurrent_runs_leave_one_whole_set(tmp_path: Path) -> None:
    """Two real runs over different hosts, started together: every file of the set is from the same run."""
    out = tmp_path / "out"
    runs = []
    names = {"fleet-a1": "first-run-host", "fleet-b1": "second-run-host"}
    for source, name in names.items():
        folder = tmp_path / name
        folder.mkdir()
        snapshot = json.loads((SNAPSHOTS / f"{source}.json").read_text(encoding="utf-8"))
        (folder / "host.json").write_text(json.dumps({**snapshot, "name": name}), encoding="utf-8")
        runs.append(_analyze(folder, out))
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode in (0, 1), err.decode()[-2000:]
    [host] = [h["name"] for h in json.loads((out / "report.json").read_text(encoding="utf-8"))["hosts"]]
    [other] = set(names.values()) - {host}
    for name in ("report.md", "report.xml"):
        text = (out / name).read_text(encoding="utf-8")
        assert host in text and other not in text, name
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.md", "report.xml"]
