"""The fact schema (facts.yaml) as data: paths, types, keys, volatility, drift severity, and the JSON Schema.

Paths use dots for fields and `[]` for list items, e.g. `facts.systemd.units[].restarts`.
The file is checked when it loads (known types and keys, a valid `drift`): a mistake is a SchemaError
naming the path, never a fact silently treated as something else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from .. import SNAPSHOT_SCHEMA
from ..models import SEVERITIES
from ..snapshotdoc import REQUIRED_KEYS, SNAPSHOT_KEYS

SCALARS = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}
TYPES = frozenset({*SCALARS, "object", "list", "map"})
KEYS = frozenset({"type", "description", "volatile", "derived", "key", "items", "fields", "values", "drift"})
ENABLEMENT = "enablement"  # drift: newly enabled is high, other changes medium, added/removed disabled low
DRIFT_LEVELS = (*SEVERITIES, ENABLEMENT)
_SELECTOR = re.compile(r"\[[^\]]*\]")


class SchemaError(ValueError):
    """facts.yaml is malformed (a packaging or development mistake: exit 4, not bad user input)."""


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
    drift: str | None = None  # severity of a difference here (on a list/map: of a whole row/entry)
    derived: bool = False  # published by history, never collected: absent means "no earlier scan", not unknown


JSONSchema = dict[str, object]  # a JSON Schema document (or one of its subschemas)


def _is_leaf(decl: dict[str, object]) -> bool:
    return isinstance(decl.get("type"), str)


def _text(decl: dict[str, object], key: str, path: str) -> str | None:
    """A declaration's text setting (description, key, items, values, drift); None when not given."""
    value = decl.get(key)
    if value is not None and not isinstance(value, str):
        raise SchemaError(f"facts.yaml: {path}: {key} must be text, not {type(value).__name__}")
    return value


def _mapping(value: object, path: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise SchemaError(f"facts.yaml: {path or '(root)'}: expected a mapping, not {type(value).__name__}")
    return value


def _check(path: str, decl: dict[str, object], volatile: bool) -> None:
    """One declaration's keys, type and drift level (SchemaError naming the path)."""
    where = f"facts.yaml: {path or '(root)'}"
    unknown = sorted(set(decl) - KEYS)
    if unknown:
        raise SchemaError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(KEYS))})")
    if decl["type"] not in TYPES:
        raise SchemaError(f"{where}: unknown type {decl['type']!r} (one of {', '.join(sorted(TYPES))})")
    drift = decl.get("drift")
    if drift is not None:
        if drift not in DRIFT_LEVELS:
            raise SchemaError(f"{where}: drift {drift!r} is not one of {', '.join(DRIFT_LEVELS)}")
        if volatile:
            raise SchemaError(f"{where}: a volatile fact never drifts; remove drift: {drift}")
    if decl["type"] == "object" and not isinstance(decl.get("fields"), dict):
        raise SchemaError(f"{where}: an object needs fields")


def _build(path: str, value: object, inherited_volatile: bool = False) -> FactSpec:
    decl = _mapping(value, path)
    if not _is_leaf(decl):  # a plain group of fields
        group = {k: _build(f"{path}.{k}" if path else k, v, inherited_volatile) for k, v in decl.items()}
        return FactSpec(path, "object", volatile=inherited_volatile, children=group)
    volatile = bool(decl.get("volatile")) or inherited_volatile
    _check(path, decl, volatile)
    kind = str(decl["type"])  # one of TYPES (_check)
    children: dict[str, FactSpec] = {}
    items = None
    if kind == "object":
        children = {k: _build(f"{path}.{k}", v, volatile) for k, v in _mapping(decl["fields"], path).items()}
    elif kind == "list":
        if isinstance(decl.get("items"), dict):
            children = {k: _build(f"{path}[].{k}", v, volatile) for k, v in _mapping(decl["items"], path).items()}
        else:
            items = _text(decl, "items", path) or "string"
    return FactSpec(
        path=path,
        type=kind,
        description=_text(decl, "description", path) or "",
        volatile=volatile,
        key=_text(decl, "key", path),
        items=items,
        values=_text(decl, "values", path),
        children=children,
        drift=_text(decl, "drift", path),
        derived=bool(decl.get("derived")),
    )


