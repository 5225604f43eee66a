"""Extra JMESPath functions for rules (on top of the JMESPath built-ins), and the search options."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import jmespath
from debian.debian_support import Version
from jmespath import functions


class RuleFunctions(functions.Functions):
    """`glob_any(value, patterns)`, `map_diff(actual, expected)`, `where_eq(rows, field, value)`,
    `upstream_version(version)`."""

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

    @functions.signature({"types": ["string", "null"]})
    def _func_upstream_version(self, version: str | None) -> str | None:
        """A package version without its epoch and revision (`3:535.183.01-1.el8`, `535.183.01-0ubuntu1` →
        `535.183.01`), the part two packages of one upstream release share; null for null or a non-version."""
        if version is None:
            return None
        try:
            return str(Version(version).upstream_version)
        except ValueError:
            return None


OPTIONS = jmespath.Options(custom_functions=RuleFunctions())
FUNCTION_NAMES = frozenset(RuleFunctions().FUNCTION_TABLE)
