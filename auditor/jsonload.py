"""One JSON file loader for reports, history and snapshots: bounded, strict, errors name file and line or pointer.

Refused with exit 2: files over the size cap (read bounded, never whole first), non-regular files, invalid
UTF-8 (line), syntax errors (line), NaN/Infinity/-Infinity, integers too long to convert, lone surrogates
(`"\\ud800"`) in keys or strings, and nesting deeper than MAX_DEPTH (JSON pointer, or line).

Fast path: orjson (a C/Rust parser, several times the stdlib path below with its hooks and walk) parses what a
cheap byte-level screen lets through. orjson itself refuses NaN/Infinity, out-of-range floats, invalid
UTF-8, a BOM, lone surrogates (escaped or not) and syntax errors. The screen sends to the stdlib path what
orjson would read differently or must not see: nesting deeper than MAX_DEPTH (orjson 3.8 has no limit and
overflows the C stack at ~100,000 levels), integers of 19+ digits (past 64 bits orjson makes them
floats) and, to be safe whatever orjson does, any surrogate escape. Whatever orjson refuses goes to the
stdlib path too, which gives the same document or the stdlib path's exact InputError. So both paths accept the same
texts and give the same documents (tests/unit/test_jsonload.py compares them on hostile and fuzzed texts).
"""

from __future__ import annotations

import bisect
import json
import math
import re
from pathlib import Path
from typing import Any

from .errors import InputError
from .inputfile import MAX_DEPTH, MAX_INT_DIGITS, MAX_JSON_BYTES, decode_utf8, line_at, read_bounded

_SURROGATE = re.compile("[\\ud800-\\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_THIRD = frozenset(bytes([c]) for c in b"89abcdefABCDEF")
# _structure keeps quotes, brackets (all as [ ]) and, when a quote is escaped, backslashes and the letters
# that can follow one
_ESCAPE_LETTERS = b"bfnrtu/"
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'"[]{}')))
_NOT_STRUCTURE_OR_ESCAPE = bytes(sorted(set(_NOT_STRUCTURE) - set(b"\\" + _ESCAPE_LETTERS)))
_BRACKET = bytes.maketrans(b"{}", b"[]")
_DIGIT = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))  # digits as 0, all else as space
_LONG_RUN = b"0" * 19  # orjson reads an integer past 64 bits (19+ digits) as a float
_BEFORE_NUMBER = frozenset(b" \t\r\n[,:-+.eE")  # what a digit outside a string can follow
_SLOW = object()  # _fast_load's "ask the stdlib path"


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


def _escapes(data: bytes) -> tuple[list[int] | None, bool]:
    """Where the text escapes a quote (None: not known, past 256 escapes), and whether it has a surrogate
    escape (`\\ud800`), stepping from escape to escape (a backslash and the character it escapes)."""
    start = data.find(b"\\")
    quotes: list[int] = []
    surrogate = False
    for _ in range(256):
        if start < 0:
            return quotes, surrogate
        escaped = data[start + 1:start + 3]
        if escaped.startswith(b'"'):
            quotes.append(start + 1)
        surrogate = surrogate or escaped in (b"ud", b"uD") and data[start + 3:start + 4] in _SURROGATE_THIRD
        start = data.find(b"\\", start + 2)
    return None, bool(_SURROGATE_ESCAPE_BYTES.search(data))


