"""Commit subjects fit on a line: at most MAX_SUBJECT characters (DESIGN.md; the detail goes in the body).

Checked over the history CI has, for every commit after BASE (older ones are left as they are): a test, not
a commit-msg hook, because a hook is local to a clone and optional, while CI runs this on every change.
A shallow clone without BASE is checked by commit time alone; outside a git checkout there is nothing to read.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
MAX_SUBJECT = 100
BASE = "1b64c33f8c378541f4dab4db66de134ed72fb75d"  # the last commit before the rule was checked
BASE_TIME = 1796487397  # BASE's commit time, for a clone that lacks BASE


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


def long_subjects(repo: Path, base: str = BASE, base_time: int = BASE_TIME,
                  limit: int = MAX_SUBJECT) -> list[str]:
    """`HASH (N chars): SUBJECT` for each commit after `base` whose subject is longer than `limit`."""
    has_base = _git(repo, "cat-file", "-e", f"{base}^{{commit}}").returncode == 0
    revs = [f"{base}..HEAD"] if has_base else ["HEAD"]
    done = _git(repo, "log", f"--since=@{base_time + 1}", "--format=%h%x00%s", *revs, "--")
    assert done.returncode == 0, done.stderr
    found = []
    for line in done.stdout.splitlines():
        short, _, subject = line.partition("\0")
        if len(subject) > limit:
            found.append(f"{short} ({len(subject)} chars): {subject[:limit]}…")
    return found


def _in_git_checkout() -> bool:
    return shutil.which("git") is not None and _git(REPO, "rev-parse", "--git-dir").returncode == 0


@pytest.mark.skipif(not _in_git_checkout(), reason="not a git checkout (an sdist or an installed copy)")
def test_commit_subjects_are_short() -> None:
    found = long_subjects(REPO)
    assert not found, (f"commit subjects over {MAX_SUBJECT} characters (reword them: a short subject, "
                       "the detail in the body):\n" + "\n".join(found))


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A real repository: one old commit with a long subject (the base), then two more."""
    if shutil.which("git") is None:
        pytest.skip("no git on this machine")
    env = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]

    def commit(subject: str, body: str = "") -> None:
        (tmp_path / "f").write_text(subject)
        subprocess.run(["git", "-C", str(tmp_path), "add", "f"], check=True)
        message = ["-m", subject] + (["-m", body] if body else [])
        subprocess.run(["git", "-C", str(tmp_path), *env, "commit", "-q", *message], check=True)

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    commit("old " + "x" * 200)
    commit("short subject", "a body may be as long as it needs: " + "y" * 300)
    commit("new " + "z" * 101)
    return tmp_path


def _head(repo: Path, rev: str, fmt: str) -> str:
    return _git(repo, "log", "-1", f"--format={fmt}", rev).stdout.strip()


def test_the_check_finds_a_long_subject_after_the_base_only(history: Path) -> None:
    base = _head(history, "HEAD~2", "%H")
    [found] = long_subjects(history, base, int(_head(history, "HEAD~2", "%ct")) - 1)
    assert found.startswith(_head(history, "HEAD", "%h") + " (105 chars): new zzz")


def test_the_check_passes_short_subjects_with_long_bodies(history: Path) -> None:
    assert long_subjects(history, _head(history, "HEAD~1", "%H"), 0, limit=105) == []
    assert long_subjects(history, _head(history, "HEAD~2", "%H"), 0, limit=105) == []


def test_a_clone_without_the_base_is_checked_by_time(history: Path) -> None:
    found = long_subjects(history, "0" * 40, 0)
    assert [f.split(" (")[1].split(" ")[0] for f in found] == ["105", "204"]
