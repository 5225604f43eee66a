"""`systemctl list-unit-files` for an unbooted image, computed in Python from the image's files.

Same lookup order and states as systemd 252 (masked, alias, linked, enabled, enabled-runtime,
transient, disabled, indirect, static, and `bad` for a unit file that cannot be read) with the vendor
preset column. Everything is read through `ImageFS`, so a unit link cannot reach the scanner's files,
and no scanner binary parses the image's unit files. Enablement links are only read (readlink), never
followed; a mask is recognised by its link text `/dev/null` (the image's /dev is usually empty).

Time: every read checks the run's deadline (ImageFS); preset rules are indexed once (exact names in a
dict, each glob compiled at most once and only when its literal prefix and suffix fit the unit), so a
preset file of tens of thousands of globs costs one pass, not one compile per rule and unit.
"""

from __future__ import annotations

import fnmatch
import re
import stat
from collections.abc import Callable

from .fs import ImageFS
from .text import field

UNIT_DIRS: tuple[tuple[str, str], ...] = (  # (dir, kind) in systemd's system-scope search order
    ("etc/systemd/system.control", "config"),
    ("run/systemd/system.control", "runtime"),
    ("run/systemd/transient", "transient"),
    ("etc/systemd/system", "config"),
    ("etc/systemd/system.attached", "config"),
    ("run/systemd/system", "runtime"),
    ("run/systemd/system.attached", "runtime"),
    ("usr/local/lib/systemd/system", "vendor"),
    ("usr/lib/systemd/system", "vendor"),
    ("lib/systemd/system", "vendor"),
)
PRESET_DIRS = ("etc/systemd/system-preset", "run/systemd/system-preset", "usr/local/lib/systemd/system-preset",
               "usr/lib/systemd/system-preset", "lib/systemd/system-preset")
SUFFIXES = (".service", ".socket", ".target", ".timer", ".path", ".mount", ".automount", ".swap", ".slice",
            ".scope", ".device")
UNIT_CAP = 1 << 20
NO_PRESET = ("alias", "static", "generated", "transient")


def _install(text: str) -> dict[str, list[str]]:
    """The [Install] section's list settings (later lines add; an empty assignment resets)."""
    out: dict[str, list[str]] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Install" or "=" not in line:
            continue
        key, value = (s.strip() for s in line.split("=", 1))
        if value:
            out.setdefault(key, []).extend(value.split())  # in place: a copy per line is quadratic
        else:
            out[key] = []
    return out


def _template(name: str) -> str | None:
    """`getty@tty1.service` → `getty@.service` (None when not an instance)."""
    at, dot = name.find("@"), name.rfind(".")
    if at < 0 or dot < at + 2:
        return None
    return name[: at + 1] + name[dot:]


def _presets(fs: ImageFS) -> list[tuple[str, str, list[str]]]:
    files: dict[str, str] = {}
    for d in PRESET_DIRS:
        for name in fs.listdir(d) or []:
            if name.endswith(".preset"):
                files.setdefault(name, f"{d}/{name}")
    rules = []
    for name in sorted(files):
        for line in (fs.read_text(files[name], UNIT_CAP) or "").splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("enable", "disable", "ignore"):
                rules.append((words[0], words[1], words[2:]))
    return rules


_GLOB = re.compile(r"[*?\[]")  # what makes a preset pattern a glob for fnmatch
_GLOB_PARTS = re.compile(r"[*?\[\]]")  # the literal tail is what follows the last of these
_CHECK_EVERY = 1024  # glob rules tried between two deadline checks


class _Glob:
    """One glob rule: its literal ends rule most names out before the pattern is compiled (once)."""

    def __init__(self, index: int, pattern: str):
        self.index = index
        self.pattern = pattern
        self.prefix = pattern[:_GLOB.search(pattern).start()]  # type: ignore[union-attr]
        self.suffix = _GLOB_PARTS.split(pattern)[-1]
        self._match: Callable[[str], object] | None = None

    def hits(self, name: str) -> bool:
        if not (name.startswith(self.prefix) and name.endswith(self.suffix)):
            return False
        if self._match is None:
            self._match = re.compile(fnmatch.translate(self.pattern)).match
        return self._match(name) is not None