def _structure(data: bytes, escaped_quotes: list[int] | None) -> bytes:
    """The brackets a JSON parser nests by (strings left out, all as [ ]). Works on any bytes: up to where
    a parser would stop on an error, these are the brackets it sees.

    Once the escaped quotes are gone (`escaped_quotes`, from _escapes), every quote opens or closes a
    string: a string without brackets is an adjacent pair of quotes, all removed by one replace; if a quote
    is left, some string held a bracket, and splitting at the quotes drops the strings. Past 256 escapes
    (None) escaped backslashes and quotes are paired off in the text itself (the letters that can follow a
    backslash are kept so that only real pairs touch)."""
    if escaped_quotes is None:
        marks = data.translate(_BRACKET, _NOT_STRUCTURE_OR_ESCAPE)
        marks = marks.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, b"\\" + _ESCAPE_LETTERS)
    else:
        if escaped_quotes:
            ends = [*escaped_quotes, len(data)]
            data = b"".join([data[:ends[0]], *(data[a + 1:b] for a, b in zip(ends, ends[1:]))])
        marks = data.translate(_BRACKET, _NOT_STRUCTURE)
    marks = marks.replace(b'""', b"")
    return b"".join(marks.split(b'"')[::2]) if b'"' in marks else marks


def _deeper_than(brackets: bytes, limit: int) -> bool:
    """Whether a bracket string may nest more than `limit` deep (an unbalanced one counts as deep): one
    replace of "[]" removes exactly the innermost level, so `limit` of them clear any shallower one."""
    if brackets.count(b"[") <= limit:  # never more open than have opened
        return False
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return bool(brackets)


def _long_integer(data: bytes, escaped_quotes: list[int] | None) -> bool:
    """Whether valid JSON text may hold an integer of 19+ digits outside a string. A run of 19+ digits
    right after something no number can follow (a letter, a quote, a slash…) is inside a string; so is
    one after an odd number of unescaped quotes (counted only for runs that need it)."""
    digits = data.translate(_DIGIT)
    start = digits.find(_LONG_RUN)
    counted = quotes = 0  # quotes in data[:counted]
    while start >= 0:
        if start == 0 or data[start - 1] in _BEFORE_NUMBER:
            if escaped_quotes is None:
                return True
            quotes += data.count(b'"', counted, start)
            counted = start
            if (quotes - bisect.bisect_left(escaped_quotes, start)) % 2 == 0:
                return True
        end = digits.find(b" ", start)
        if end < 0:
            return False
        start = digits.find(_LONG_RUN, end)
    return False


def _fast_load(data: bytes) -> Any:
    """orjson's document for `data`, or _SLOW when the stdlib path must decide (see module doc).

    Screened before orjson sees it: orjson 3.8 has no nesting limit and overflows the C stack (a
    segfault) on ~100,000 levels, so only texts no deeper than MAX_DEPTH reach it. orjson refuses lone
    surrogates itself; texts with any surrogate escape still go to the stdlib path and its walk."""
    escaped_quotes, surrogate = _escapes(data)
    if surrogate or _deeper_than(_structure(data, escaped_quotes), MAX_DEPTH) \
            or _long_integer(data, escaped_quotes):
        return _SLOW
    import orjson  # when JSON is read, not at start-up

    try:
        return orjson.loads(data)
    except Exception:  # whatever orjson refuses, the stdlib path explains (or accepts)
        return _SLOW


def _slow_load(text: str, path: str) -> Any:
    """The stdlib parse with hooks and the checking walk: the reference, and every error message."""
    try:
        doc = json.loads(text, parse_constant=_constant, parse_int=_integer, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path, exc.lineno) from None
    except RecursionError:
        raise InputError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels", path,
                         _deep_line(text, MAX_DEPTH)) from None
    _check(doc, path, bool(_SURROGATE_ESCAPE.search(text)))
    return doc


def load_json_text(text: str, path: str = "<string>") -> Any:
    """Parse and check JSON text (see module doc)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a str with a lone surrogate character: only the stdlib path reads it
        return _slow_load(text, path)
    doc = _fast_load(data)
    return _slow_load(text, path) if doc is _SLOW else doc


def load_json_file(path: str | Path, limit: int = MAX_JSON_BYTES) -> Any:
    """Read (at most `limit` bytes, regular files only) and parse a JSON document; InputError on any problem."""
    p = str(path)
    data = read_bounded(p, limit)
    doc = _fast_load(data)
    return _slow_load(decode_utf8(data, p), p) if doc is _SLOW else doc
