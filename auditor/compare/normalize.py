"""Normalize a snapshot into a flat, order-free view of its stable facts, using the fact schema.

`facts.systemd.units[ecs.service].unit_file_state`, `facts.binaries[kubelet].sha256`,
`facts.kernel.sysctls[vm.swappiness]`, `facts.systemd.enabled_units[ssh.service]` (= true): keyed
lists become rows keyed by their row key and lists of names become sets, so a reorder is never a
change. Volatile facts (schema `volatile: true`) and the `host` identity section are left out; null
facts are left out too. An area whose collector failed is recorded as unknown, never as empty; an area
that does not apply to the target (the snapshot's `not_applicable`: runtime facts of an image) is
recorded as such, and is neither unknown nor a difference.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import operator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import count
from typing import Any

from ..collect.schema import FactSpec, fact_tree
from ..factpath import area_of as area_of  # re-exported: compare/index.py reads it from here
from ..factpath import parse as parse_path
from ..snapshotdoc import Snapshot

ABSENT = "(absent)"  # display value of a fact a host does not have (its area is known)


_Part = tuple[int, tuple[tuple[str, Any], ...]]  # a shared list's token and its {path: value} items


@dataclass(frozen=True)
class NormalView:
    """A host's stable facts as {path: value} (`flat`); `unknown` names areas whose collector failed.

    Long lists (units, unit files, packages) are kept as shared, numbered parts: hosts with the same
    list content share one part, so dedupe hashes a few numbers instead of thousands of facts.
    """

    rest: dict[str, Any]
    parts: tuple[tuple[int, tuple[tuple[str, Any], ...]], ...]
    unknown: frozenset[str]
    not_applicable: frozenset[str] = frozenset()

    @cached_property
    def flat(self) -> dict[str, Any]:
        out = dict(self.rest)
        for _, items in self.parts:
            out.update(items)
        return out

    def identity(self) -> tuple[Any, ...]:
        """Hashable content key: hosts with equal keys have equal views (dedupe before any diff)."""
        return (self.unknown, self.not_applicable, tuple(sorted(t for t, _ in self.parts)),
                frozenset(self.rest.items()))


def display(value: Any) -> str:
    """A value as a short string (for value counts and evidence): strings as-is, others as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, sort_keys=True)


def _walk(spec: FactSpec, value: Any, path: str, out: dict[str, Any], parts: list[_Part] | None = None) -> None:
    if value is None or spec.volatile:
        return
    kind = spec.type
    if kind == "object":
        if isinstance(value, dict):
            for name, child in spec.children.items():
                _walk(child, value.get(name), f"{path}.{name}", out, parts)
    elif kind == "map":
        if isinstance(value, dict):
            for k, v in value.items():
                if v is not None:
                    out[f"{path}[{k}]"] = v
    elif kind == "list":
        if isinstance(value, list):
            _walk_list(spec, value, path, out, parts)
    else:
        out[path] = value


def _walk_list(spec: FactSpec, rows: list[Any], path: str, out: dict[str, Any], parts: list[_Part] | None) -> None:
    """Lists of rows, memoized by their sorted stable content: a fleet has few distinct unit/package lists."""
    getter = _stable_getter(spec)
    memo_key: tuple[str, tuple[Any, ...]] | None
    try:
        memo_key = (path, tuple(sorted(map(getter, rows) if getter else rows)))
        hit = _list_memo.get(memo_key)
    except (KeyError, TypeError, AttributeError):  # a row missing a field, unhashable or unsortable values
        memo_key = hit = None
    if hit is None:
        fresh: dict[str, Any] = {}
        _walk_rows(spec, rows, path, fresh)
        hit = (next(_tokens), tuple(fresh.items()))
        if memo_key is not None:
            if len(_list_memo) >= _LIST_MEMO_MAX:
                _list_memo.clear()  # tokens are never reused, so older views stay correct
            _list_memo[memo_key] = hit
    if parts is not None and memo_key is not None:
        parts.append(hit)
    else:
        out.update(hit[1])


def _walk_rows(spec: FactSpec, rows: list[Any], path: str, out: dict[str, Any]) -> None:
    if not spec.children:  # list of names: a set
        for item in rows:
            if item is not None:
                out[f"{path}[{item}]"] = True
    elif spec.key:  # keyed rows
        key = spec.key
        scalars, nested = _row_fields(spec)
        for row in rows:
            if not isinstance(row, dict) or row.get(key) is None:
                continue
            prefix = f"{path}[{row[key]}]"
            before = len(out)
            for name, suffix in scalars:
                v = row.get(name)
                if v is not None:
                    out[prefix + suffix] = v
            for name, child in nested:
                _walk(child, row.get(name), f"{prefix}.{name}", out)
            if len(out) == before:
                out[prefix] = True  # a row with no stable field still exists
    else:  # unkeyed rows (e.g. binaries[].evidence): one order-free value
        items = sorted(json.dumps(r, sort_keys=True, separators=(",", ":")) for r in rows if r is not None)
        if items:
            out[path] = tuple(items)


_list_memo: dict[tuple[str, tuple[Any, ...]], _Part] = {}
_tokens = count()
_LIST_MEMO_MAX = 2048
_getters: dict[str, Any] = {}


def _stable_getter(spec: FactSpec) -> Any:
    """itemgetter of a keyed list's key and stable fields (its memo key per row); None for other lists."""
    if not (spec.key and spec.children):
        return None
    if spec.path not in _getters:
        names = [spec.key] + [n for n, c in spec.children.items() if n != spec.key and not c.volatile]
        _getters[spec.path] = operator.itemgetter(*names)
    return _getters[spec.path]


