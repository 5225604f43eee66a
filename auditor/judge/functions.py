"""Extra JMESPath functions for rules (on top of the JMESPath built-ins), and the search options."""

from __future__ import annotations

import math
from fnmatch import fnmatchcase
from typing import Any

import jmespath
from jmespath import functions


class RuleFunctions(functions.Functions):
    """`glob_any(value, patterns)`, `map_diff(actual, expected)`, `where_eq(rows, field, value)`,
    `ratio(part, whole)`, `word(text, index)`, `get(map, key)`, `unique_by(rows, field)`."""

    @functions.signature({"types": ["string", "null"]}, {"types": ["array"]})
    def _func_glob_any(self, value: str | None, patterns: list[Any]) -> bool:
        """True when `value` matches any shell-style pattern (case-insensitive); null never matches."""
        if value is None:
            return False
        low = value.lower()
        return any(isinstance(p, str) and fnmatchcase(low, p.lower()) for p in patterns)

    @functions.signature({"types": ["object", "null"]}, {"types": ["object"]})
    def _func_map_diff(self, actual: dict[str, Any] | None, expected: dict[str, Any]) -> list[dict[str, Any]]:
        """One {key, expected, actual} row per expected key whose actual value differs (whitespace-normalized)."""
        actual = actual or {}
        out = []
        for key in sorted(expected):
            want, have = expected[key], actual.get(key)
            if have is None or " ".join(str(have).split()) != " ".join(str(want).split()):
                out.append({"key": key, "expected": want, "actual": have})
        return out

    @functions.signature({"types": ["array", "null"]}, {"types": ["string"]}, {"types": []})
    def _func_where_eq(self, rows: list[Any] | None, key: str, value: Any) -> list[Any]:
        """Rows whose `key` equals `value` — a filter whose right side comes from outside the list
        (JMESPath filters cannot reach the root), e.g. `where_eq(facts.cpu.threads, 'cpu', item.cpu)`."""
        return [r for r in rows or [] if isinstance(r, dict) and r.get(key) == value]

    @functions.signature({"types": ["number", "string", "null"]}, {"types": ["number", "string", "null"]})
    def _func_ratio(self, part: float | str | None, whole: float | str | None) -> float | None:
        """`part / whole`, each a number or a numeric string (sysctl values are strings); null when either is
        missing or not a number, or `whole` is 0 — JMESPath has no arithmetic of its own."""
        top, bottom = _number(part), _number(whole)
        if top is None or not bottom:
            return None
        return top / bottom

    @functions.signature({"types": ["string", "null"]}, {"types": ["number"]})
    def _func_word(self, text: str | None, index: int) -> str | None:
        """The `index`-th whitespace-separated word of `text` (from 0), e.g. the allocated handles of
        `fs.file-nr` ("1912 0 2466246"); null when there is no such word."""
        words = (text or "").split()
        return words[int(index)] if 0 <= int(index) < len(words) else None

    @functions.signature({"types": ["object", "null"]}, {"types": ["string", "null"]})
    def _func_get(self, mapping: dict[str, Any] | None, key: str | None) -> Any:
        """`mapping[key]` for a key computed from the row (`get(facts.config.sysctl_declared_in, item.key)`):
        a JMESPath key is literal; null when absent."""
        return (mapping or {}).get(key) if key is not None else None

    @functions.signature({"types": ["array", "null"]}, {"types": ["string"]})
    def _func_unique_by(self, rows: list[Any] | None, key: str) -> list[Any]:
        """The first row for each distinct value of `key`, in order (paths on one filesystem share its row)."""
        seen: set[str] = set()
        out = []
        for row in rows or []:
            if isinstance(row, dict):
                marker = repr(row.get(key))
                if marker not in seen:
                    seen.add(marker)
                    out.append(row)
        return out


def _number(value: float | str | None) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None  # "inf" and "nan" parse but are no sysctl value


OPTIONS = jmespath.Options(custom_functions=RuleFunctions())
FUNCTION_NAMES = frozenset(RuleFunctions().FUNCTION_TABLE)
