"""One JSON file loader for reports, history and snapshots: bounded, strict, errors name file and line or pointer.

Refused with exit 2: files over the size cap (read bounded, never whole first), non-regular files, invalid
UTF-8 (line), syntax errors (line), NaN/Infinity/-Infinity, integers too long to convert, lone surrogates
(`"\\ud800"`) in keys or strings, and nesting deeper than MAX_DEPTH (JSON pointer, or line).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from .errors import InputError
from .inputfile import MAX_DEPTH, MAX_INT_DIGITS, MAX_JSON_BYTES, line_at, read_text

_SURROGATE = re.compile("[\\ud800-\\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class _Refused:
    """Stands in for a value json must not produce (NaN, Infinity, an over-long integer) until the walk
    below finds where it is."""

    def __init__(self, message: str):
        self.message = message


def _constant(name: str) -> _Refused:
    return _Refused(f"{name} is not a JSON number (NaN and Infinity are refused)")


def _integer(text: str) -> int | _Refused:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return _Refused(f"integer with {len(text.lstrip('-'))} digits is too long (limit {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float | _Refused:
    value = float(text)
    return _Refused(f"number {text[:40]} is out of range") if math.isinf(value) else value


def json_pointer(parts: Any) -> str:
    """RFC 6901 pointer for a path of keys and indexes ('' is the whole document)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _pointer_text(parts: Any) -> str:
    pointer = json_pointer(parts)
    return f"at JSON pointer {pointer}" if pointer else "at the top level"


def _deep_line(text: str, limit: int) -> int | None:
    """Line where nesting first exceeds `limit` (strings skipped)."""
    depth = 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > limit:
                return line_at(text, m.start())
        elif tok in "]}":
            depth -= 1
    return None


def _check(doc: Any, path: str, surrogates: bool) -> None:
    """Walk the document iteratively: depth, refused numbers, lone surrogates → InputError with a pointer."""
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(doc, 0, ())]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, _Refused):
            raise InputError(f"{_pointer_text(where)}: {value.message}", path)
        if isinstance(value, str):
            if surrogates and _SURROGATE.search(value):
                raise InputError(f"{_pointer_text(where)}: string contains a lone surrogate (U+D800..U+DFFF)", path)
            continue
        if isinstance(value, (dict, list)):
            if depth >= MAX_DEPTH:
                raise InputError(f"{_pointer_text(where)}: nested deeper than {MAX_DEPTH} levels", path)
            if isinstance(value, dict):
                for key, item in value.items():
                    if surrogates and _SURROGATE.search(key):
                        raise InputError(f"{_pointer_text(where)}: a key contains a lone surrogate (U+D800..U+DFFF)",
                                         path)
                    stack.append((item, depth + 1, (*where, key)))
            else:
                stack.extend((item, depth + 1, (*where, i)) for i, item in enumerate(value))


def load_json_text(text: str, path: str = "<string>") -> Any:
    """Parse and check JSON text (see module doc)."""
    try:
        doc = json.loads(text, parse_constant=_constant, parse_int=_integer, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path, exc.lineno) from None
    except RecursionError:
        raise InputError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels", path,
                         _deep_line(text, MAX_DEPTH)) from None
    _check(doc, path, bool(_SURROGATE_ESCAPE.search(text)))
    return doc


def load_json_file(path: str | Path, limit: int = MAX_JSON_BYTES) -> Any:
    """Read (at most `limit` bytes, regular files only) and parse a JSON document; InputError on any problem."""
    p = str(path)
    return load_json_text(read_text(p, limit), p)
