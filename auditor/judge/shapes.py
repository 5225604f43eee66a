"""What part of each facts area a rule reads, so its cached result is keyed by that part only.

A rule that reads `facts.binaries[].found`, `.package` and `.source_url` gives the same result on two
hosts whose binaries differ only in `mtime` (volatile: per-host noise), so its cache key is a digest of
the binaries projected onto the fields it reads, not of the whole area. Shapes are built from the fact
paths a rule reads (judge/paths.py, checked against facts.yaml) and are conservative: a path that ends
on a container, a value used whole (`@`, a function argument, a select without evidence) or a free-form
map reads everything under it.

A shape is None (the whole value), ("obj", ((field, shape), …)) or ("rows", shape) for a list of rows;
a projection base that no field is read from is ("rows", ("obj", ())): only how many rows there are,
and which are empty, matters.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..collect.schema import FactSpec, fact_tree
from ..factpath import Step
from ..factpath import parse as parse_path
from .paths import element

Shape = tuple[Any, ...] | None


class _Node:
    """A shape under construction: `whole`, or the fields/rows read below it."""

    def __init__(self) -> None:
        self.whole = False
        self.fields: dict[str, _Node] = {}
        self.rows: _Node | None = None

    def freeze(self) -> Shape:
        if self.whole:
            return None
        if self.rows is not None:
            return ("rows", self.rows.freeze())
        return ("obj", tuple((k, self.fields[k].freeze()) for k in sorted(self.fields)))


def _add(root: _Node, spec: FactSpec, steps: tuple[Step, ...], base: bool) -> None:
    """Mark the path `steps` (below `spec`) as read: whole at its end, or rows only for a base."""
    node = root
    for name, rows in steps:
        child = spec.children.get(name) if spec.type == "object" else None
        if child is None:  # a map's free keys, or anything the schema does not spell out: read it all
            node.whole = True
            return
        node = node.fields.setdefault(name, _Node())
        spec = child
        if rows:
            if spec.type != "list" or not spec.children:
                node.whole = True
                return
            if node.rows is None:
                node.rows = _Node()
            row = element(spec)
            assert row is not None  # a list with children
            node, spec = node.rows, row
    if base and spec.type == "list" and spec.children:
        if node.rows is None:
            node.rows = _Node()
        return
    node.whole = True


def area_shapes(paths: set[str], bases: set[str], areas: set[str], whole: bool) -> tuple[tuple[str, Shape], ...]:
    """(area, shape) for every area read, from the fact paths read (`paths`) and the projection bases."""
    if whole:
        return tuple((a, None) for a in sorted(areas))
    facts = fact_tree().children["facts"]
    root = _Node()
    for path, base in [(p, False) for p in paths] + [(p, True) for p in bases]:
        steps = parse_path(path).steps()
        if steps[0] == ("facts", False) and len(steps) > 1:
            _add(root, facts, steps[1:], base)
    out = []
    for area in sorted(set(root.fields) | areas):
        node = root.fields.get(area) or _Node()
        if not node.whole and node.rows is None and not node.fields:  # named only as `facts.AREA`: all of it
            node.whole = True
        out.append((area, node.freeze()))
    return tuple(out)


def _whole(value: Any) -> Any:
    return value


@lru_cache(maxsize=4096)
def projector(shape: Shape) -> Callable[[Any], Any]:
    """A function that cuts a value to `shape`: what a rule with this shape can see of it. A cut value is
    a tuple, which parsed JSON never holds, so a cut value and a whole one are never mistaken for each other;
    an unexpected type (a hostile host's list where an object belongs) is kept whole."""
    if shape is None:
        return _whole
    kind, sub = shape
    if kind == "rows":
        row = projector(sub)
        flat = sub is not None and sub[1] and all(s is None for _, s in sub[1])
        if not flat:
            return lambda value: [row(r) for r in value] if type(value) is list else value
        names = [k for k, _ in sub[1]]
        every = operator.itemgetter(*(names * 2 if len(names) == 1 else names))  # always a tuple, never (bool, v)

        def rows(value: Any) -> Any:
            """Rows that all hold every field read: cut in C to a tuple of those fields. A list with a row
            lacking one, or a row that is no object, takes the per-row path instead; its lists hold a tuple
            with one more item (a bool first) or a raw JSON value, so the two never give equal cuts."""
            if type(value) is not list:
                return value
            try:
                return list(map(every, value))
            except (KeyError, TypeError, AttributeError):
                return [row(r) for r in value]

        return rows
    keys = tuple(k for k, _ in sub)
    if all(s is None for _, s in sub):  # flat fields: the common case, done in C
        return lambda value: (bool(value), *map(value.get, keys)) if type(value) is dict else value
    cuts = tuple(projector(s) for _, s in sub)
    return lambda value: (bool(value), *(cut(value.get(k)) for k, cut in zip(keys, cuts))) \
        if type(value) is dict else value


def merge_shapes(a: Shape, b: Shape) -> Shape:
    """A shape that reads what `a` and `b` read."""
    if a is None or b is None or a[0] != b[0]:
        return None
    if a[0] == "rows":
        return ("rows", merge_shapes(a[1], b[1]))
    fields = dict(a[1])
    for name, shape in b[1]:
        fields[name] = merge_shapes(fields[name], shape) if name in fields else shape
    return ("obj", tuple(sorted(fields.items())))


def prune(value: Any, shape: Shape) -> Any:
    """`value` with only what `shape` reads, keeping its form (objects stay objects): a smaller snapshot
    that rules with this shape judge exactly as the whole one."""
    if shape is None:
        return value
    kind, sub = shape
    if kind == "rows":
        return [prune(row, sub) for row in value] if type(value) is list else value
    if type(value) is not dict:
        return value
    kept = {name: prune(value[name], s) for name, s in sub if name in value}
    return kept if kept or not value else value  # never empty a non-empty object: truthiness is read too
