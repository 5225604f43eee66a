"""Load YAML keeping line numbers, so every bad-input error can name the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import InputError


class LineDict(dict):
    """A dict that remembers the 1-based line of itself (`line`) and of each key (`key_lines`)."""

    line: int = 0
    key_lines: dict[Any, int]

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)


class LineList(list):
    """A list that remembers its own line and the line of each item (`item_lines`)."""

    line: int = 0
    item_lines: list[int]

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if index < len(self.item_lines) else self.line


class _LineLoader(yaml.SafeLoader):
    """SafeLoader whose mappings and sequences carry line numbers."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError as exc:
            raise InputError("mapping key is not a scalar", None, key_node.start_mark.line + 1) from exc
        if key in out:
            raise _DuplicateKey(key, key_node.start_mark.line + 1)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int):
        self.key = key
        self.line = line


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml_text(text: str, path: str = "<string>") -> Any:
    """Parse YAML text; syntax errors and duplicate keys become InputError(path, line)."""
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - SafeLoader subclass
    except _DuplicateKey as exc:
        raise InputError(f"duplicate key {exc.key!r}", path, exc.line) from None
    except InputError as exc:
        raise InputError(exc.message, path, exc.line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or str(exc)
        raise InputError(f"invalid YAML: {problem}", path, line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", path) from None


def load_yaml_file(path: str | Path) -> Any:
    """Read and parse a YAML file; unreadable files are InputError too."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", str(p)) from None
    return load_yaml_text(text, str(p))


def line_of(node: Any, key: Any = None) -> int | None:
    """Best-effort line of `node` (or of `node[key]`) when it came from load_yaml_*."""
    if key is not None and isinstance(node, (LineDict, LineList)):
        return node.line_of(key)
    return getattr(node, "line", None)


def reject_unknown_keys(node: LineDict, allowed: frozenset[str] | set[str], path: str, what: str = "") -> None:
    """InputError at the line of the first (alphabetically) key of `node` not in `allowed`."""
    unknown = sorted(set(node) - allowed)
    if unknown:
        where = f" in {what}" if what else ""
        raise InputError(f"unknown key {unknown[0]!r}{where} (allowed: {', '.join(sorted(allowed))})", path,
                         node.line_of(unknown[0]))
