"""Which rule-pack files a run reads (built-in packs, then each --rules DIR or file), found without reading them."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ..errors import InputError
from ..resources import builtin_rules_dir


def rule_files(dirs: Iterable[str | Path], builtin: bool = True) -> list[Path]:
    """Built-in packs (unless `builtin` is False) then each DIR's *.yaml/*.yml (or a single file)."""
    out: list[Path] = []
    if builtin:
        out.extend(sorted(builtin_rules_dir().glob("*.yaml")))
    for d in dirs:
        p = Path(d)
        kind = _kind(p)
        if kind == "dir":
            found = sorted([*p.glob("*.yaml"), *p.glob("*.yml")])
            if not found:
                raise InputError("no *.yaml rule files in this directory", str(p))
            for f in found:  # every entry must be a regular file (or a link to one): no loops, FIFOs, devices
                if _kind(f) != "file":
                    raise InputError(_KIND_TEXT.get(_kind(f), "dangling symlink (no such file)"), str(f))
            out.extend(found)
        elif kind == "file":
            out.append(p)
        else:
            raise InputError(_KIND_TEXT.get(kind, "no such rules file or directory"), str(p))
    return out


def builtin_files() -> set[Path]:
    """The shipped packs, resolved: a pack read from there is built-in however it is named (`rules check rules/`)."""
    try:
        return {p.resolve() for p in rule_files([], builtin=True)}
    except FileNotFoundError:  # installed without its rules/ data: no pack is built-in
        return set()


_KIND_TEXT = {"loop": "symlink loop (too many levels of symbolic links)", "dir": "a directory, not a regular file",
              "other": "not a regular file (a FIFO, device or socket)"}


def _kind(path: Path) -> str:
    """'file', 'dir', 'loop', 'other' or 'missing' (following links, never opening the file)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "loop" if exc.errno == errno.ELOOP else "missing"
    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"
