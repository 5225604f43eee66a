"""The probe's sections for an unbooted image, produced in Python through the confined `ImageFS`.

Same section names and body formats as probe.sh prints (the parsers cannot tell them apart), framed
with the run's nonce (framing.py). Nothing in the image is executed; every file is read inside the
image root with a size cap; runtime sections say "not applicable" (RC_OFFLINE). What the reader
refused or found suspicious (a link leading out of the root, a FIFO, a cut read) goes into an extra
`confinement` section, one note per line. A refused or cut read also fails the section that wanted it,
by name (a FAILED line): that fact is unknown, never "absent" or empty, and the section's other facts stand.

Bounded in time as in size: every read checks the run's deadline (ImageFS.check_time), and every pattern
over image text is RE2 (linear in the line; a backtracking pattern is quadratic on a hostile line). A
section the deadline cuts, and every section after it, ends with the timeout status (RC_TIMED_OUT): a
failed area named in the report, while what was read before it is kept.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import stat
import time
from collections.abc import Callable
from os import stat_result
from typing import Any

import re2  # type: ignore[import-untyped]

from ..collect import framing
from ..collect.collectors import RC_NOT_AVAILABLE, RC_OFFLINE, RC_TIMED_OUT
from ..collect.parsers.confinement import CONFINEMENT
from ..collect.section_list import SECTIONS
from ..errors import ProbeTimeout, TransportError
from .config import ConfigReader, kernels_section
from .fs import NOT_FOUND, ImageFS, Note
from .packages import Packages
from .text import quote
from .units import list_unit_files

SMALL_CAP = 1 << 20  # identity files, os-release, eks release, ecs config
LOG_CAP = 32 << 20  # logs and user data searched for download URLs
HASH_CAP = 1 << 30  # a larger "binary" is not hashed
SEARCH_DIRS = ("/usr/local/bin", "/usr/bin", "/usr/sbin", "/usr/local/sbin", "/bin", "/sbin", "/usr/libexec",
               "/opt/bin", "/snap/bin")
EVIDENCE = ("/var/log/cloud-init-output.log", "/var/lib/cloud/instance/user-data.txt",
            "/var/lib/cloud/instance/scripts/*", "/etc/eks/release", "/var/log/user-data.log")
SYSTEMD_LIBS = ("usr/lib/systemd", "lib/systemd", "usr/lib64/systemd")  # lib64: Fedora, AL2023
_TRIPLET = re.compile(r"^[a-z0-9_]+-[a-z0-9_]+-[a-z0-9_]+$")  # usr/lib/x86_64-linux-gnu/systemd (Debian)
_NATURAL = re.compile(r"(\d+)")
# rules/image.yaml's facts, matched as probe.sh's s_hygiene matches them (same names, same patterns)
HISTORIES = (".bash_history", ".zsh_history", ".ash_history", ".sh_history", ".python_history", ".mysql_history",
             ".psql_history", ".lesshst", ".viminfo")
CREDENTIAL_FILES = ((".aws/credentials", "aws-credentials"), (".netrc", "netrc"),
                    (".git-credentials", "git-credentials"), (".pgpass", "pgpass"))
PACKAGE_CACHES = ("/var/cache/apt", "/var/lib/apt/lists", "/var/cache/yum", "/var/cache/dnf")


def _linear(pattern: str) -> Any:
    """An RE2 pattern with grep -E's leftmost-longest matches, in time linear in the text."""
    options = re2.Options()
    options.longest_match = True
    options.log_errors = False
    return re2.compile(pattern, options)


_B64 = re.compile(r"^[A-Za-z0-9+/=]+$")
_AWS_KEY_ID = _linear(r"A(KI|SI)A[0-9A-Z]{16}")
_SECRET_VARIABLE = _linear(r"^\s*(export\s+)?[A-Z0-9_]*(SECRET|TOKEN|PASSWORD|PASSWD|API_KEY|AUTH_DATA)[A-Z0-9_]*"
                           r"\s*=\s*\S")
_AWS_CONFIG_SECRET = _linear(r"(?i)^\s*aws_(secret_access_key|session_token)\s*=")
_DOCKER_AUTH = _linear(r'"auth"')


def _first_line(text: str | None) -> str:
    lines = (text or "").splitlines()
    return lines[0].strip() if lines else ""


