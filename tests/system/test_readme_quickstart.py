"""README's Quick start, run as written: its first shell block, by bash, in a fresh copy of the checkout, with a
fresh venv and a fresh home. It must install the checkout (no package name), write the HTML report, and print
where it went. Tests reach no package index, so pip resolves the real requirements (and the build backend)
against this machine's installed distributions packed back into wheels (tests/wheelhouse.py), the way it
would against an index: PIP_NO_INDEX and PIP_FIND_LINKS, nothing in the command changed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.wheelhouse import ROOT, repack, runtime_requirements


def quick_start() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)[0]


def test_the_quick_start_as_written_installs_the_checkout_and_says_where_the_report_is(tmp_path: Path) -> None:
    command = quick_start()
    assert "pip install ." in command and "ami-auditor" not in command.split("pip install", 1)[1].split("&&")[0]
    house = tmp_path / "wheels"
    house.mkdir()
    for name in sorted(runtime_requirements() | {"setuptools"}):  # setuptools: the build backend pip isolates
        repack(name, house)
    checkout = tmp_path / "ami-auditor"  # a fresh clone's content: nothing built, no venv
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "site", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache",
        ".venv", "node_modules"))
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "PIP_NO_INDEX": "1",
           "PIP_FIND_LINKS": str(house), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(["bash", "-e", "-c", command], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]  # 1: this machine has findings
    lines = done.stdout.splitlines()
    assert "wrote report/report.html" in lines, done.stdout[-2000:]
    assert lines.index("wrote report/report.html") > lines.index(f"exit code {done.returncode}")
    html = (checkout / "report/report.html").read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html>") and "ami-auditor" in html
    # the tool ran from the venv the command made, installed from the checkout (not an editable install)
    where = subprocess.run([str(checkout / ".venv/bin/python"), "-c", "import auditor; print(auditor.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert where.stdout.startswith(str(checkout / ".venv"))
    # and README's word on the history store holds: recorded under the home's default store
    assert (home / ".local/share/ami-auditor/history.sqlite3").is_file()
