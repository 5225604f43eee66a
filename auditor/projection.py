"""Cutting a value to a shape: what a reader of some fields of a facts area can see of it (pure).

A shape is None (the whole value), ("obj", ((field, shape), …)) or ("rows", shape) for a list of rows.
judge builds shapes from the fact paths a rule reads (judge/shapes.py) and keys its caches by the cut
value; compare cuts snapshots to their stable part with the same functions. Neutral ground: it imports
neither room, so compare never imports judge.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import lru_cache
from typing import Any

Shape = tuple[Any, ...] | None


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
