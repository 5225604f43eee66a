"""Every recipe installs what it builds: no file under contrib/ (nor README or the docs) installs `ami-auditor` by
name from a package index. No index carries it, so whoever registers the name would run code as root wherever
a recipe ran `pip install ami-auditor` (the GitHub workflow did, then `sudo -E`). A recipe installs a wheel
file built from a checkout, a checkout directory, or a Git URL pinned to a commit."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.paths import ROOT

INSTALL = re.compile(r"(?:\bpip3?(?:\.exe)?|\bpipx|\buv\s+pip|\buv\s+tool|-m\s+pip)\s+install\b([^\n;&|]*)")
NAME = re.compile(r"ami[-_.]auditor(?:\[[^\]]*\])?(?:\s*(?:[<>=!~]=?|===).*)?", re.I)
# Options of pip/pipx/uv install that take a value (the value is no requirement).
VALUED = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f",
          "--find-links", "--target", "-t", "--prefix", "--root", "--python", "--suffix", "--pip-args", "-e",
          "--editable", "--upgrade-strategy", "--only-binary", "--no-binary", "--platform", "--src"}


def installs_by_name(text: str) -> list[str]:
    """The install commands in `text` that name ami-auditor as a requirement (not a path, wheel file or URL)."""
    found = []
    for match in INSTALL.finditer(text):
        try:
            words = shlex.split(match.group(1), comments=True)
        except ValueError:  # a quote closed beyond the command (YAML `- 'pip install …'`)
            words = [w.strip("'\"") for w in match.group(1).split()]
        skip = False
        for word in words:
            if skip:
                skip = False
                continue
            if word.startswith("-"):
                skip = word in VALUED
                continue
            if NAME.fullmatch(word):
                found.append(match.group(0).strip())
    return found


def recipe_files() -> list[Path]:
    files = [p for p in sorted((ROOT / "contrib").rglob("*")) if p.is_file()]
    return [*files, ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("line", [
    "python3 -m pip install --upgrade ami-auditor",  # what the GitHub recipe did
    "pip install ami-auditor==0.1.0", "pipx install ami_auditor", "uv tool install 'ami-auditor[test]'",
    "sudo pip3 install -q AMI-Auditor", "run: pip install --index-url https://example.org/simple ami-auditor",
])
def test_an_install_by_name_is_caught(line: str) -> None:
    assert installs_by_name(line) != []


@pytest.mark.parametrize("line", [
    "pip install dist/ami_auditor-0.1.0-py3-none-any.whl", "pip install .", "pip install -e '.[test]'",
    ".venv/bin/pip install .ami-auditor-dist/ami_auditor-*.whl", "pipx install .", "pip install ./ami-auditor",
    "pip install 'git+https://example.org/ami-auditor.git@0123456789abcdef0123456789abcdef01234567'",
    '"$dir/venv/bin/pip" install --quiet --disable-pip-version-check "$wheel"',
    "pip install -r requirements.txt", "pip install --find-links ami-auditor ./x.whl",
])
def test_a_built_wheel_a_checkout_or_a_pinned_url_is_not(line: str) -> None:
    assert installs_by_name(line) == []


def test_no_recipe_installs_ami_auditor_by_name_from_an_index() -> None:
    offending = {str(p.relative_to(ROOT)): hits for p in recipe_files()
                 if (hits := installs_by_name(p.read_text(encoding="utf-8", errors="replace")))}
    assert offending == {}, "install the wheel built from the checkout (or a pinned commit), not a name"
    # the scan saw the recipes: each file that installs anything is among them
    assert (ROOT / "contrib/github-actions/audit-ami.yml") in recipe_files()
    assert INSTALL.search((ROOT / "contrib/github-actions/audit-ami.yml").read_text())
