"""Extra JMESPath functions for rules (on top of the JMESPath built-ins), and the search options."""

from __future__ import annotations

import math
from fnmatch import fnmatchcase
from typing import Any

import jmespath
from debian.debian_support import Version
from jmespath import functions

from .versions import VersionError, backported, matches_any, parse_constraint


class RuleFunctions(functions.Functions):
    """`glob_any(value, patterns)`, `map_diff(actual, expected)`, `where_eq(rows, field, value)`,
    `known_bad(packages, binaries, table, id)`, `ratio(part, whole)`, `word(text, index)`, `get(map, key)`,
    `unique_by(rows, field)`, `upstream_version(version)`."""

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


    @functions.signature({"types": ["object", "null"]}, {"types": ["array", "null"]}, {"types": ["array"]},
                         {"types": ["string"]})
    def _func_known_bad(self, packages: dict[str, Any] | None, binaries: list[Any] | None, table: list[Any],
                        ids: str) -> list[dict[str, Any]]:
        """Installed packages (and the owning packages of key binaries) whose version a row of `table` lists as
        bad, compared by the package manager's rules; only rows whose `id` matches the glob `ids`. One match per
        package version: {package, version, manager, arch, binary, path, rows: [{id, versions, advisory}],
        advisory (the rows' advisories joined), refs}."""
        rows = [r for r in _table(table) if fnmatchcase(r["id"], ids)]
        if not rows:
            return []
        packages = packages or {}
        manager = packages.get("manager")
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for item in packages.get("items") or ():
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                name = item["name"].partition(":")[0]  # multiarch rows are `name:arch`
                for row in rows:
                    if name in row["packages"]:
                        _match(found, row, manager, name, item.get("version"), {"arch": item.get("arch")})
        for binary in binaries or ():
            if not isinstance(binary, dict) or not binary.get("found") or not binary.get("package"):
                continue
            owner = str(binary["package"])
            for row in rows:
                if owner in row["packages"] or binary.get("name") == row["binary"]:
                    _match(found, row, binary.get("package_manager") or manager, owner, binary.get("package_version"),
                           {"binary": binary.get("name"), "path": binary.get("path")})
        return [found[k] for k in sorted(found)]


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

_ROW_KEYS = {"id", "packages", "binary", "versions", "fixed", "advisory", "refs"}


def _table(table: list[Any]) -> list[dict[str, Any]]:
    """The rows of a known-bad table, checked (a user extends it with --set / --rules-config): a bad row is an
    error naming it, never a silent pass."""
    out = []
    for index, row in enumerate(table):
        where = f"known-bad table row {index + 1}"
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a mapping with id, packages or binary, versions, advisory")
        where = f"{where} ({row.get('id', 'no id')})"
        if sorted(set(row) - _ROW_KEYS):
            raise ValueError(f"{where}: unknown keys {sorted(set(row) - _ROW_KEYS)} (known: {sorted(_ROW_KEYS)})")
        packages, versions, fixed = row.get("packages") or [], row.get("versions"), row.get("fixed") or []
        if not isinstance(row.get("id"), str) or not isinstance(row.get("advisory"), str):
            raise ValueError(f"{where}: `id` and `advisory` must be strings")
        if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
            raise ValueError(f"{where}: `packages` must be a list of package names")
        if not packages and not isinstance(row.get("binary"), str):
            raise ValueError(f"{where}: needs `packages` (names) or `binary` (a key binary's name)")
        if isinstance(versions, str):
            versions = [versions]
        if not isinstance(versions, list) or not versions or not all(isinstance(v, str) for v in versions):
            raise ValueError(f"{where}: `versions` must be a constraint (`< 1.1.12`) or a list of them")
        if not isinstance(fixed, list) or not all(isinstance(v, str) for v in fixed):
            raise ValueError(f"{where}: `fixed` must be a list of package versions")
        refs = row.get("refs") or []
        if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
            raise ValueError(f"{where}: `refs` must be a list of URLs")
        try:
            for constraint in versions:
                parse_constraint(constraint)
        except VersionError as exc:
            raise ValueError(f"{where}: {exc}") from None
        out.append({**row, "packages": packages, "binary": row.get("binary"), "versions": versions, "fixed": fixed,
                    "refs": refs})
    return out


def _match(found: dict[tuple[str, str], dict[str, Any]], row: dict[str, Any], manager: Any, package: str,
           version: Any, where: dict[str, Any]) -> None:
    """Record `package` `version` under `row` when the row's versions take it and no `fixed` build covers it;
    a binary's name and path join the package's match."""
    if not isinstance(version, str) or not isinstance(manager, str):
        return
    key = (package, version)
    match = found.get(key)
    if match is None or row["id"] not in {r["id"] for r in match["rows"]}:
        try:
            hit = matches_any(manager, version, row["versions"])
            if hit is None or backported(manager, version, row["fixed"]) is not None:
                return
        except VersionError as exc:
            raise ValueError(f"{package} {version}: {exc}") from None
        if match is None:
            match = found[key] = {"package": package, "version": version, "manager": manager, "arch": None,
                                  "binary": None, "path": None, "rows": [], "advisory": "", "refs": []}
        match["rows"].append({"id": row["id"], "versions": hit, "advisory": row["advisory"]})
        match["advisory"] = "; ".join(r["advisory"] for r in match["rows"])
        match["refs"] = list(dict.fromkeys([*match["refs"], *row["refs"]]))
    match.update({k: v for k, v in where.items() if v is not None})


OPTIONS = jmespath.Options(custom_functions=RuleFunctions())
FUNCTION_NAMES = frozenset(RuleFunctions().FUNCTION_TABLE)
