"""Installed packages and file owners of an unbooted image.

dpkg: the image's database (var/lib/dpkg/status and info/*.list) is parsed here, read through the
confined `ImageFS`. rpm: its databases are binary, so the scanner's own `rpm --root` reads them, but only
when the database directory resolves to the same place for the kernel as inside the image (no link out
of the root) and holds nothing but regular files and directories; otherwise rpm facts are reported
as not available.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable

from ..transport.image_fs import ImageFS, quote

STATUS_CAP = 256 << 20
LIST_CAP = 64 << 20
RPM_DBS = ("usr/lib/sysimage/rpm", "var/lib/rpm")
RPM_TIMEOUT_S = 30
RC_NOT_AVAILABLE = 3


def _paragraphs(text: str) -> list[dict[str, str]]:
    """dpkg status paragraphs as {lowercase field: value} (continuation lines skipped)."""
    out = []
    for para in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in para.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if fields.get("package"):
            out.append(fields)
    return out


def parse_dpkg_status(text: str) -> list[tuple[str, str, str]]:
    """(package, version, arch) of packages dpkg considers installed (`ii`), in file order."""
    rows = []
    for fields in _paragraphs(text):
        status = fields.get("status", "").split()
        if len(status) == 3 and status[0] == "install" and status[2] == "installed":
            rows.append((fields["package"], fields.get("version", ""), fields.get("architecture", "")))
    return rows


class Packages:
    """Package facts of one image, read once."""

    def __init__(self, fs: ImageFS, check_time: Callable[[], None]):
        self.fs = fs
        self.check_time = check_time
        self._rpm_checked = False
        self._status_text: str | None = None
        self._versions: dict[str, str] | None = None
        self._rpm_db: str | None = None

    def _status(self) -> str:
        if self._status_text is None:
            self._status_text = self.fs.read_text("var/lib/dpkg/status", STATUS_CAP) or ""
            self.check_time()
        return self._status_text

    def dpkg_version(self, package: str) -> str:
        """The Version dpkg records for `package` (`dpkg-query -W -f='${Version}'`), '' when unknown."""
        if self._versions is None:
            self._versions = {}
            for fields in _paragraphs(self._status()):
                self._versions.setdefault(fields["package"], fields.get("version", ""))
        return self._versions.get(package, "")

    def has_dpkg(self) -> bool:
        return self.fs.is_dir("var/lib/dpkg")

    def dpkg_owners(self, paths: set[str]) -> dict[str, str]:
        """Which package's file list names each path (`dpkg -S PATH`, exact paths only)."""
        if not paths or not self.has_dpkg():
            return {}
        owners: dict[str, str] = {}
        for name in self.fs.listdir("var/lib/dpkg/info") or []:
            if not name.endswith(".list"):
                continue
            self.check_time()
            text = self.fs.read_text(f"var/lib/dpkg/info/{name}", LIST_CAP) or ""
            package = quote(name[: -len(".list")].split(":", 1)[0])
            for line in text.splitlines():
                if line in paths:
                    owners.setdefault(line, package)
        return owners

    def rpm_db(self) -> str | None:
        """The image's rpm database dir (image path) when `rpm --root` can read it safely, else None."""
        if not self._rpm_checked:
            self._rpm_checked = True
            if shutil.which("rpm"):
                for db in RPM_DBS:
                    if self._rpm_db_safe(db):
                        self._rpm_db = "/" + db
                        break
        return self._rpm_db

    def _rpm_db_safe(self, db: str) -> bool:
        inside = self.fs.realpath(db)
        if inside is None or not self.fs.is_dir(db):
            return False
        kernel_view = os.path.realpath(os.path.join(self.fs.root, db))
        if kernel_view != os.path.realpath(self.fs.root) + inside:
            self.fs.note("escape", db, "rpm database path leads out of the image root; rpm facts not read")
            return False
        names = self.fs.listdir(db) or []
        for name in names:
            st = self.fs.lstat(f"{db}/{name}")
            if st is None or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                self.fs.note("refused", f"{db}/{name}", "not a regular file in the rpm database; rpm facts not read")
                return False
        return bool(names)

    def _rpm(self, args: list[str]) -> str | None:
        db = self.rpm_db()
        if db is None:
            return None
        try:
            proc = subprocess.run(["rpm", "--root", str(self.fs.root), "--dbpath", db, *args],
                                  capture_output=True, timeout=RPM_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout[: 64 << 20].decode("utf-8", "replace") if proc.returncode == 0 else None

    def rpm_owner(self, path: str) -> str | None:
        out = self._rpm(["-qf", "--qf", "%{NAME}\\t%{VERSION}-%{RELEASE}\\t%{VENDOR}\\n", path])
        line = (out or "").splitlines()[0] if out else ""
        return line if line and "not owned" not in line else None

    def section(self) -> tuple[str, int]:
        """The `packages` section: `manager=` then `name<TAB>version<TAB>arch` rows."""
        if self.has_dpkg():
            rows = sorted(set(parse_dpkg_status(self._status())))
            return "\n".join(["manager=dpkg", *("\t".join(r) for r in rows)]), 0
        out = self._rpm(["-qa", "--qf", "%{NAME}\\t%{VERSION}-%{RELEASE}\\t%{ARCH}\\n"])
        if out is not None:
            return "manager=rpm\n" + out.rstrip("\n"), 0
        return "", RC_NOT_AVAILABLE
