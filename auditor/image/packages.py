"""Installed packages and file owners of an unbooted image.

dpkg: the image's database (var/lib/dpkg/status and info/*.list) is parsed here, read through the
confined `ImageFS`. rpm: its databases are binary, so the scanner's own `rpm --root` reads them, but only
when the database directory resolves to the same place for the kernel as inside the image (no link out
of the root) and holds nothing but regular files and directories; otherwise rpm facts are reported
as not available. The status database is parsed once, checking the run's deadline as it goes; rpm runs
no longer than the time left and ends at once on SIGINT/SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterator

from .fs import NOT_FOUND, ImageFS
from .text import quote

STATUS_CAP = 256 << 20
LIST_CAP = 64 << 20
RPM_DBS = ("usr/lib/sysimage/rpm", "var/lib/rpm")
RPM_TIMEOUT_S = 30
RPM_POLL_S = 0.1  # how often a running rpm is checked for a stop or the deadline
RC_NOT_AVAILABLE = 3
RC_FAILED = 1
_CHECK_EVERY = 1 << 16  # status lines between two deadline checks


def _lines(text: str) -> Iterator[str]:
    """The lines of `text` one at a time (a list of 256 MB of empty lines would take gigabytes)."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]


def _paragraphs(text: str, check_time: Callable[[], None] = lambda: None) -> list[dict[str, str]]:
    """dpkg status paragraphs as {lowercase field: value} (continuation lines skipped)."""
    out = []
    fields: dict[str, str] = {}
    for n, line in enumerate(_lines(text)):
        if n % _CHECK_EVERY == 0:
            check_time()
        if not line:  # a blank line ends a paragraph
            if fields.get("package"):
                out.append(fields)
            fields = {}
        elif line[:1] not in (" ", "\t") and ":" in line:
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
    if fields.get("package"):
        out.append(fields)
    return out


def _installed(paragraphs: list[dict[str, str]]) -> Iterator[tuple[str, str, str]]:
    for fields in paragraphs:
        status = fields.get("status", "").split()
        if len(status) == 3 and status[0] == "install" and status[2] == "installed":
            yield fields["package"], fields.get("version", ""), fields.get("architecture", "")


def parse_dpkg_status(text: str) -> list[tuple[str, str, str]]:
    """(package, version, arch) of packages dpkg considers installed (`ii`), in file order."""
    return list(_installed(_paragraphs(text)))


class Packages:
    """Package facts of one image, read once."""

    def __init__(self, fs: ImageFS, check_time: Callable[[], None]):
        self.fs = fs
        self.check_time = check_time
        self._rpm_checked = False
        self._status_paragraphs: list[dict[str, str]] | None = None
        self._versions: dict[str, str] | None = None
        self._rpm_db: str | None = None
        self.status_failure: str | None = None  # why var/lib/dpkg/status was not read whole

    def _status(self) -> list[dict[str, str]]:
        if self._status_paragraphs is None:
            why: list[str] = []
            text = self.fs.read_text("var/lib/dpkg/status", STATUS_CAP, why) or ""
            if why and why[0] != NOT_FOUND:  # cut or refused: the package list is not the image's
                self.status_failure = why[0]
            self._status_paragraphs = _paragraphs(text, self.check_time)
        return self._status_paragraphs

    def dpkg_version(self, package: str) -> str:
        """The Version dpkg records for `package` (`dpkg-query -W -f='${Version}'`), '' when unknown."""
        if self._versions is None:
            self._versions = {}
            for fields in self._status():
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
            for line in paths.intersection(text.splitlines()):
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
        end = time.monotonic() + RPM_TIMEOUT_S
        try:
            with subprocess.Popen(["rpm", "--root", str(self.fs.root), "--dbpath", db, *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
                while True:
                    try:
                        out, _ = proc.communicate(timeout=RPM_POLL_S)
                        break
                    except subprocess.TimeoutExpired:
                        try:
                            self.check_time()  # the deadline, and SIGINT/SIGTERM
                        except BaseException:
                            proc.kill()
                            raise
                        if time.monotonic() > end:
                            proc.kill()
                            return None
        except OSError:
            return None
        return out[: 64 << 20].decode("utf-8", "replace") if proc.returncode == 0 else None

    def rpm_owner(self, path: str) -> str | None:
        out = self._rpm(["-qf", "--qf", "%{NAME}\\t%{VERSION}-%{RELEASE}\\t%{VENDOR}\\n", path])
        line = (out or "").splitlines()[0] if out else ""
        return line if line and "not owned" not in line else None

    def section(self) -> tuple[str, int]:
        """The `packages` section: `manager=` then `name<TAB>version<TAB>arch` rows."""
        if self.has_dpkg():
            rows = sorted(set(_installed(self._status())))
            if self.status_failure:  # a list cut short would read as packages removed: no list at all
                return "", RC_FAILED  # ImageSections names why
            return "\n".join(["manager=dpkg", *("\t".join(r) for r in rows)]), 0
        out = self._rpm(["-qa", "--qf", "%{NAME}\\t%{VERSION}-%{RELEASE}\\t%{ARCH}\\n"])
        if out is not None:
            return "manager=rpm\n" + out.rstrip("\n"), 0
        return "", RC_NOT_AVAILABLE
