"""Packaging as a release and a user do it: the wheel carries the probe, the fact schema, the JSON Schemas,
the rule packs and templates; `python -m build` makes an sdist and wheel that twine accepts, the sdist
carries everything its tests and integrations need, and the wheel installs into a fresh venv (no index:
dependencies from tests/wheelhouse.py) whose `ami-auditor scan local` works."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.wheelhouse import ROOT, project_wheel, wheelhouse

# What the sdist must carry beyond the packages: every tracked file under these (tests need contrib/,
# docs/ and their data; .ci/ says what CI installs).
SDIST_TREES = ("contrib", "docs", "tests", "benchmarks", "rules", "reports", ".ci")


def test_every_package_under_auditor_is_listed_for_the_wheel() -> None:
    """A new room (a directory with __init__.py) missing from pyproject's packages is left out of the wheel:
    the installed tool then fails with ModuleNotFoundError where users run it (Image Builder, the timer)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "auditor").rglob("__init__.py")}
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


def test_wheel_carries_data_files(tmp_path: Path) -> None:
    wheel = project_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    for rule in (ROOT / "rules").glob("*.yaml"):
        assert f"auditor/builtin_rules/{rule.name}" in names
    for template in (ROOT / "reports").iterdir():
        assert f"auditor/report_templates/{template.name}" in names
    schemas = [f"auditor/schemas/{p.name}" for p in (ROOT / "auditor" / "schemas").glob("*.schema.json")]
    assert "auditor/schemas/rule-pack.schema.json" in schemas  # the input formats (rule packs, waivers, …) too
    for data in ("auditor/collect/probe.sh", "auditor/collect/facts.yaml", *schemas):
        assert data in names
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m build` output (sdist and wheel; offline with the installed backend, as CI has no index)."""
    out = tmp_path_factory.mktemp("dist")
    # from a copy as a fresh clone has it: no egg-info or build/ left by earlier installs to leak in
    src = tmp_path_factory.mktemp("src") / "ami-auditor"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                                             ".pytest_cache", ".ruff_cache", ".mypy_cache"))
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _tracked(*trees: str) -> set[str]:
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", *trees], capture_output=True, text=True,
                          check=True)
    return set(done.stdout.split())


def test_build_makes_an_sdist_and_wheel_that_twine_accepts(dists: Path) -> None:
    files = sorted(dists.iterdir())
    assert [f.name for f in files] == ["ami_auditor-0.1.0-py3-none-any.whl", "ami_auditor-0.1.0.tar.gz"]
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, files)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    with zipfile.ZipFile(files[0]) as zf:
        meta = Parser().parsestr(zf.read("ami_auditor-0.1.0.dist-info/METADATA").decode())
        assert "ami_auditor-0.1.0.dist-info/licenses/LICENSE" in zf.namelist()
    assert meta["License-Expression"] == "Apache-2.0"
    assert "Operating System :: POSIX :: Linux" in meta.get_all("Classifier")
    assert meta["Requires-Python"] == ">=3.10"


def test_sdist_carries_license_and_what_its_tests_need(dists: Path) -> None:
    with tarfile.open(next(dists.glob("*.tar.gz"))) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert "LICENSE" in names
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files to compare with")
    missing = sorted(_tracked(*SDIST_TREES) - names)
    assert not missing, f"{len(missing)} tracked files not in the sdist, e.g. {missing[:5]}"


def test_wheel_installs_into_a_fresh_venv_and_scans_this_machine(tmp_path: Path) -> None:
    house = tmp_path / "wheels"
    wheel = wheelhouse(house)
    venv = tmp_path / "venv"
    # nothing of this checkout on the path: pip would take its egg-info as ami-auditor already installed
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=env)
    done = subprocess.run([str(venv / "bin/pip"), "install", "-q", "--no-index", "--find-links", str(house),
                           str(wheel)], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "report"
    scan = subprocess.run([str(venv / "bin/ami-auditor"), "scan", "local", "--no-store", "--format", "json",
                           "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert scan.returncode in (0, 1), scan.stderr
    report = json.loads((out / "report.json").read_text())
    assert [h["status"] for h in report["hosts"]] == ["ok"]
    # the console script ran the wheel's code, not this checkout's nor an editable install's
    where = subprocess.run([str(venv / "bin/python"), "-c", "import auditor; print(auditor.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, check=True)
    assert where.stdout.startswith(str(venv))
