"""`analyze` on directories and options a user gets wrong: a link loop among the files is that file's
error, and a label no snapshot defines is bad input (exit 2) as it is for `scan`, never an empty comparison."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

REPO = ROOT
SNAPSHOTS = REPO / "tests" / "data" / "snapshots"


def analyze(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", "analyze", *argv, "--no-store", "--jobs", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.fixture()
def snaps(tmp_path: Path) -> Path:
    d = tmp_path / "snaps"
    d.mkdir()
    for name in ("fleet-a1.json", "fleet-b1.json"):
        shutil.copyfile(SNAPSHOTS / name, d / name)
    return d


def test_a_link_loop_among_the_files_is_that_files_error_and_the_rest_is_analyzed(snaps: Path,
                                                                                tmp_path: Path) -> None:
    (snaps / "loop.json").symlink_to("loop.json")
    (snaps / "ring-a.json").symlink_to("ring-b.json")
    (snaps / "ring-b.json").symlink_to("ring-a.json")
    out = tmp_path / "out"
    done = analyze(str(snaps), "--format", "json", "--out", str(out), "--fail-on", "critical")
    assert done.returncode == 3, done.stdout + done.stderr  # incomplete: findings stay below --fail-on
    hosts = {h["name"]: h for h in json.loads((out / "report.json").read_text())["hosts"]}
    assert {n for n, h in hosts.items() if h["status"] == "ok"} == {"a1", "b1"}
    for name in ("loop", "ring-a", "ring-b"):
        assert hosts[name]["status"] == "error" and f"{name}.json" in hosts[name]["error"], hosts[name]


@pytest.mark.parametrize("argv", [["--group-by", "zone"], ["--symptom", "zone=us-east-1a"]])
def test_a_label_no_snapshot_defines_is_bad_input_naming_the_option(snaps: Path, tmp_path: Path,
                                                                    argv: list[str]) -> None:
    out = tmp_path / "out"
    done = analyze(str(snaps), *argv, "--format", "json", "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{argv[0]}: unknown label 'zone'" in done.stderr and "Traceback" not in done.stderr
    assert "az" in done.stderr  # it names the labels the snapshots do define
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("argv", [["--group-by", "az"], ["--group-by", "name"], ["--symptom", "az=us-east-1a"]])
def test_a_label_the_snapshots_define_or_a_built_in_key_is_accepted(snaps: Path, argv: list[str]) -> None:
    done = analyze(str(snaps), *argv)
    assert done.returncode in (0, 1), done.stdout + done.stderr
