"""The `config` and `kernels` sections for an unbooted image: the same files as probe.sh's s_config and
s_kernels (collect/config_files.py), read through the confined ImageFS, in the probe's body format."""

from __future__ import annotations

import re
from collections.abc import Callable
from fnmatch import fnmatchcase

from ..collect.config_files import CONF_MAX, FILES, GLOB_MAX
from .fs import ImageFS
from .text import quote

READ_CAP = 1 << 20  # bytes of one file read before its comment lines are left out
_SKIP = re.compile(r"^[ \t\n\v\f\r]*([#;]|//|$)")
_SECRET = re.compile(r"^[ \t\n\v\f\r]*[a-z_]*(password|passwd|secret|token|auth)[a-z_]*[ \t\n\v\f\r]*=", re.I)
# what the kubelet unit's --config may name (probe.sh kubelet_config_flag)
_CONFIG_FLAG = re.compile(r"--config[= ]+([^ \"'$]+)")
_CONFIG_PATH = re.compile(r"^/(etc|var/lib|run)/[A-Za-z0-9_./-]+\.(ya?ml|json|conf)$")


def _is_regular(fs: ImageFS, path: str) -> bool:
    st = fs.stat(path)
    return st is not None and (st.st_mode & 0o170000) == 0o100000


def _matches(fs: ImageFS, pattern: str) -> list[str]:
    """Regular files a shell glob of fixed patterns matches (a `*` in the last two components), in C order."""
    if "*" not in pattern:
        return [pattern] if _is_regular(fs, pattern) else []
    head, _, leaf = pattern.rpartition("/")
    dirs = [head]
    if "*" in head:
        parent, _, dir_glob = head.rpartition("/")
        dirs = [f"{parent}/{n}" for n in sorted(fs.listdir(parent) or [], key=_c_order) if fnmatchcase(n, dir_glob)
                and not n.startswith(".")]
    out = []
    for d in dirs:
        names = sorted(fs.listdir(d) or [], key=_c_order)
        out += [f"{d}/{n}" for n in names if fnmatchcase(n, leaf) and not n.startswith(".")]
    return [p for p in out if _is_regular(fs, p)][:GLOB_MAX]


def _c_order(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def _body(text: str) -> list[str]:
    out, size = [], 0
    for line in text.split("\n"):
        if _SKIP.match(line) or _SECRET.match(line):
            continue
        size += len(line.encode("utf-8", "replace")) + 1
        if size > CONF_MAX:
            out.append("!truncated")
            break
        out.append("|" + line)
    return out


class ConfigReader:
    """One pass over an image's configuration files."""

    def __init__(self, fs: ImageFS, check_time: Callable[[], None]) -> None:
        self.fs = fs
        self.check_time = check_time
        self.seen: set[str] = set()
        self.kubelet_text: list[str] = []

    def _file(self, kind: str, path: str) -> list[str]:
        if path in self.seen:
            return []
        self.seen.add(path)
        self.check_time()
        lines = [f"@ {kind} {quote(path)}"]
        why: list[str] = []
        with self.fs.open_regular(path, why) as opened:
            ok = opened is not None
        data = self.fs.read(path, READ_CAP) if ok else None
        if data is None:
            return lines + [f"failed=read {quote(path)}: {why[0] if why else 'could not be read'}"]
        body = _body(data.decode("utf-8", "replace"))
        if kind == "kubelet-env" or (kind == "unit" and ("/kubelet.service" in path)):
            self.kubelet_text += [ln[1:] for ln in body if ln.startswith("|")]
        return lines + body

    def section(self) -> str:
        out: list[str] = []
        merged_usr = self.fs.readlink("/lib") is not None
        for kind, patterns in FILES:
            for pattern in patterns:
                if merged_usr and pattern.startswith("/lib/"):
                    continue
                for path in _matches(self.fs, pattern):
                    out += self._file(kind, path)
            if kind == "kubelet":
                for named in self._config_flags():
                    if _is_regular(self.fs, named):
                        out += self._file("kubelet", named)
            if kind == "resolv":
                link = self.fs.readlink("/etc/resolv.conf")
                if link is not None:
                    out.append(f"resolv_link={quote(link)}")
        return "\n".join(out)

    def _config_flags(self) -> list[str]:
        found: list[str] = []
        for line in self.kubelet_text:
            for value in _CONFIG_FLAG.findall(line):
                if _CONFIG_PATH.match(value) and ".." not in value and value not in found:
                    found.append(value)
        return found


def kernels_section(fs: ImageFS, check_time: Callable[[], None]) -> str:
    """Installed kernels (/lib/modules/*) and those with an nvidia.ko* within four levels of their directory."""
    lines = []
    for release in sorted(fs.listdir("/lib/modules") or [], key=_c_order):
        if not fs.is_dir(f"/lib/modules/{release}"):
            continue
        lines.append(f"release {quote(release)}")
        if _has_nvidia(fs, f"/lib/modules/{release}", 4, check_time):
            lines.append(f"nvidia {quote(release)}")
    return "\n".join(lines)


def _has_nvidia(fs: ImageFS, path: str, depth: int, check_time: Callable[[], None]) -> bool:
    names = fs.listdir(path) or []
    if any(n.startswith("nvidia.ko") for n in names):
        return True
    if depth <= 1:
        return False
    check_time()
    return any(_has_nvidia(fs, f"{path}/{n}", depth - 1, check_time) for n in names
               if fs.readlink(f"{path}/{n}") is None and fs.is_dir(f"{path}/{n}"))