_RowFields = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, FactSpec], ...]]
_row_fields_memo: dict[str, _RowFields] = {}


def _row_fields(spec: FactSpec) -> _RowFields:
    """A keyed list's stable fields: (scalar name, ".name") pairs, and nested specs walked in full."""
    hit = _row_fields_memo.get(spec.path)
    if hit is not None:
        return hit
    stable = [(n, c) for n, c in spec.children.items() if n != spec.key and not c.volatile]
    scalars = tuple((n, f".{n}") for n, c in stable if c.type not in ("object", "map", "list"))
    nested = tuple((n, c) for n, c in stable if c.type in ("object", "map", "list"))
    _row_fields_memo[spec.path] = (scalars, nested)
    return scalars, nested


@lru_cache(maxsize=1)
def _areas() -> dict[str, FactSpec]:
    return dict(fact_tree().children["facts"].children)


def normalize(snapshot: Snapshot) -> NormalView:
    """The stable, order-free view of a snapshot's facts (see module docstring)."""
    facts = snapshot.get("facts") or {}
    not_applicable = set(snapshot.get("not_applicable") or ())
    rest: dict[str, Any] = {}
    parts: list[tuple[int, tuple[tuple[str, Any], ...]]] = []
    unknown: set[str] = set()
    for area, spec in _areas().items():
        if spec.volatile:  # a wholly volatile area (trends) is never compared
            continue
        raw = facts.get(area)
        if raw is None:
            if area not in not_applicable:
                unknown.add(area)
            continue
        _walk(spec, raw, f"facts.{area}", rest, parts)
    return NormalView(rest, tuple(parts), frozenset(unknown), frozenset(not_applicable & set(_areas())))


def leaf_spec(path: str) -> tuple[FactSpec, str] | None:
    """The spec of a normalized leaf path and its value type, or None if the path is not one.

    `facts.binaries[kubelet].sha256` → (sha256 spec, "string"); `facts.systemd.enabled_units[x]` →
    (enabled_units spec, "boolean"); `facts.kernel.sysctls[vm.swappiness]` → (sysctls spec, "string").
    Containers (`facts.kernel`, `facts.binaries[kubelet]`) are not leaves.
    """
    parsed = parse_path(path)
    tokens = parsed.tokens() if parsed.root == "facts" else None
    if tokens is None:
        return None
    spec = fact_tree().children["facts"]
    i = 0
    while i < len(tokens):
        name, key = tokens[i]
        if name is not None:
            if spec.type not in ("object",) or name not in spec.children:
                return None
            spec = spec.children[name]
            i += 1
            continue
        if spec.type == "map" and i == len(tokens) - 1:
            return spec, spec.values or "string"
        if spec.type == "list" and not spec.children and i == len(tokens) - 1:
            return spec, "boolean"
        if spec.type != "list" or not spec.key or i + 1 >= len(tokens) or tokens[i + 1][0] is None:
            return None
        field = tokens[i + 1][0]
        if field == spec.key or field not in spec.children:
            return None
        spec = spec.children[field]
        i += 2
    if spec.type in ("object", "map") or (spec.type == "list" and (spec.key or not spec.children)):
        return None
    return spec, spec.type


def collection_spec(path: str) -> FactSpec | None:
    """The spec of a collection path whose rows are keyed (`facts.binaries`, `facts.kernel.sysctls`,
    `facts.systemd.enabled_units`), else None."""
    spec = fact_tree().children["facts"]
    steps = parse_path(path).steps() if path.startswith("facts.") else ()
    if not steps or any(rows for _, rows in steps):
        return None
    for name, _ in steps[1:]:
        if spec.type != "object" or name not in spec.children:
            return None
        spec = spec.children[name]
    if spec.volatile:
        return None
    if spec.type == "map" or (spec.type == "list" and (spec.key or not spec.children)):
        return spec
    return None


def _stable_shape(spec: FactSpec) -> Any:
    """The judge's shape (judge/shapes.py) of what `normalize` reads of a fact: its stable fields."""
    if spec.type == "object":
        return ("obj", tuple((n, _stable_shape(c)) for n, c in sorted(spec.children.items()) if not c.volatile))
    if spec.type == "list" and spec.children and spec.key:
        return ("rows", _stable_shape(FactSpec(spec.path, "object", children=spec.children)))
    return None  # scalars, maps, lists of names, unkeyed rows: read whole


@lru_cache(maxsize=1)
def _stable_cuts() -> tuple[tuple[str, Any], ...]:
    from ..projection import projector

    return tuple((area, projector(_stable_shape(spec))) for area, spec in _areas().items() if not spec.volatile)


def stable_key(snapshot: Snapshot) -> bytes | None:
    """A digest of exactly what `normalize` reads: hosts with equal keys have equal views, so a fleet
    normalizes once per key (hosts whose keys differ may still share a view, e.g. lists in another order).
    None when the snapshot holds something a key cannot be made of (then normalize it)."""
    facts = snapshot.get("facts") or {}
    try:
        cut: list[Any] = [sorted(set(snapshot.get("not_applicable") or ()) & set(_areas()))]
        cut.extend(fn(facts.get(area)) for area, fn in _stable_cuts())
        return hashlib.blake2b(marshal.dumps(cut, 2), digest_size=16).digest()
    except (TypeError, ValueError):  # unhashable names, a value nested past marshal's limit
        return None
