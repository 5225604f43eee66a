"""The user guide's journeys, run as written: every `$ ami-auditor …` command of a guide's console blocks runs in a
scratch directory (`/tmp/journeys`, where the outputs were made, becomes that directory), through the `ami-auditor`
of this checkout, in order. Each must end with the exit code its documented output shows, and the documented
lines that say what happened (the summary counts, the chain, `wrote …`, `recorded as scan …`, the baseline and
history lines) must appear in what it prints now, numbers and times aside.

Inputs are real: journey 1 reads the test fleet's Debian 12 and 13 roots as unbooted images (built by the fleet
builder: debootstrap, root); journey 2 scans this machine; journey 3 analyses the three snapshots the fleet
recorded (tests/data/snapshots)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

WHERE = "/tmp/journeys"
# Lines of a documented output that say what happened; the others (findings of this machine, tables) may vary.
TOLD = re.compile(r"^(\d+/\d+ hosts reached|  chain on |  symptom |exit code |wrote |recorded as |baseline of |"
                  r"\d+ scans in |facts\.\S+ over |# Release notes|  note: )")


def console(page: Path) -> list[tuple[str, list[str]]]:
    """(command, documented output lines) of each `$ ` command in the page's console blocks."""
    text = page.read_text(encoding="utf-8")
    runs: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("$ "):
                command = lines[i][2:]
                while command.endswith("\\"):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                runs.append((command, []))
            elif runs:
                runs[-1][1].append(lines[i])
            i += 1
    return runs


def masked(line: str, where: Path) -> str:
    line = line.replace(str(where), WHERE).replace(str(where).replace("_", "\\_"), WHERE)  # as Markdown escapes it
    line = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "TIME", line)
    return re.sub(r"\d[\d,.]*", "N", line)


def walk(page: str | Path, where: Path, exact_exit: bool = True) -> int:
    """Run the page's commands in `where`; returns how many ran."""
    shim = where / ".bin"
    shim.mkdir()
    (shim / "ami-auditor").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m auditor.cli "$@"\n')
    (shim / "ami-auditor").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}", NO_COLOR="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = console(page if isinstance(page, Path) else ROOT / "docs" / page)
    assert runs, page
    for command, documented in runs:
        done = subprocess.run(["bash", "-c", command.replace(WHERE, str(where))], cwd=where, env=env,
                              capture_output=True, text=True, timeout=600)
        shown = [line for line in documented if line.startswith("exit code ")]
        # `…; echo "exit code $?"` shows a code the shell then hides: the printed line is what is checked
        expected = int(shown[-1].split()[-1]) if shown and 'exit code $?' not in command else 0
        if exact_exit or not shown:
            assert done.returncode == expected, f"{command}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        else:  # this machine's own findings decide between 0 and 1
            assert done.returncode in (0, 1), f"{command}: {done.returncode}\n{done.stderr}"
        now = {masked(line, where) for line in (done.stdout + done.stderr).splitlines()}
        for line in documented:
            if TOLD.match(line) and not (line.startswith("exit code ") and not exact_exit):
                assert masked(line, where) in now, f"{command}: {line!r} not in\n{done.stdout}{done.stderr}"
    return len(runs)


def test_journey_1_pre_release_on_two_unbooted_roots(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        pytest.skip("the fleet's Debian roots need root and debootstrap (.ci/run installs it)")
    from tests.fleet.builder import ensure_base

    (tmp_path / "golden-root").symlink_to(ensure_base("bookworm"))
    (tmp_path / "new-root").symlink_to(ensure_base("trixie"))
    assert walk("guide-pre-release.md", tmp_path) == 4
    assert (tmp_path / "gate/report.html").is_file() and (tmp_path / "release-notes.md").is_file()


def test_journey_2_scheduled_scans_with_history(tmp_path: Path) -> None:
    assert walk("guide-scheduled-scans.md", tmp_path, exact_exit=False) == 5
    assert (tmp_path / "hist-report/history.html").is_file()


def test_journey_3_compare_availability_zones(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "tests/data/snapshots", tmp_path / "snaps")
    assert walk("guide-compare.md", tmp_path) == 1
    assert (tmp_path / "az-report/report.html").is_file()


def test_a_documented_line_the_tool_no_longer_prints_fails_the_walk(tmp_path: Path) -> None:
    page = tmp_path / "guide-compare.md"
    page.write_text((ROOT / "docs/guide-compare.md").read_text().replace("wrote az-report/report.json",
                                                                          "wrote az-report/report.md"))
    work = tmp_path / "work"
    shutil.copytree(ROOT / "tests/data/snapshots", work / "snaps")
    with pytest.raises(AssertionError, match="'wrote az-report/report.md' not in"):
        walk(page, work)
    assert (work / "az-report/report.json").is_file()  # the tool ran (this checkout's) and wrote what it said
