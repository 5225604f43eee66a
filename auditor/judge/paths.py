"""Check the fact paths a JMESPath expression reads against the fact schema, and record them.

Walks the parsed expression with a "context" — the FactSpec the current node points at (None when the
value is free-form, e.g. a map entry or a function result) — so `facts.systemd.units[?restartz > `1`]`
is rejected (`units[].restartz` is not a fact) before any host is contacted.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from ..collect.schema import FactSpec, fact_paths, fact_tree
from ..factpath import parse as parse_path
from ..snapshotdoc import FREE_KEYS
from .functions import FUNCTION_NAMES

# Top-level keys of a snapshot besides `facts` and `host` (which the fact schema declares). A rule never
# reads `not_applicable`: a rule over an area that does not apply is skipped by the engine, not judged.
_FREE_ROOTS = {k: kind for k, kind in FREE_KEYS.items() if k != "not_applicable"}
# Functions whose result has the shape of their first argument / of one element of it.
_SAME_AS_FIRST = {"sort_by", "reverse", "sort"}
_ELEMENT_OF_FIRST = {"max_by", "min_by"}


class PathError(ValueError):
    """An expression names a fact the schema does not know, or uses an unknown function."""


@dataclass
class Reads:
    """What an expression reads: schema paths touched and top-level roots (facts areas, host, labels…)."""

    paths: set[str] = field(default_factory=set)
    roots: set[str] = field(default_factory=set)
    areas: set[str] = field(default_factory=set)
    whole_facts: bool = False
    # lists read only as a projection's base (`units[?…]`): their rows count, the fields read are in `paths`
    bases: set[str] = field(default_factory=set)

    def note(self, path: str) -> None:
        self.paths.add(path)
        steps = parse_path(path).steps()
        self.roots.add(steps[0][0])
        if steps[0] == ("facts", False):
            if len(steps) > 1:
                self.areas.add(parse_path(path).area)
            else:
                self.whole_facts = True

    def merge(self, other: Reads) -> None:
        self.paths |= other.paths
        self.roots |= other.roots
        self.areas |= other.areas
        self.whole_facts |= other.whole_facts
        self.bases |= other.bases

    def use(self, spec: FactSpec | None) -> None:
        """A value consumed whole (a function argument, an operand, a result): what a projection, `@` or a
        function hands on is read in full, so its path is noted (a field chain's end is noted already)."""
        if spec is not None and spec.path:
            self.note(spec.path)


def root_spec(item: FactSpec | None = None) -> FactSpec:
    """The snapshot document as a spec; `item` (a select rule's match) is an extra root when given."""
    tree = fact_tree()
    children = dict(tree.children)
    for name, kind in _FREE_ROOTS.items():
        children[name] = FactSpec(name, kind)
    if item is not None:
        children["item"] = item
    return FactSpec("", "object", children=children)


def element(spec: FactSpec | None) -> FactSpec | None:
    """The spec of one element of a list spec (None when free-form)."""
    if spec is None or spec.type != "list":
        return None
    if spec.children:
        return FactSpec(f"{spec.path}[]", "object", key=spec.key, children=spec.children)
    return FactSpec(f"{spec.path}[]", spec.items or "string")


def list_of(spec: FactSpec | None) -> FactSpec | None:
    """A list whose elements have `spec` (the result of a projection)."""
    if spec is None:
        return None
    path = spec.path.removesuffix("[]")
    if spec.type == "object" and spec.children:
        return FactSpec(path, "list", key=spec.key, children=spec.children)
    if spec.type in ("string", "integer", "number", "boolean"):
        return FactSpec(path, "list", items=spec.type)
    return None


def _field(spec: FactSpec | None, name: str, reads: Reads, note: bool = True) -> FactSpec | None:
    """Step into field `name`; `note=False` for a step that a longer chain continues (only chain ends are read)."""
    if spec is None:
        return None
    if spec.type == "map":  # free keys: the entry read is still a read (labels.az, facts.kernel.sysctls.x)
        if note:
            reads.note(f"{spec.path}.{name}")
        return None
    shown = spec.path or "the snapshot"
    if spec.type == "list":
        raise PathError(f"{shown} is a list: write {spec.path}[].{name} or {spec.path}[?…] to look inside it")
    if spec.type != "object":
        raise PathError(f"{shown} is a {spec.type}; it has no field {name!r}")
    child = spec.children.get(name)
    if child is None:
        near = difflib.get_close_matches(name, list(spec.children), n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else f" (known: {', '.join(sorted(spec.children))})"
        where = f"{spec.path}.{name}" if spec.path else name
        raise PathError(f"unknown fact path {where!r}{hint}")
    if note:
        reads.note(child.path)
    return child


def _walk(node: dict[str, Any], ctx: FactSpec | None, reads: Reads) -> FactSpec | None:
    kind = node["type"]
    kids = node.get("children", [])
    if kind == "field":
        return _field(ctx, node["value"], reads)
    if kind in ("current", "identity"):
        if ctx is not None and ctx.path == "":
            reads.roots.add("*")
        return ctx
    if kind == "subexpression":
        if kids and kids[0]["type"] == "not_expression":  # `!a.b` is `(!a).b`: a field of a boolean, always null
            raise PathError("`!` binds to the first name only, so `!a.b` reads `.b` of a boolean (always null): "
                            "write `!(a.b)`")
        spec = ctx
        for i, kid in enumerate(kids):
            if kid["type"] == "field" and i < len(kids) - 1:
                spec = _field(spec, kid["value"], reads, note=False)
            else:
                spec = _walk(kid, spec, reads)
        return spec
    if kind == "pipe":
        return _walk(kids[1], _walk(kids[0], ctx, reads), reads)
    if kind == "index_expression":
        left = _walk(kids[0], ctx, reads)
        return element(left) if kids[1]["type"] == "index" else left
    if kind == "projection":
        left = _base(kids[0], ctx, reads)
        return list_of(_walk(kids[1], element(left), reads))
    if kind == "filter_projection":
        left = _base(kids[0], ctx, reads)
        item = element(left)
        reads.use(_walk(kids[2], item, reads))
        return list_of(_walk(kids[1], item, reads))
    if kind == "flatten":
        return _walk(kids[0], ctx, reads)
    if kind == "function_expression":
        return _function(node, ctx, reads)
    if kind in ("literal", "index", "slice"):
        return None
    for kid in kids:  # comparators, and/or/not, multi-selects, value projections, exprefs: operands used whole
        if isinstance(kid, dict):
            reads.use(_walk(kid, ctx, reads))
    return None


def _base(node: dict[str, Any], ctx: FactSpec | None, reads: Reads) -> FactSpec | None:
    """Walk a projection's left side: a list it newly names is a base (its rows are iterated, only the fields
    the projection reads are read), not a whole read."""
    before = set(reads.paths)
    left = _walk(node, ctx, reads)
    if left is not None and left.type == "list" and left.path in reads.paths and left.path not in before:
        reads.paths.discard(left.path)
        reads.bases.add(left.path)
    return left


def _function(node: dict[str, Any], ctx: FactSpec | None, reads: Reads) -> FactSpec | None:
    name = node["value"]
    if name not in FUNCTION_NAMES:
        near = difflib.get_close_matches(name, sorted(FUNCTION_NAMES), n=3)
        raise PathError(f"unknown function {name}(){' (did you mean ' + ', '.join(near) + '?)' if near else ''}")
    first: FactSpec | None = None
    for i, arg in enumerate(node["children"]):
        if arg["type"] == "expref":
            _walk(arg["children"][0], element(first), reads)
            continue
        if name == "length" and (counted := _counted_filter(arg)) is not None:
            # `length(rows[?cond])` reads how many rows match: the condition's fields, not the rows whole
            # (a kubelet-present gate must not key a rule's cache on every binary's mtime)
            _walk(counted, ctx, reads)
            continue
        spec = _walk(arg, ctx, reads)
        reads.use(spec)
        if i == 0:
            first = spec
    if name in _SAME_AS_FIRST:
        return first
    if name in _ELEMENT_OF_FIRST:
        return element(first)
    return None


def _counted_filter(arg: dict[str, Any]) -> dict[str, Any] | None:
    """The filter projection whose rows `length()` counts: `rows[?cond]`, or `rows[?cond] || `[]``."""
    if arg["type"] == "filter_projection":
        return arg
    kids: list[dict[str, Any]] = arg.get("children") or []
    if arg["type"] == "or_expression" and kids[0]["type"] == "filter_projection" and kids[1]["type"] == "literal":
        return kids[0]
    return None


def analyze(parsed: dict[str, Any], item: FactSpec | None = None, root: FactSpec | None = None,
            used: bool = True) -> tuple[FactSpec | None, Reads]:
    """Validate a parsed expression (jmespath `.parsed`); return the spec of its result and what it reads.
    `used=False` for a `select`, whose result's rows are read only as far as the rule reads `item`."""
    reads = Reads()
    result = _walk(parsed, root or root_spec(item), reads)
    if used:
        reads.use(result)
    return result, reads


def known_path(path: str) -> bool:
    """Whether a dotted path (no list markers) names a declared fact."""
    return path in fact_paths()