class _Presets:
    """systemd's preset lookup (the first rule that matches wins), indexed once per image."""

    def __init__(self, rules: list[tuple[str, str, list[str]]], check_time: Callable[[], None]):
        self.verbs = [verb for verb, _, _ in rules]
        self.check_time = check_time
        self.exact: dict[str, int] = {}  # unit name → its first rule without a glob
        self.instances: dict[str, list[tuple[int, frozenset[str]]]] = {}  # template → rules listing instances
        self.globs: list[_Glob] = []
        for i, (_, pattern, instances) in enumerate(rules):
            if _GLOB.search(pattern):
                self.globs.append(_Glob(i, pattern))
            else:
                self.exact.setdefault(pattern, i)
                if instances:
                    self.instances.setdefault(pattern, []).append((i, frozenset(instances)))

    def first(self, name: str) -> int | None:
        best = self.exact.get(name)
        template = _template(name)
        if template:
            instance = name[name.find("@") + 1: name.rfind(".")]
            for i, names in self.instances.get(template, []):
                if best is not None and i >= best:
                    break
                if instance in names:
                    best = i
                    break
        for n, glob in enumerate(self.globs):
            if best is not None and glob.index >= best:
                break
            if n % _CHECK_EVERY == 0:
                self.check_time()
            if glob.hits(name):
                return glob.index
        return best

    def state(self, name: str) -> str:
        i = self.first(name)
        if i is None:
            return "enabled"
        return {"enable": "enabled", "disable": "disabled"}.get(self.verbs[i], "ignored")


def _enabled(fs: ImageFS) -> dict[str, str]:
    """Units linked into .wants/.requires/.upholds or aliased in the config dirs → enabled[-runtime]."""
    out: dict[str, str] = {}
    for d, kind in UNIT_DIRS:
        if kind not in ("config", "runtime"):
            continue
        state = "enabled" if kind == "config" else "enabled-runtime"
        for entry in fs.listdir(d) or []:
            if entry.endswith((".wants", ".requires", ".upholds")):
                for link in fs.listdir(f"{d}/{entry}") or []:
                    target = fs.readlink(f"{d}/{entry}/{link}")
                    if target:
                        for name in (target.rsplit("/", 1)[-1], link):
                            out.setdefault(name, state)
    return out


class _Lister:
    def __init__(self, fs: ImageFS):
        self.fs = fs
        self.enabled = _enabled(fs)
        self.presets = _Presets(_presets(fs), fs.check_time)
        self.dirs: list[tuple[str, str]] = []
        seen = set()
        for d, kind in UNIT_DIRS:
            st = fs.stat(d)
            if st is not None and stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                self.dirs.append((d, kind))
        self.real_dirs = {fs.realpath(d) for d, _ in self.dirs}
        self.aliases: dict[str, str] = {}  # alias link in a config dir → the unit it names
        self.first: dict[str, tuple[str, str]] = {}  # unit name → (dir, kind) of its first file

    def state(self, d: str, kind: str, name: str, depth: int = 0) -> str:
        path = f"{d}/{name}"
        st = self.fs.lstat(path)
        if st is None:
            return "bad"
        if stat.S_ISLNK(st.st_mode):
            if self.fs.readlink(path) == "/dev/null":
                return "masked-runtime" if kind == "runtime" else "masked"
            real = self.fs.realpath(path)
            if real is None:
                return "bad"
            base = real.rsplit("/", 1)[-1]
            if base != name and not _template(name):
                if kind in ("config", "runtime"):
                    self.aliases[name] = base
                # systemd follows an alias by name through the search path: an alias of a masked unit is masked
                target = self.first.get(base)
                if target and depth < 8 and self.state(*target, base, depth + 1).startswith("masked"):
                    return self.state(*target, base, depth + 1)
                return "alias"
            if real.rsplit("/", 1)[0] not in self.real_dirs:
                return "linked-runtime" if kind == "runtime" else "linked"
        st = self.fs.stat(path)
        if st is None or not stat.S_ISREG(st.st_mode):
            return "bad"
        if st.st_size == 0:
            return "masked-runtime" if kind == "runtime" else "masked"
        if kind == "transient":
            return "transient"
        text = self.fs.read_text(path, UNIT_CAP)
        if text is None:
            return "bad"
        install = _install(text)
        found = self.enabled.get(name)
        if found is None and any(self.aliases.get(a) == name for a in install.get("Alias", [])):
            found = "enabled"
        if found:
            return found
        if any(install.get(k) for k in ("WantedBy", "RequiredBy", "UpheldBy", "Alias")):
            return "disabled"
        return "indirect" if install.get("Also") else "static"

    def lines(self) -> list[str]:
        first = self.first
        for d, kind in self.dirs:
            for name in self.fs.listdir(d) or []:
                if name.endswith(SUFFIXES) and not name.startswith("."):
                    first.setdefault(name, (d, kind))
        # config-dir aliases first, so the units they name count as enabled
        order = sorted(first, key=lambda n: (first[n][1] not in ("config", "runtime"), n))
        rows = {}
        for name in order:
            d, kind = first[name]
            state = self.state(d, kind, name)
            preset = "-" if state in NO_PRESET else self.presets.state(name)
            rows[name] = f"{field(name)} {state} {preset}"  # a name is one field whatever bytes it holds
        return [rows[n] for n in sorted(rows)]


def list_unit_files(fs: ImageFS) -> str:
    """`UNIT STATE PRESET` lines, like `systemctl --root=IMAGE list-unit-files --no-legend`."""
    return "\n".join(_Lister(fs).lines())
