"""Terminal conventions through the real CLI: the report on stdout, the summary on stderr, --quiet, colour.

Each test runs `python -m auditor.cli` as a subprocess (this checkout first on PYTHONPATH); colour is
checked under a real pseudo-terminal, since "a terminal" is what decides it.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

SCAN = ["scan", "local", "--binary", "sh", "--no-store"]
ESC = "\x1b["


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run(argv: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          env=cli_env(**extra), timeout=120, check=False)


def run_pty(argv: list[str], **extra: str) -> tuple[int, str, str]:
    """Run with stdout on a pseudo-terminal (stderr a pipe); returns (exit code, terminal text, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "auditor.cli", *argv], cwd=ROOT, stdout=slave,
                            stderr=subprocess.PIPE, env=cli_env(**extra))
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace"), err.decode()


def test_one_format_without_out_puts_the_report_on_stdout_and_the_summary_on_stderr() -> None:
    proc = run([*SCAN, "--format", "json"])
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)  # nothing but the report: `| jq` works
    assert doc["schema"] == "ami-auditor/report/1"
    assert doc["summary"]["exit_code"] == proc.returncode
    assert "hosts reached" in proc.stderr and "local" in proc.stderr
    assert "hosts reached" not in proc.stdout


def test_markdown_on_stdout_too() -> None:
    proc = run([*SCAN, "--format", "md"])
    assert proc.stdout.lstrip().startswith("#"), proc.stdout[:200]
    assert "exit code" in proc.stderr


def test_without_format_the_summary_stays_on_stdout() -> None:
    proc = run(SCAN)
    assert "hosts reached" in proc.stdout and not proc.stdout.lstrip().startswith("{")


def test_several_formats_without_out_is_bad_usage() -> None:
    proc = run([*SCAN, "--format", "json,md"])
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "--out" in proc.stderr


def test_quiet_prints_nothing_but_keeps_the_exit_code_and_the_files(tmp_path: Path) -> None:
    loud = run(SCAN)
    proc = run([*SCAN, "--quiet", "--format", "json", "--out", str(tmp_path)])
    assert (proc.stdout, proc.stderr) == ("", "")
    assert proc.returncode == loud.returncode
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["exit_code"] == proc.returncode


def test_quiet_short_form_and_errors_still_shown() -> None:
    proc = run([*SCAN, "-q", "--rules", "/nonexistent-rules"])
    assert proc.returncode == 2 and proc.stdout == ""
    assert "nonexistent-rules" in proc.stderr  # an error is not a summary: --quiet keeps it


def test_colour_on_a_terminal_for_severities_and_statuses() -> None:
    code, text, _ = run_pty(SCAN)
    assert ESC in text, text
    assert f"{ESC}32mok" in text or f"{ESC}1;32mok" in text  # the host's status, green
    assert any(f"m[{s}" in text for s in ("LOW", "INFO", "MEDIUM", "HIGH", "CRITICAL"))


def test_no_colour_with_NO_COLOR_or_never_or_a_pipe() -> None:
    assert ESC not in run_pty(SCAN, NO_COLOR="1")[1]
    assert ESC not in run_pty([*SCAN, "--color", "never"])[1]
    assert ESC not in run(SCAN).stdout
    assert ESC in run_pty(SCAN, NO_COLOR="")[1]  # empty NO_COLOR is unset (no-color.org)


def test_colour_always_colours_the_summary_but_never_a_report(tmp_path: Path) -> None:
    piped = run([*SCAN, "--color", "always"])
    assert ESC in piped.stdout
    to_stdout = run([*SCAN, "--color", "always", "--format", "md"])
    assert ESC not in to_stdout.stdout and ESC in to_stdout.stderr
    code, text, _ = run_pty([*SCAN, "--color", "always", "--format", "json", "--out", str(tmp_path)])
    assert ESC not in (tmp_path / "report.json").read_text()


def test_bad_colour_value_is_bad_usage() -> None:
    proc = run([*SCAN, "--color", "sometimes"])
    assert proc.returncode == 2 and "--color" in proc.stderr
