"""The systemd unit's Documentation= points at files the install puts there: docs/deploy.md's systemd recipe is
run (its documentation step, with /usr/share/doc moved under a temporary root) and every file:// URI of the unit
must then exist. Before, the unit named /opt/ami-auditor/README.md, which no install step wrote."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from tests.paths import ROOT

UNIT = ROOT / "contrib/systemd/ami-auditor.service"
DOC_ROOT = "/usr/share/doc/"


def documentation() -> list[str]:
    return [uri for line in UNIT.read_text().splitlines() if line.startswith("Documentation=")
            for uri in line.split("=", 1)[1].split()]


def install_steps() -> list[str]:
    """The systemd recipe's commands that write under /usr/share/doc."""
    section = (ROOT / "docs/deploy.md").read_text().split("\n## systemd timer\n", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```sh\n(.*?)```", section, re.S)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if DOC_ROOT in line]


def test_every_documentation_file_of_the_unit_is_installed_by_the_recipe(tmp_path: Path) -> None:
    uris = documentation()
    files = [u.removeprefix("file://") for u in uris if u.startswith("file://")]
    assert files and all(u.startswith(("file:///", "https://", "man:")) for u in uris), uris
    steps = install_steps()
    assert steps, "docs/deploy.md's systemd recipe installs no documentation"
    for step in steps:  # as the user runs it from the checkout, with the destination under a temporary root
        moved = step.replace(DOC_ROOT, f"{tmp_path}{DOC_ROOT}")
        assert all(DOC_ROOT not in w or w.startswith(str(tmp_path)) for w in shlex.split(moved)), moved
        subprocess.run(["bash", "-e", "-c", moved], cwd=ROOT, check=True, timeout=60)
    for path in files:
        installed = tmp_path / path.lstrip("/")
        assert installed.is_file(), f"Documentation={path}: the install does not put it there"
        assert installed.read_bytes() == (ROOT / Path(path).relative_to("/usr/share/doc/ami-auditor")).read_bytes()

