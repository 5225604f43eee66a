"""How many copies of its input a JMESPath expression can build: a bound on the work it can cause.

`[@, @]` is a list holding its input twice; piped into itself 22 times it holds the input 4 million
times, and `to_string`, `length` or a comparison then walks every copy: seconds and gigabytes per host
from a 200-character rule. Each node's result is bounded here by a multiple of the expression's input
(a field or an index is a part of its input: at most 1; a multi-select is the sum of its parts; a pipe,
a sub-expression or a projection multiplies), and the largest multiple any node reaches is the bound
`compile_bounded` refuses an expression past MAX_COPIES, or longer than MAX_EXPRESSION_CHARS (parsing
200,000 `||` terms takes seconds before the parser's own nesting limit refuses it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jmespath

MAX_EXPRESSION_CHARS = 16_384  # the longest built-in is ~300
MAX_COPIES = 256  # the built-ins build at most 2

_CHAINS = frozenset({"subexpression", "pipe", "index_expression", "projection", "value_projection"})
_VALUES = frozenset({"literal", "comparator", "not_expression", "expref_arg"})


class TooCostly(Exception):
    """An expression whose cost is not bounded enough to run on every host."""


def compile_bounded(text: str) -> Any:
    """jmespath.compile, for an expression within both bounds (TooCostly otherwise)."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise TooCostly(f"JMESPath expression of {len(text):,} characters (at most {MAX_EXPRESSION_CHARS:,})")
    compiled = jmespath.compile(text)
    held = copies(compiled.parsed)
    if held > MAX_COPIES:
        raise TooCostly(f"the expression can build up to {held:,} copies of what it reads (at most {MAX_COPIES}; "
                        "each multi-select such as [@, @] piped on multiplies them): one host could cost seconds "
                        "and gigabytes")
    return compiled


def copies(node: Mapping[str, Any]) -> int:
    """The largest multiple of its input any step of the parsed expression `node` can hold."""
    peak = [1]
    _visit(node, 1, peak)
    return peak[0]


def _visit(node: Mapping[str, Any], context: int, peak: list[int]) -> int:
    """This node's result as a multiple of its input (`context`: that input's multiple of the root's)."""
    kind = node.get("type")
    children = [child for child in node.get("children") or () if isinstance(child, Mapping)]  # a slice's are ints
    if kind in _CHAINS or kind == "filter_projection":
        left = _visit(children[0], context, peak)
        if kind == "filter_projection":
            _visit(children[2], context * left, peak)  # the condition, on each element
        right = _visit(children[1], context * left, peak) if len(children) > 1 else 1
        own = left * right
    elif kind in ("multi_select_list", "multi_select_dict", "function_expression"):
        own = sum(_visit(child, context, peak) for child in children if child.get("type") != "expref")
        for child in children:  # sort_by(list, &key): the key is taken on each element of the list
            if child.get("type") == "expref":
                _visit(child["children"][0], context * max(own, 1), peak)
    elif kind in ("or_expression", "and_expression"):
        own = max(_visit(child, context, peak) for child in children)
    elif kind in _VALUES:
        for child in children:
            _visit(child, context, peak)
        own = 0
    else:  # a part of its input (field, index, slice, flatten, @)
        own = max((_visit(child, context, peak) for child in children), default=1)
    peak[0] = max(peak[0], context * own)
    return own
