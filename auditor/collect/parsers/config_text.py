"""Configuration files as the `config` section carries them, and the readers every format shares: the
`@ KIND PATH` blocks, systemd's directory precedence, systemd-style INI, TOML, JSON and YAML (a file that is not
valid in its format is a fact, `parse_error`, not a failed read)."""

from __future__ import annotations

import json
import posixpath
import sys

import yaml

from ...facttypes import ConfigFilesRow
from ..config_files import SYSTEMD_DIRS
from ..sections import UnparsableOutput, blocks

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

_TRUE = {"1", "yes", "y", "true", "t", "on"}
_FALSE = {"0", "no", "n", "false", "f", "off"}


def boolean(value: object) -> bool | None:
    """systemd's and dnf's boolean words (yes/no, true/false, on/off, 1/0); None for anything else."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().strip('"').lower() if value is not None else ""
    return True if word in _TRUE else False if word in _FALSE else None


class File:
    """One file of the section: its kind, path, kept lines and how reading it went."""

    def __init__(self, kind: str, path: str) -> None:
        self.kind = kind
        self.path = path
        self.lines: list[str] = []
        self.truncated = False
        self.error: str | None = None
        self.parse_error: str | None = None

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def row(self) -> ConfigFilesRow:
        return {"path": self.path, "kind": self.kind, "bytes": sum(len(ln) + 1 for ln in self.lines),
                "truncated": self.truncated, "parse_error": self.parse_error, "error": self.error}


def read_files(text: str) -> tuple[list[File], dict[str, str]]:
    """The section's `@ KIND PATH` blocks (`|` lines kept) and its top-level `key=value` lines."""
    files: list[File] = []
    extra: dict[str, str] = {}
    head, _, _ = text.partition("\n@ ")
    for line in ([] if text.startswith("@ ") else head.splitlines()):
        if "=" in line:
            extra[line.split("=", 1)[0]] = line.split("=", 1)[1]
        elif line.strip():
            raise UnparsableOutput(f"config section line {line[:60]!r} is no file block")
    for header, body in blocks(text):
        kind, _, path = header.partition(" ")
        if not kind or not path.startswith("/"):
            raise UnparsableOutput(f"config block header {header[:80]!r} names no kind and path")
        f = File(kind, path)
        for line in body:
            if line.startswith("|"):
                f.lines.append(line[1:])
            elif line == "!truncated":
                f.truncated = True
            elif line.startswith("failed="):
                f.error = line[7:].strip() or "could not be read"
            elif line.startswith("resolv_link="):
                extra["resolv_link"] = line.split("=", 1)[1]
            elif line.strip():
                raise UnparsableOutput(f"config file {path[:80]!r}: line {line[:60]!r} is not file text")
        files.append(f)
    return files, extra


def dir_rank(path: str, dirs: tuple[str, ...]) -> int:
    for i, d in enumerate(dirs):
        if path.startswith(d + "/"):
            return i
    return len(dirs)


def by_precedence(files: list[File], dirs: tuple[str, ...] = SYSTEMD_DIRS) -> list[File]:
    """One file per name, the one in the earliest directory, in name order (systemd's conf.d rules)."""
    chosen: dict[str, File] = {}
    for f in sorted(files, key=lambda f: dir_rank(f.path, dirs)):
        chosen.setdefault(f.name, f)
    return [chosen[n] for n in sorted(chosen)]


def ini(lines: list[str]) -> list[tuple[str, str, str]]:
    """systemd-style INI as (section, key, value) in file order; `\\` continues a line."""
    out: list[tuple[str, str, str]] = []
    section = ""
    pending = ""
    for raw in lines:
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif "=" in line:
            key, _, value = line.partition("=")
            out.append((section, key.strip(), value.strip()))
    return out


def deep_merge(base: dict[str, object], over: dict[str, object]) -> dict[str, object]:
    out = dict(base)
    for k, v in over.items():
        mine = out.get(k)
        out[k] = deep_merge(mine, v) if isinstance(v, dict) and isinstance(mine, dict) else v
    return out


def dig(doc: object, *keys: str) -> object:
    for k in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(k)
    return doc


def toml_doc(f: File) -> dict[str, object] | None:
    try:
        doc: dict[str, object] = tomllib.loads(f.text)  # tomli (Python 3.10) is untyped here
        return doc
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        f.parse_error = f"not valid TOML: {str(exc)[:200]}"
        return None


def json_doc(f: File) -> object:
    try:
        return json.loads(f.text)
    except (ValueError, RecursionError) as exc:
        f.parse_error = f"not valid JSON: {str(exc)[:200]}"
        return None


def yaml_doc(f: File) -> object:
    try:
        return yaml.load(f.text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError) as exc:
        f.parse_error = f"not valid YAML: {' '.join(str(exc).split())[:200]}"
        return None


SCALARS = (str, int, float, bool)


def as_text(value: object) -> str | None:
    """A scalar setting as text; None for anything else (a YAML alias can make a list whose text is huge)."""
    return str(value) if isinstance(value, SCALARS) else None
