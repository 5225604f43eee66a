"""Snapshots packed for the store: a stable body shared by content hash, and this scan's volatile values.

A snapshot is split with the fact schema (facts.yaml): every fact declared `volatile` (uptime, restart
counters, pids, per-core samples), the host identity (hostname, machine id, boot id, instance id) and
the per-run keys (`name`, `target`, `labels`, `collected_at`, `probe`) are taken out in a fixed walk
order; what is left — the host's configuration — is hashed (sha256 of canonical JSON) and stored once
for every scan and every host that has the same configuration. The volatile values are a small
per-scan list, put back in the same walk order. Both parts are zlib-compressed. Derived trend facts
(`facts.trends`) are not stored: history derives them again.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Mapping
from typing import Any

from ..collect.schema import FactSpec, fact_tree, holds_volatile
from ..jsonload import load_json_text
from ..snapshotdoc import PER_RUN_KEYS, Snapshot

_HOLE = "\x00v"  # marks a taken-out volatile value in the stable body (never a real fact: NUL is escaped on input)
_LEVEL = 6


def _canonical(value: Any) -> bytes:
    """Sorted-key compact JSON: orjson (faster than json.dumps, and byte for byte the same on snapshot
    bodies but for floats with an exponent, spelt 1e16, not 1e+16), json.dumps for what orjson refuses
    (integers past 64 bits)."""
    import orjson  # when a scan is recorded, not at start-up

    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


_HOT_FIELDS: dict[str, tuple[tuple[str, FactSpec], ...]] = {}


def _hot_fields(spec: FactSpec) -> tuple[tuple[str, FactSpec], ...]:
    """The children of `spec` that are or hold volatile facts, by name (memoized by path)."""
    hot = _HOT_FIELDS.get(spec.path)
    if hot is None:
        hot = _HOT_FIELDS[spec.path] = tuple(sorted((n, c) for n, c in spec.children.items() if holds_volatile(c)))
    return hot


def _split_object(value: dict[str, Any], spec: FactSpec, out: list[Any]) -> dict[str, Any]:
    """A copy of `value` with holes where its volatile facts were; only the fields that are or hold volatile
    facts are visited, in name order (the rest holds none: kept as it is)."""
    split = dict(value)
    for name, child in _hot_fields(spec):
        if name not in value:
            continue
        if child.volatile:  # a volatile leaf, the common case: inline
            out.append(value[name])
            split[name] = _HOLE
        else:
            split[name] = _split(value[name], child, out)
    return split


def _split(value: Any, spec: FactSpec | None, out: list[Any]) -> Any:
    """`value` with its volatile facts replaced by holes, their values appended to `out` in sorted-key
    order (the order of the stored canonical JSON). Subtrees without volatile facts are kept as they are."""
    if spec is None or not holds_volatile(spec):
        return value
    if spec.volatile:
        out.append(value)
        return _HOLE
    if isinstance(value, dict):
        return _split_object(value, spec, out) if spec.type != "list" else value
    if isinstance(value, list) and spec.type == "list" and spec.children:
        return [_split_object(row, spec, out) if isinstance(row, dict) else row for row in value]
    return value


def _join(value: Any, values: list[Any], pos: list[int]) -> Any:
    if isinstance(value, str) and value == _HOLE:
        pos[0] += 1
        return values[pos[0] - 1]
    if isinstance(value, dict):
        return {k: _join(v, values, pos) for k, v in value.items()}
    if isinstance(value, list):
        return [_join(v, values, pos) for v in value]
    return value


def split(snapshot: Snapshot) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stable body, volatile part) of a snapshot; `join(*split(s)) == s` without `facts.trends`."""
    tree = fact_tree()
    values: list[Any] = []
    body: dict[str, Any] = {}
    doc: Mapping[str, Any] = snapshot
    for key in sorted(doc):
        value = doc[key]
        if key in PER_RUN_KEYS:
            continue
        if key == "facts" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k != "trends"}
        body[key] = _split(value, tree.children.get(key), values)
    per_run = {k: doc[k] for k in PER_RUN_KEYS if k in doc}
    return body, {"run": per_run, "values": values}


def join(body: dict[str, Any], volatile: dict[str, Any]) -> dict[str, Any]:
    """The snapshot again: per-run keys first (as collect writes them), then the body with values put back."""
    pos = [0]
    filled = _join(body, list(volatile.get("values") or []), pos)
    return {**(volatile.get("run") or {}), **filled}


def digest(body: dict[str, Any]) -> tuple[str, bytes]:
    """(sha256 hex of the canonical body, the canonical body): compress it only when it is new."""
    raw = _canonical(body)
    return hashlib.sha256(raw).hexdigest(), raw


def compress_raw(raw: bytes) -> bytes:
    return zlib.compress(raw, _LEVEL)


def compress(value: Any) -> bytes:
    return zlib.compress(_canonical(value), _LEVEL)


def decompress(blob: bytes, limit: int = 64 * 1024 * 1024) -> Any:
    """Inflate at most `limit` bytes (the store is untrusted input) and parse the JSON strictly (jsonload:
    InputError for NaN, deep nesting, huge integers; ValueError for text that is not UTF-8)."""
    inflater = zlib.decompressobj()
    raw = inflater.decompress(blob, limit)
    if inflater.unconsumed_tail:
        raise ValueError(f"stored value inflates past {limit} bytes")
    return load_json_text(raw.decode("utf-8"), "<stored value>")
