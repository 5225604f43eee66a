"""scan and analyze say where each report was written: one `wrote PATH` line per file, after the summary; none
with --quiet, none when the report goes to stdout. Run as a user runs it: `python -m auditor.cli` in a process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

SNAPSHOTS = ROOT / "tests/data/snapshots"


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "auditor.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300, check=False)


def test_analyze_tells_each_report_file_it_wrote(tmp_path: Path) -> None:
    snaps = tmp_path / "snaps"
    shutil.copytree(SNAPSHOTS, snaps)
    done = run(["analyze", "snaps", "--no-store", "--format", "html,json,md", "--out", "out"], tmp_path)
    assert done.returncode in (0, 1), done.stderr
    told = [line for line in done.stdout.splitlines() if line.startswith("wrote ")]
    assert told == ["wrote out/report.html", "wrote out/report.json", "wrote out/report.md"]
    assert all((tmp_path / line.split(" ", 1)[1]).is_file() for line in told)
    assert done.stdout.splitlines().index(told[0]) > done.stdout.splitlines().index(f"exit code {done.returncode}")


def test_scan_tells_the_absolute_path_it_was_given_and_nothing_when_quiet_or_on_stdout(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    done = run(["scan", "local", "--binary", "sh", "--no-store", "--format", "html", "--out", str(out)], tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert f"wrote {out}/report.html" in done.stdout.splitlines() and (out / "report.html").is_file()
    quiet = run(["scan", "local", "--binary", "sh", "--no-store", "-q", "--format", "json", "--out", str(out)],
                tmp_path)
    assert quiet.returncode in (0, 1) and quiet.stdout == ""
    piped = run(["scan", "local", "--binary", "sh", "--no-store", "--format", "json"], tmp_path)
    assert piped.stdout.lstrip().startswith("{") and "wrote " not in piped.stdout + piped.stderr
