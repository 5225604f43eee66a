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

The shape algebra itself (projector, merge_shapes, prune) is auditor/projection.py's: compare cuts
snapshots with it too, and must not import judge.
"""

from __future__ import annotations

from ..collect.schema import FactSpec, fact_tree
from ..factpath import Step
from ..factpath import parse as parse_path
from ..projection import Shape, merge_shapes, projector, prune
from .paths import element


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


# the shape algebra (auditor/projection.py) re-exported for judge/engine.py
__all__ = ["Shape", "area_shapes", "merge_shapes", "projector", "prune"]