def _natural(name: str) -> list[tuple[int, int | str]]:
    """A `sort -V`-like key: digit runs compare as numbers."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in _NATURAL.split(name) if p]


class ImageSections:
    """One run over one image: `text()` returns the framed sections and the done marker."""

    def __init__(self, fs: ImageFS, nonce: str, binaries: list[str], exec_versions: bool = False):
        if not framing.NONCE_RE.match(nonce):
            raise TransportError("image reader: the probe request carries no valid run nonce")
        self.fs = fs
        self.nonce = nonce
        self.binaries = binaries
        self.exec_versions = exec_versions  # asked for --version runs: refused for images, and said so
        self.check_time = fs.check_time  # the run's deadline and SIGINT/SIGTERM
        self.packages = Packages(fs, self.check_time)
        self._owners: dict[int, str] | None = None
        # the section being produced: the facts it could not read, their paths by (fact, why) (`_failed`)
        self._failures: dict[tuple[str, str], list[str]] = {}
        self._failed_paths: set[str] = set()

    def identity(self) -> str:
        image_id = " ".join((self.fs.read_text("etc/image-id", SMALL_CAP) or "").splitlines())
        return (f"hostname={_first_line(self.fs.read_text('etc/hostname', SMALL_CAP))}\n"
                f"machine_id={_first_line(self.fs.read_text('etc/machine-id', SMALL_CAP))}\n"
                f"image_id_file={image_id}")

    def os(self) -> tuple[str, int]:
        for path in ("etc/os-release", "usr/lib/os-release"):
            text = self.fs.read_text(path, SMALL_CAP)
            if text is not None:
                return text, 0
        return "", RC_NOT_AVAILABLE

    def kernel(self) -> str:
        names = set(self.fs.listdir("lib/modules") or []) | set(self.fs.listdir("usr/lib/modules") or [])
        return f"release={quote(max(names, key=_natural)) if names else ''}"

    def systemd_version(self) -> tuple[str, int]:
        dirs = list(SYSTEMD_LIBS)
        dirs += [f"usr/lib/{d}/systemd" for d in self.fs.listdir("usr/lib") or [] if _TRIPLET.match(d)][:16]
        for d in dirs:
            for name in self.fs.listdir(d) or []:
                if name.startswith("libsystemd-shared-") and name.endswith(".so"):
                    version = re.split(r"[.-]", name[len("libsystemd-shared-"):], maxsplit=1)[0]
                    return f"systemd {version}", 0
        if self.fs.is_dir("etc/systemd/system"):
            return "systemd unknown", 0
        return "", RC_NOT_AVAILABLE

    def _owner_name(self, uid: int) -> str:
        if self._owners is None:
            self._owners = {}
            for line in (self.fs.read_text("etc/passwd", SMALL_CAP) or "").splitlines():
                cols = line.split(":")
                if len(cols) > 2 and cols[2].isdigit():
                    self._owners.setdefault(int(cols[2]), cols[0])
        return self._owners.get(uid) or str(uid)

    def _find(self, name: str) -> str | None:
        if name.startswith("/"):
            return name
        alt = "amazon-ecs-init" if name == "ecs-init" else name
        for d in SEARCH_DIRS:
            for candidate in (f"{d}/{name}", f"{d}/{alt}"):
                st = self.fs.stat(candidate)
                if st is not None and st.st_mode & 0o111:
                    return candidate
        return None

    def _sha256(self, path: str) -> tuple[str, str | None]:
        """The file's sha256, or '' and why it was not computed (the row's `failed=` line)."""
        why: list[str] = []
        with self.fs.open_regular(path, why) as opened:
            if opened is None:
                return "", f"sha256 not computed: {why[0] if why else 'not readable'}"
            fd, st = opened
            if st.st_size > HASH_CAP:
                self.fs.note("truncated", path, f"not hashed: {st.st_size} bytes is over the {HASH_CAP}-byte cap")
                return "", f"sha256 not computed: {st.st_size} bytes is over the {HASH_CAP}-byte hash cap"
            digest = hashlib.sha256()
            try:
                while chunk := os.read(fd, 1 << 20):
                    digest.update(chunk)
                    self.check_time()
            except OSError as exc:
                return "", f"sha256 not computed: {exc.strerror or type(exc).__name__}"
            return digest.hexdigest(), None

    def _evidence_files(self) -> list[str]:
        files = []
        for pattern in EVIDENCE:
            if pattern.endswith("/*"):
                d = pattern[:-2]
                files += [f"{d}/{n}" for n in (self.fs.listdir(d, cap=1000) or [])]
            else:
                files.append(pattern)
        return files

    def _urls(self, names: set[str]) -> dict[str, list[str]]:
        """`url=FILE MATCH` lines per binary name, as the probe's grep -ohE … | head -n 5 gives them."""
        out: dict[str, list[str]] = {n: [] for n in names}
        pats = {n: _linear(r"(https?|s3)://[^ \"'<>]*/" + re2.escape(n) + r"([.][A-Za-z0-9]+)?([ \"'<>]|$)")
                for n in names}
        for f in self._evidence_files():
            text = self.fs.read_text(f, LOG_CAP)
            self.check_time()
            if not text:
                continue
            for n, pat in pats.items():
                hits: list[str] = []
                for line in text.splitlines():
                    if n in line:
                        hits += [m.group(0) for m in pat.finditer(line)]
                        if len(hits) >= 5:
                            break
                        self.check_time()
                out[n] += [f"url={quote(f)} {hit}" for hit in hits[:5]]
        return out

    def binaries_body(self) -> str:
        found = {b: self._find(b) for b in self.binaries}
        located = {b: p for b, p in found.items() if p and self._is_file(p)}
        real = {b: self.fs.realpath(p) or "" for b, p in located.items()}
        queries = {b: [p, p.removeprefix("/usr"), real[b]] for b, p in located.items()}
        dpkg = self.packages.dpkg_owners({q for qs in queries.values() for q in qs if q})
        urls = self._urls({p.rsplit("/", 1)[-1] for p in located.values()})
        lines = []
        for b in self.binaries:
            lines.append(f"@ {b}")
            p = located.get(b)
            st = self.fs.stat(p) if p else None
            if not p or st is None:
                lines.append("found=0")
                continue
            digest, failure = self._sha256(p)  # a binary left unhashed fails its row: never a complete host
            lines += ["found=1", f"path={p}", f"realpath={quote(real[b])}",
                      f"stat={st.st_size} {int(st.st_mtime)} {st.st_dev} {st.st_ino} "
                      f"{format(st.st_mode & 0o7777, 'o')} {self._owner_name(st.st_uid)}",
                      f"sha256={digest}"] + ([f"failed={failure}"] if failure else [])
            version = ""
            owner = next((dpkg[q] for q in queries[b] if q in dpkg), None)
            if owner:
                version = self.packages.dpkg_version(owner)
                lines += [f"dpkg_owner={owner}", f"dpkg_version={quote(version)}"]
            rpm = self.packages.rpm_owner(p)
            if rpm:
                lines.append(f"rpm_owner={rpm}")
                version = version or (rpm.split("\t") + [""])[1]
            # the version comes from package metadata only: an image's binaries are never run
            lines += [f"version={quote(version)}", f"version_source={'package' if version else 'none'}"]
            if self.exec_versions:
                lines.append("version_refused=an image's binaries are never run")
            lines += urls[p.rsplit("/", 1)[-1]]
        return "\n".join(lines)

    def _is_file(self, path: str) -> bool:
        st = self.fs.stat(path)
        return st is not None and (st.st_mode & 0o170000) == 0o100000

    def eks(self) -> str:
        return self.fs.read_text("etc/eks/release", SMALL_CAP) or ""

    def ecs(self) -> str:
        config = self.fs.read_text("etc/ecs/ecs.config", SMALL_CAP)
        lines = ["config_present=1" if config is not None else "config_present=0"]
        cluster = [ln.lstrip() for ln in (config or "").splitlines() if re.match(r"^\s*ECS_CLUSTER=", ln)]
        if cluster:
            lines.append(f"cluster_line={cluster[-1]}")
        logs = [n for n in self.fs.listdir("var/log/ecs") or [] if n == "ecs-init.log" or n.startswith("ecs-init.log.")]
        for name in sorted(logs, key=lambda n: n != "ecs-init.log"):
            text = self.fs.read_text(f"var/log/ecs/{name}", LOG_CAP)
            if text is None:
                continue
            exits = [ln for ln in text.splitlines() if "Agent exited with code" in ln]
            lines.append(f"log={quote('/var/log/ecs/' + name)} {len(exits)}")
            if exits:
                lines.append(f"last_exit={exits[-1]}")
        return "\n".join(lines)

    def _failed(self, fact: str, path: str, why: str) -> None:
        """A fact of the section being produced could not be read: named in it (a FAILED line), never an
        empty or "absent" answer; the section's other facts stand."""
        self._failures.setdefault((fact, why), []).append(quote(path))
        self._failed_paths.add("/" + "/".join(p for p in path.split("/") if p))

    def _regular(self, path: str, fact: str) -> stat_result | None:
        """The stat of a regular file as `[ -f ]` takes it; None when absent (or a directory). A path the
        reader refuses (a link loop, a FIFO, another filesystem, permission denied) fails `fact`."""
        st, why = self.fs.lookup(path)
        if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
            why = "not a regular file (FIFO, socket or device); not read"
            self.fs.note("refused", path, why)
            st = None
        if why:
            self._failed(fact, path, why)
        return st if st is not None and stat.S_ISREG(st.st_mode) else None

    def _text(self, path: str, cap: int, fact: str) -> str | None:
        """A regular file's text (None when absent); a refused or cut read fails `fact`."""
        if self._regular(path, fact) is None:
            return None
        why: list[str] = []
        text = self.fs.read_text(path, cap, why)
        if why and why[0] != NOT_FOUND:
            self._failed(fact, path, why[0])
        return text

    def _has_line(self, path: str, pattern: Any, fact: str = "credential_files") -> bool:
        text = self._text(path, SMALL_CAP, fact) or ""
        return any(pattern.search(line) for line in text.splitlines())

    def hygiene(self) -> str:
        """probe.sh's s_hygiene for an image: metadata only (no key, history or secret content kept). A file
        the reader refuses fails its fact by name (`_failed`); the section's other facts stand."""
        lines = ["image=1", f"cloud_instances={len(self.fs.listdir('var/lib/cloud/instances') or [])}"]
        failures = len(self._failed_paths)
        machine_id = self._text("/etc/machine-id", 64, "machine_id_state")
        first = "".join(_first_line(machine_id).split())
        state = "absent" if machine_id is None else first if first in ("", "uninitialized") else "populated"
        if len(self._failed_paths) == failures:  # refused: unknown, never "absent"
            lines.append(f"machine_id_state={state or 'empty'}")
        for name in self.fs.listdir("etc/ssh") or []:
            path = f"/etc/ssh/{name}"
            if not (name.startswith("ssh_host_") and name.endswith("_key")) or \
                    self._regular(path, "ssh_host_keys") is None:
                continue
            fp = "-"
            pub = self._text(path + ".pub", 65536, "ssh_host_keys") or ""
            blob = (pub.splitlines() or [""])[0].split()
            if len(blob) > 1 and _B64.match(blob[1]):
                try:
                    fp = hashlib.sha256(base64.b64decode(blob[1])).hexdigest()
                except ValueError:
                    fp = "-"
            lines.append(f"key\t{quote(name[len('ssh_host_'):-len('_key')])}\t{fp}\t{quote(path)}")
        for path in ("/root/.ssh/authorized_keys", "/root/.ssh/authorized_keys2"):
            text = self._text(path, LOG_CAP, "root_authorized_keys")
            if text is not None:
                count = sum(1 for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
                lines.append(f"authorized\t{count}\t{path}")
        homes = ["/root"] + [f"/home/{n}" for n in self.fs.listdir("home", cap=1000) or []]
        for home in homes:
            if not self.fs.is_dir(home):
                continue
            for name in HISTORIES:
                st = self._regular(f"{home}/{name}", "shell_histories")
                if st is not None:
                    lines.append(f"history\t{st.st_size}\t{quote(home + '/' + name)}")
            for rel, kind in CREDENTIAL_FILES:
                st = self._regular(f"{home}/{rel}", "credential_files")
                if st is not None and st.st_size > 0:
                    lines.append(f"credential\t{kind}\t{quote(home + '/' + rel)}")
            if self._has_line(f"{home}/.aws/config", _AWS_CONFIG_SECRET):
                lines.append(f"credential\taws-credentials\t{quote(home + '/.aws/config')}")
            if self._has_line(f"{home}/.docker/config.json", _DOCKER_AUTH):
                lines.append(f"credential\tdocker-auth\t{quote(home + '/.docker/config.json')}")
        env_files = ["/etc/environment", "/etc/ecs/ecs.config"]
        for d in ("default", "sysconfig", "profile.d"):
            env_files += [f"/etc/{d}/{n}" for n in self.fs.listdir(f"etc/{d}", cap=1000) or []
                          if d != "profile.d" or n.endswith(".sh")]
        for path in sorted(env_files):
            if self._regular(path, "credential_files") is None:
                continue
            if self._has_line(path, _AWS_KEY_ID):
                lines.append(f"credential\taws-access-key-id\t{quote(path)}")
            if self._has_line(path, _SECRET_VARIABLE):
                lines.append(f"credential\tsecret-variable\t{quote(path)}")
            self.check_time()
        for path in PACKAGE_CACHES:
            why: list[str] = []
            kb = self.fs.disk_usage(path, why=why)
            if why:  # a sum short of what is there is no size: unknown, and named
                self._failed("package_caches", path, "; ".join(why))
            if kb is not None:
                lines.append(f"cache\t{'' if why else kb}\t{path}")
            self.check_time()
        return "\n".join(lines)

    def _packages(self) -> tuple[str, int]:
        body, rc = self.packages.section()
        if self.packages.status_failure:
            self._failed("packages", "/var/lib/dpkg/status", self.packages.status_failure)
        return body, rc

    def _producers(self) -> dict[str, Callable[[], str | tuple[str, int]]]:
        """What the image reader prints for each section that is not runtime state (section_list.py)."""
        return {
            "meta": lambda: f"probe_version=1\nreader=image\nuid={os.getuid()}\nshell=\ndate_epoch={int(time.time())}",
            "identity": self.identity,
            "os": self.os,
            "kernel": self.kernel,
            "systemd_version": self.systemd_version,
            "unit_files": lambda: list_unit_files(self.fs),
            "units": lambda: "",  # an unbooted image has no runtime state: no units, not an error
            "restart_journal": lambda: "",
            "binaries": self.binaries_body,
            "eks": self.eks,
            "ecs": self.ecs,
            "hygiene": self.hygiene,
            "packages": self._packages,
            "config": lambda: ConfigReader(self.fs, self.check_time).section(),
            "kernels": lambda: kernels_section(self.fs, self.check_time),
        }

    def _with_failures(self, body: str, notes: list[Note]) -> str:
        """`body` and a FAILED line per read this section could not make: its producer's named facts, then
        every other refused or cut read noted while it ran (escapes are read as chroot would: no failure).
        With status 0 the section's other facts stand (collectors.py `_partial`)."""
        named = [f"{fact} not read: {paths[0]}{f' (and {len(paths) - 1} more)' if len(paths) > 1 else ''}: {why}"
                 for (fact, why), paths in self._failures.items()]  # a home it may not enter: once per fact
        reasons = named + [n.line() for n in notes if n.kind != "escape" and n.path not in self._failed_paths]
        return "\n".join([body, *(framing.failed_marker(self.nonce, r) for r in reasons)]) if reasons else body

    def text(self) -> str:
        """Every section of the one section list, in its order; runtime ones "not applicable" (RC_OFFLINE)."""
        started = time.process_time()
        producers = self._producers()
        out = []
        late = False  # the deadline has passed: this section and every one after it timed out
        for spec in SECTIONS:
            if spec.runtime:
                body, rc = "", RC_OFFLINE
            elif spec.name == "cost":
                cpu = time.process_time() - started
                body, rc = f"0m{cpu:.3f}s 0m0.000s\n0m0.000s 0m0.000s", 0
            elif spec.name == CONFINEMENT:  # what was refused, the deadline notwithstanding
                body, rc = "\n".join(n.line() for n in self.fs.notes), 0
            elif late:
                body, rc = "", RC_TIMED_OUT
            else:
                noted = len(self.fs.notes)
                self._failures, self._failed_paths = {}, set()
                try:
                    self.check_time()
                    result = producers[spec.name]()
                    body, rc = result if isinstance(result, tuple) else (result, 0)
                except ProbeTimeout:
                    late, body, rc = True, "", RC_TIMED_OUT
                body = self._with_failures(body, self.fs.notes[noted:])
            out.append(framing.section_text(self.nonce, spec.name, body, rc))
        out.append(framing.done_marker(self.nonce) + "\n")
        return "".join(out)
