"""A reader that goes away (`ami-auditor … | head -1`) must not cost the run its reports or exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT


def run_with_closed_stdout(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read: the first write gets EPIPE
    try:
        return subprocess.run([sys.executable, "-m", "auditor.cli", *argv], cwd=ROOT, stdout=write_end,
                              stderr=subprocess.PIPE, timeout=120, check=False)
    finally:
        os.close(write_end)


def test_scan_with_its_reader_gone_still_writes_the_report_and_keeps_its_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_with_closed_stdout(["scan", "local", "--binary", "sh", "--format", "json,md", "--out", str(out)])
    assert proc.returncode in (0, 1, 3), proc.stderr.decode()[-2000:]
    assert b"Traceback" not in proc.stderr and b"internal error" not in proc.stderr
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert doc["summary"]["exit_code"] == proc.returncode
    assert (out / "report.md").stat().st_size > 0


def test_rendering_to_a_closed_pipe_is_not_an_internal_error() -> None:
    proc = run_with_closed_stdout(["report", str(ROOT / "tests/data/reports/fleet.json"), "--format", "html"])
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stderr == b""
