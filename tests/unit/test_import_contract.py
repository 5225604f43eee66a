"""The one-way import rule (.importlinter, DESIGN.md "Five rooms") holds on this tree, and the check bites.

Runs the real `lint-imports` (import-linter) in a child process: once on the repository, and once on a
copy of the package in which a judge module imports the SSH transport, which must fail naming the
contract it breaks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytest.importorskip("importlinter")

LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
STAGES_CONTRACT = "judge, compare, history and render never reach a host"


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports --no-cache` over the `auditor` package found in `tree`, with the repo's contracts."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-c", LINT, "--no-cache", "--config", str(ROOT / ".importlinter")],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_repository_keeps_every_contract() -> None:
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 broken" in proc.stdout and "KEPT" in proc.stdout


def lint_copy_with(tmp_path: Path, module: str, line: str) -> str:
    """Copy the package, append `line` to `module` (a path under auditor/), run lint-imports on the copy;
    its report, unwrapped, once it has failed."""
    shutil.copytree(ROOT / "auditor", tmp_path / "auditor", ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / "auditor" / module
    path.write_text(path.read_text() + f"\n{line}  # noqa: E402,F401\n")
    proc = lint_imports(tmp_path)
    assert proc.returncode != 0, proc.stdout
    return " ".join(proc.stdout.split())  # the report wraps long contract names


def test_a_judge_module_importing_a_transport_breaks_the_contract(tmp_path: Path) -> None:
    out = lint_copy_with(tmp_path, "judge/engine.py", "from auditor.transport import ssh")
    assert f"{STAGES_CONTRACT} (no transport, targets or image room) BROKEN" in out, out
    assert "auditor.judge.engine -> auditor.transport.ssh" in out, out


def test_a_collect_module_importing_the_image_room_breaks_the_contract(tmp_path: Path) -> None:
    out = lint_copy_with(tmp_path, "collect/snapshot.py", "from auditor.image import fs")
    assert "it never imports a transport or the image room BROKEN" in out, out


def test_the_run_driver_reaching_live_hosts_breaks_the_contract(tmp_path: Path) -> None:
    out = lint_copy_with(tmp_path, "run/driver.py", "from auditor.run import live_hosts")
    assert "the run driver takes hosts from a source and never reaches a host itself" in out, out
    assert "auditor.run.driver -> auditor.run.live_hosts" in out, out


def test_the_run_driver_importing_a_run_above_it_breaks_the_layers(tmp_path: Path) -> None:
    out = lint_copy_with(tmp_path, "run/driver.py", "from auditor.run import scan")
    assert "then the runs (scan, analyze, diff), the run driver, live hosts" in out and "BROKEN" in out, out
    assert "auditor.run.driver -> auditor.run.scan" in out, out
