"""Make a fleet host look like a Debian 12 instance a user installs ami-auditor on, and undo it after.

The fleet's base root has python3 but not python3-venv (rebuilding the cached base for it would cost
every CI run a minute), and no fleet host reaches a package index. So, for one test:
- the files of this machine's Debian packages python3-venv & co. (same release, Debian 12, as the
  fleet's base) are copied into the host's root, as `apt-get install python3-venv` would lay them out;
- pip inside the host reads /etc/pip.conf (`no-index`, `find-links` to a copy of tests/wheelhouse.py's
  directory): the stand-in for the index a real instance has. Install commands run unchanged.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

VENV_PACKAGES = ("python3-venv", "python3.11-venv", "python3-pip-whl", "python3-setuptools-whl")
WHEELHOUSE = "var/tmp/ami-auditor-wheelhouse"


def package_files(packages: tuple[str, ...]) -> list[Path]:
    """The regular files (and symlinks) this machine's dpkg lists for `packages`."""
    done = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True)
    assert done.returncode == 0, f"install {' '.join(packages)} on this machine (.ci/apt.d/deploy.txt): {done.stderr}"
    return [Path(line) for line in done.stdout.splitlines()
            if line.startswith("/") and (Path(line).is_symlink() or Path(line).is_file())]


class DebianInstance:
    """`with DebianInstance(root, wheels):` python3-venv and an offline pip index in the host at `root`."""

    def __init__(self, root: Path, wheels: Path):
        self.root = root
        self.wheels = wheels
        self.added: list[Path] = []

    def __enter__(self) -> DebianInstance:
        for src in package_files(VENV_PACKAGES):
            dst = self.root / src.relative_to("/")
            if dst.exists() or dst.is_symlink():
                continue  # the host has it already: leave it as it is
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                dst.symlink_to(src.readlink())
            else:
                shutil.copy2(src, dst)
            self.added.append(dst)
        shutil.copytree(self.wheels, self.root / WHEELHOUSE, dirs_exist_ok=True)
        conf = self.root / "etc/pip.conf"
        assert not conf.exists()
        conf.write_text(f"[global]\nno-index = true\nfind-links = /{WHEELHOUSE}\n")
        self.added.append(conf)
        return self

    def __exit__(self, *exc: object) -> None:
        for path in reversed(self.added):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.root / WHEELHOUSE, ignore_errors=True)
