"""A JMESPath interpreter that remembers each filter's verdict per distinct row (part of the caching judge).

Most rows repeat across a fleet in the fields a filter reads (`restarts`, `sub_state`) even when other
fields (pids, start times) differ on every host, so the verdict is kept under the filter node and the
row's values in exactly those fields — or the whole row when the filter reads it in a way this cannot
follow (`@`, unknown node kinds). Keys are marshal bytes, which tell `true` from `1` and `1.0` (JMESPath
does too); equal rows that marshal differently only miss. Functions are pure (judge/functions.py), so a
verdict depends on nothing else. Only jmespath's public visitor API is used (`visit`, `visit_<node>`).
"""

from __future__ import annotations

import marshal
from itertools import compress, count, repeat
from operator import is_not, itemgetter
from typing import Any

from jmespath.visitor import Options, TreeInterpreter

from .plain import truthy

MAX_ENTRIES = 1 << 20  # verdicts kept; past this the memo starts again (bounded memory on any fleet)
_OPERATORS = ("comparator", "and_expression", "or_expression", "not_expression", "multi_select_list",
              "multi_select_hash", "key_val_pair")
_LEFT_ONLY = ("subexpression", "index_expression", "projection", "filter_projection", "flatten", "pipe")


def row_fields(node: dict[str, Any]) -> frozenset[str] | None:
    """Top-level fields of the row that `node` reads, or None when it may read the row some other way."""
    kind = node["type"]
    if kind == "field":
        return frozenset((node["value"],))
    if kind in ("literal", "expref"):  # an expref runs on the elements of another argument, not on the row
        return frozenset()
    kids = node.get("children", [])
    if kind in _LEFT_ONLY:  # the rest of the chain runs on what the left side returned
        return row_fields(kids[0]) if kids else None
    if kind in _OPERATORS or kind == "function_expression":
        out: set[str] = set()
        for kid in kids:
            got = row_fields(kid)
            if got is None:
                return None
            out |= got
        return frozenset(out)
    return None  # current (@), identity, slices, anything new: key on the whole row


class RowVerdictInterpreter(TreeInterpreter):
    """TreeInterpreter whose filter projections look verdicts up before evaluating them."""

    def __init__(self, options: Options | None = None):
        super().__init__(options)
        self.memo: dict[tuple[int, bytes | None], bool] = {}
        self._fields: dict[int, tuple[str, ...] | None] = {}

    def _fields_of(self, cond: dict[str, Any]) -> tuple[str, ...] | None:
        """The fields the key of a row is made of (one field twice: itemgetter then still gives a tuple)."""
        key = id(cond)
        if key not in self._fields:
            got = row_fields(cond)
            names = None if got is None else tuple(sorted(got))
            self._fields[key] = names * 2 if names is not None and len(names) == 1 else names
        return self._fields[key]

    def visit_filter_projection(self, node: dict[str, Any], value: Any) -> Any:  # type: ignore[override]
        base = self.visit(node["children"][0], value)
        if not isinstance(base, list):
            return None
        cond, right = node["children"][2], node["children"][1]
        ident = id(cond)
        keys = _row_keys(base, self._fields_of(cond))
        memo = self.memo
        verdicts = list(map(memo.get, zip(repeat(ident), keys)))  # most rows are known: looked up in C
        collected = []
        for index in compress(count(), map(is_not, verdicts, repeat(False))):  # rows known false are skipped
            element, verdict = base[index], verdicts[index]
            if verdict is None:
                verdict = truthy(self.visit(cond, element))
                if keys[index] is not None:
                    if len(memo) >= MAX_ENTRIES:
                        memo.clear()
                    memo[(ident, keys[index])] = verdict
            if verdict:
                current = self.visit(right, element)
                if current is not None:
                    collected.append(current)
        return collected


def _row_keys(rows: list[Any], fields: tuple[str, ...] | None) -> list[bytes | None]:
    """Each row's memo key: marshal bytes of its values in `fields` (of the whole row when None), made in C
    when every row is an object holding them all; else row by row (None: a row nested past marshal's depth,
    evaluated without the memo)."""
    try:
        if fields is None:
            return list(map(marshal.dumps, rows, repeat(2)))
        return list(map(marshal.dumps, map(itemgetter(*fields), rows), repeat(2)))
    except (KeyError, TypeError, ValueError):  # a row lacking a field, no object, or too deep: row by row
        pass
    return [_row_key(row, fields) for row in rows]


def _row_key(row: Any, fields: tuple[str, ...] | None) -> bytes | None:
    try:
        if fields is not None and type(row) is dict:
            return marshal.dumps(tuple(map(row.get, fields)), 2)
        return marshal.dumps(row, 2)
    except ValueError:
        return None
