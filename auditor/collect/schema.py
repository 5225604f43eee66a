"""The fact schema (facts.yaml) as data: paths, types, keys, volatility, and the JSON Schema.

Paths use dots for fields and `[]` for list items, e.g. `facts.systemd.units[].restarts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from .. import SNAPSHOT_SCHEMA

SCALARS = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}


@dataclass(frozen=True)
class FactSpec:
    """One declared fact (or container of facts)."""

    path: str
    type: str
    description: str = ""
    volatile: bool = False
    key: str | None = None
    items: str | None = None  # scalar item type for lists of scalars
    values: str | None = None  # value type for maps
    children: dict[str, FactSpec] = field(default_factory=dict)


def _is_leaf(decl: Any) -> bool:
    return isinstance(decl, dict) and isinstance(decl.get("type"), str)


def _build(path: str, decl: dict[str, Any], inherited_volatile: bool = False) -> FactSpec:
    if not _is_leaf(decl):  # a plain group of fields
        group = {k: _build(f"{path}.{k}" if path else k, v, inherited_volatile) for k, v in decl.items()}
        return FactSpec(path, "object", volatile=inherited_volatile, children=group)
    volatile = bool(decl.get("volatile")) or inherited_volatile
    kind = decl["type"]
    children: dict[str, FactSpec] = {}
    items = None
    if kind == "object":
        children = {k: _build(f"{path}.{k}", v, volatile) for k, v in decl["fields"].items()}
    elif kind == "list":
        if isinstance(decl.get("items"), dict):
            children = {k: _build(f"{path}[].{k}", v, volatile) for k, v in decl["items"].items()}
        else:
            items = decl.get("items", "string")
    return FactSpec(
        path=path,
        type=kind,
        description=decl.get("description", ""),
        volatile=volatile,
        key=decl.get("key"),
        items=items,
        values=decl.get("values"),
        children=children,
    )


@lru_cache(maxsize=1)
def fact_tree() -> FactSpec:
    """The whole declared tree (root has children `host` and `facts`)."""
    text = resources.files("auditor.collect").joinpath("facts.yaml").read_text(encoding="utf-8")
    return _build("", yaml.safe_load(text))


@lru_cache(maxsize=1)
def fact_paths() -> dict[str, FactSpec]:
    """Every declared path → its spec (containers included)."""
    out: dict[str, FactSpec] = {}

    def walk(spec: FactSpec) -> None:
        if spec.path:
            out[spec.path] = spec
        for child in spec.children.values():
            walk(child)

    walk(fact_tree())
    return out


def lookup(path: str) -> FactSpec | None:
    """Spec for a path; `[...]` selectors such as `units[ecs.service]` or `units[0]` count as `[]`."""
    import re

    return fact_paths().get(re.sub(r"\[[^\]]*\]", "[]", path))


def is_volatile(path: str) -> bool:
    spec = lookup(path)
    return bool(spec and spec.volatile)


def _json_type(spec: FactSpec) -> dict[str, Any]:
    if spec.type in SCALARS:
        return {"type": [SCALARS[spec.type], "null"], "description": spec.description}
    if spec.type == "map":
        return {
            "type": "object",
            "additionalProperties": {"type": [SCALARS.get(spec.values or "string", "string"), "null"]},
            "description": spec.description,
        }
    if spec.type == "list":
        if spec.children:
            item: dict[str, Any] = {
                "type": "object",
                "properties": {k: _json_type(v) for k, v in spec.children.items()},
            }
            if spec.key:
                item["required"] = [spec.key]
        else:
            item = {"type": [SCALARS.get(spec.items or "string", "string"), "null"]}
        return {"type": ["array", "null"], "items": item, "description": spec.description}
    return {
        "type": ["object", "null"],
        "properties": {k: _json_type(v) for k, v in spec.children.items()},
        "description": spec.description,
    }


def snapshot_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a snapshot document, generated from facts.yaml."""
    tree = fact_tree()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SNAPSHOT_SCHEMA,
        "title": "ami-auditor snapshot",
        "type": "object",
        "required": ["schema", "name", "target", "collected_at", "host", "facts", "errors"],
        "properties": {
            "schema": {"const": SNAPSHOT_SCHEMA},
            "name": {"type": "string"},
            "target": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "collected_at": {"type": "string", "format": "date-time"},
            "probe": {"type": "object"},
            "host": _json_type(tree.children["host"]),
            "facts": _json_type(tree.children["facts"]),
            "errors": {"type": "object", "additionalProperties": {"type": "string"}},
            "not_applicable": {
                "type": "object", "additionalProperties": {"type": "string"},
                "description": "Fact areas that do not apply to this target (e.g. runtime facts of an "
                               "unbooted image), with why: not errors, not differences, not judged",
            },
        },
    }