def parse_schema(text: str) -> FactSpec:
    """A facts.yaml text → its checked tree (SchemaError if malformed). The file ships with the package
    (trusted), so libyaml's C loader reads it when present: start-up CPU is the reason."""
    import yaml  # when the schema is first needed, not at start-up

    return _build("", yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


@lru_cache(maxsize=1)
def fact_tree() -> FactSpec:
    """The whole declared tree (root has children `host` and `facts`)."""
    return parse_schema(resources.files("auditor.collect").joinpath("facts.yaml").read_text(encoding="utf-8"))


def derived_areas() -> frozenset[str]:
    """Facts areas that history derives (`derived: true`), e.g. `trends`."""
    return frozenset(a for a, spec in fact_tree().children["facts"].children.items() if spec.derived)


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
    return fact_paths().get(_SELECTOR.sub("[]", path))


@lru_cache(maxsize=4096)
def drift_level(path: str) -> str | None:
    """The declared `drift` of a path (a severity or `enablement`); None when undeclared.

    A list's or map's own level applies to its rows/entries (`facts.binaries[kubelet]`,
    `facts.systemd.enabled_units[x]`, `facts.kernel.sysctls[vm.swappiness]`), not to the whole collection."""
    normal = _SELECTOR.sub("[]", path)
    if normal.endswith("[]"):
        owner = fact_paths().get(normal[:-2])
        return owner.drift if owner is not None and owner.type in ("list", "map") else None
    spec = fact_paths().get(normal)
    if spec is None or spec.type in ("list", "map"):
        return None
    return spec.drift


def is_volatile(path: str) -> bool:
    spec = lookup(path)
    return bool(spec and spec.volatile)


def _json_type(spec: FactSpec) -> JSONSchema:
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
            item: JSONSchema = {
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


MAX_NAME, MAX_TARGET = 4096, 8192  # characters
MAX_LABELS, MAX_LABEL_KEY, MAX_LABEL_VALUE = 1024, 256, 4096
MAX_HOST_TEXT = MAX_LABEL_VALUE  # a host.* string (hostname, AZ…): some become labels
MAX_REASONS, MAX_AREA, MAX_REASON = 256, 128, 4096  # errors / not_applicable: entries, key, text


def _reasons(description: str) -> JSONSchema:
    return {"type": "object", "maxProperties": MAX_REASONS, "propertyNames": {"maxLength": MAX_AREA},
            "additionalProperties": {"type": "string", "maxLength": MAX_REASON}, "description": description}


def _host_schema(spec: FactSpec) -> JSONSchema:
    """host.*, its strings bounded: copied into labels, findings and every report of the host."""
    properties: dict[str, JSONSchema] = {}
    for name, child in spec.children.items():
        prop = properties[name] = _json_type(child)
        if isinstance(kinds := prop["type"], list) and "string" in kinds:
            prop["maxLength"] = MAX_HOST_TEXT
    return {"type": ["object", "null"], "properties": properties, "description": spec.description}


def snapshot_json_schema() -> JSONSchema:
    """JSON Schema (draft 2020-12) of a snapshot document, generated from facts.yaml."""
    tree = fact_tree()
    properties: dict[str, JSONSchema] = {
        "schema": {"const": SNAPSHOT_SCHEMA},
        # bounded: a name is copied into every finding, report and store row (a 20 MB name made 1.3 GB
        # of reports). The collector's longest: an image root's path (PATH_MAX), EC2 tags (key 128,
        # value 256 characters), an ssm:// or ssh:// target well under the target bound
        "name": {"type": "string", "maxLength": MAX_NAME},
        "target": {"type": "string", "maxLength": MAX_TARGET},
        "labels": {"type": "object", "maxProperties": MAX_LABELS, "propertyNames": {"maxLength": MAX_LABEL_KEY},
                   "additionalProperties": {"type": "string", "maxLength": MAX_LABEL_VALUE}},
        "collected_at": {"type": "string", "format": "date-time"},
        "probe": {"type": "object"},
        "host": _host_schema(tree.children["host"]),
        "facts": _json_type(tree.children["facts"]),
        # bounded as the name is: a reason is copied into each finding a rule could not evaluate
        "errors": _reasons("Fact areas (or the probe, its framing, its identity) that failed, with why"),
        "not_applicable": _reasons("Fact areas that do not apply to this target (e.g. runtime facts of an "
                                   "unbooted image), with why: not errors, not differences, not judged"),
    }
    if tuple(properties) != SNAPSHOT_KEYS:  # one list of top-level keys (snapshotdoc.py)
        raise SchemaError(f"snapshot properties {list(properties)} are not SNAPSHOT_KEYS {list(SNAPSHOT_KEYS)}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SNAPSHOT_SCHEMA,
        "title": "ami-auditor snapshot",
        "type": "object",
        "required": list(REQUIRED_KEYS),
        "properties": properties,
    }


_HOT: dict[str, bool] = {}


def holds_volatile(spec: FactSpec) -> bool:
    """Whether a declared fact is volatile or holds volatile facts (memoized by path)."""
    hot = _HOT.get(spec.path)
    if hot is None:
        hot = _HOT[spec.path] = spec.volatile or any(holds_volatile(c) for c in spec.children.values())
    return hot
