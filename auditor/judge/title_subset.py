"""The part of jinja2 a title may use, checked on the parsed template before it is compiled.

Allowed: output, `{% if %}`, `{% for %}` (not recursive), `{% set name = … %}`, literals, attribute and
item lookups (no `_` names), operators, tests and filters from the sandbox's safe lists, and calls to a few
read-only methods (`.items()`, `.get(…)`, `.lower()` …). Everything else — macros, call/filter/set
blocks, includes, `range()`, method calls that change data — is refused when the rule is loaded, as is a
constant filter argument over the sandbox's width limit (`center(99999999)`).
"""

from __future__ import annotations

from contextlib import suppress

from jinja2 import nodes
from jinja2.sandbox import SecurityError

from .sandbox import BINOPS, MAX_WIDTH, SAFE_FILTERS, SAFE_TESTS, check_format

ALLOWED_NODES = frozenset((
    nodes.Template, nodes.Output, nodes.TemplateData, nodes.Const, nodes.Name, nodes.Getattr, nodes.Getitem,
    nodes.Slice, nodes.Filter, nodes.Test, nodes.CondExpr, nodes.If, nodes.For, nodes.Assign, nodes.List,
    nodes.Tuple, nodes.Dict, nodes.Pair, nodes.Compare, nodes.Operand, nodes.And, nodes.Or, nodes.Not, nodes.Neg,
    nodes.Pos, nodes.Add, nodes.Sub, nodes.Mul, nodes.Div, nodes.FloorDiv, nodes.Mod, nodes.Pow, nodes.Concat,
    nodes.Keyword, nodes.Call,
))
SAFE_METHODS = frozenset(("items", "keys", "values", "get", "lower", "upper", "strip", "lstrip", "rstrip",
                          "startswith", "endswith", "capitalize", "title"))
_SHOWN = {"Macro": "{% macro %}", "CallBlock": "{% call %}", "FilterBlock": "{% filter %} blocks",
          "AssignBlock": "{% set %}…{% endset %} blocks", "With": "{% with %}", "Include": "{% include %}",
          "Import": "{% import %}", "FromImport": "{% from … import %}", "Extends": "{% extends %}",
          "Block": "{% block %}", "NSRef": "attribute assignment", "ExprStmt": "{% do %}"}
# Filters whose test or filter name is an argument: (position of that argument, the names allowed there).
_NAMED_ARG = {"select": (0, SAFE_TESTS), "reject": (0, SAFE_TESTS), "selectattr": (1, SAFE_TESTS),
              "rejectattr": (1, SAFE_TESTS), "map": (0, SAFE_FILTERS)}


class SubsetError(ValueError):
    """A construct outside the title subset; `lineno` is 1-based within the template."""

    def __init__(self, message: str, lineno: int | None):
        super().__init__(message)
        self.lineno = lineno or 1


def _check_args(node: nodes.Filter | nodes.Test | nodes.Call, what: str) -> None:
    if node.dyn_args is not None or node.dyn_kwargs is not None:
        raise SubsetError(f"{what}: *args/**kwargs are not allowed in titles", node.lineno)
    for arg in [*node.args, *(k.value for k in node.kwargs)]:
        if isinstance(arg, nodes.Const) and isinstance(arg.value, (int, float)) and not isinstance(arg.value, bool) \
                and abs(arg.value) > MAX_WIDTH:
            raise SubsetError(f"{what}: argument {arg.value} is over the limit {MAX_WIDTH}", node.lineno)
        if isinstance(arg, nodes.Const) and isinstance(arg.value, str) and len(arg.value) > MAX_WIDTH:
            raise SubsetError(f"{what}: a string argument over {MAX_WIDTH} characters", node.lineno)


def _check_filter(node: nodes.Filter) -> None:
    if node.name not in SAFE_FILTERS:
        raise SubsetError(f"filter {node.name!r} is not allowed in titles", node.lineno)
    _check_args(node, f"filter {node.name!r}")
    named = _NAMED_ARG.get(node.name)
    if named and len(node.args) > named[0]:
        arg = node.args[named[0]]
        if not (isinstance(arg, nodes.Const) and isinstance(arg.value, str) and arg.value in named[1]):
            raise SubsetError(f"filter {node.name!r}: the test or filter it applies must be a literal name from "
                              f"the allowed list", node.lineno)
    if node.name == "format" and isinstance(node.node, nodes.Const) and isinstance(node.node.value, str):
        check_format(node.node.value)


def _const_op(node: nodes.BinExpr) -> None:
    """Try an operation on two literals with the sandbox's checks: SecurityError when over its limits."""
    with suppress(ArithmeticError, TypeError, ValueError):  # `1 % 0`, `'a' ** 2`: reported when rendered
        BINOPS[node.operator](node.left.value, node.right.value)  # type: ignore[attr-defined]


def _check_node(node: nodes.Node) -> None:
    kind = type(node)
    if kind not in ALLOWED_NODES:
        shown = _SHOWN.get(kind.__name__, kind.__name__)
        raise SubsetError(f"{shown}: not allowed in titles", node.lineno)
    if isinstance(node, nodes.Name) and node.name.startswith("_"):
        raise SubsetError(f"name {node.name!r}: names starting with _ are not allowed in titles", node.lineno)
    elif isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
        raise SubsetError(f"attribute {node.attr!r}: names starting with _ are not allowed in titles", node.lineno)
    elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str) \
            and node.arg.value.startswith("_"):
        raise SubsetError(f"item {node.arg.value!r}: names starting with _ are not allowed in titles", node.lineno)
    elif isinstance(node, nodes.Filter):
        _check_filter(node)
    elif isinstance(node, nodes.Test):
        if node.name not in SAFE_TESTS:
            raise SubsetError(f"test {node.name!r} is not allowed in titles", node.lineno)
        _check_args(node, f"test {node.name!r}")
    elif isinstance(node, nodes.Call):
        if not (isinstance(node.node, nodes.Getattr) and node.node.attr in SAFE_METHODS):
            raise SubsetError("calls are not allowed in titles, except the read-only methods "
                              + ", ".join(f".{m}()" for m in sorted(SAFE_METHODS)), node.lineno)
        _check_args(node, f".{node.node.attr}()")
    elif isinstance(node, nodes.For) and node.recursive:
        raise SubsetError("recursive loops are not allowed in titles", node.lineno)
    elif isinstance(node, (nodes.Mul, nodes.Pow, nodes.Add, nodes.Mod)) and isinstance(node.left, nodes.Const) \
            and isinstance(node.right, nodes.Const):  # `7 ** 999999999`, `'x' * 500000000`: refused when loaded
        _const_op(node)
    elif isinstance(node, nodes.Mod) and isinstance(node.left, nodes.Const) and isinstance(node.left.value, str):
        check_format(node.left.value)


def check_subset(ast: nodes.Template) -> None:
    """Raise SubsetError at the first construct a title may not use."""
    for node in (ast, *ast.find_all(nodes.Node)):
        try:
            _check_node(node)
        except SecurityError as exc:  # a constant operation or format string over the sandbox's limits
            raise SubsetError(str(exc), node.lineno) from None
