"""The jinja2 environment titles run in: immutable, with caps on what one operation may build and a render budget.

Immutability comes from `ImmutableSandboxedEnvironment` (no `.update()`, `.append()`, `.clear()` on facts,
params or the match; no `_` attributes). Amplifying operations (`*`, `**`, `+`, `%`, `~` and the filters
that pad, repeat or wrap) check the size of what they would build *before* building it, so
`{{ 'x' * 500000000 }}` or `{{ 7 ** 999999999 }}` fail at once. Every attribute lookup, loop step and
operator ticks a per-render budget (steps and wall time) so nested loops over facts stop too.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any, cast

from jinja2 import ChainableUndefined, filters, nodes, pass_environment, pass_eval_context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError
from jinja2.visitor import NodeTransformer

MAX_VALUE = 1_000_000  # characters / items one operation may build
MAX_INT_BITS = 4096  # integers a title may compute (2**4096 is ~1233 digits)
MAX_WIDTH = 4096  # widths, counts and lengths given to filters (center, indent, truncate, format, batch …)
MAX_STEPS = 200_000  # attribute lookups, loop steps and operators per render
TIME_BUDGET_S = 0.5  # wall time per render
CAT_FILTER = "_ami_cat"  # `~`, rewritten to this filter so it is size-checked (names with `_` are not allowed)
ITER_FILTER = "_ami_iter"  # wraps every `for` so each loop step ticks the budget


class BudgetExceeded(SecurityError):
    """A render used up its steps or time: the title is cut."""


class Budget:
    """Steps and wall time left for one render."""

    def __init__(self, steps: int = MAX_STEPS, seconds: float = TIME_BUDGET_S):
        self.steps = steps
        self.deadline = time.monotonic() + seconds

    def tick(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise BudgetExceeded(f"title template used more than {MAX_STEPS} steps")
        if self.steps % 64 == 0 and time.monotonic() > self.deadline:
            raise BudgetExceeded(f"title template ran longer than {TIME_BUDGET_S} s")


BUDGET: ContextVar[Budget | None] = ContextVar("ami_title_budget", default=None)


def tick() -> None:
    budget = BUDGET.get()
    if budget is not None:
        budget.tick()


def _too_big(what: str, size: int, limit: int = MAX_VALUE) -> None:
    if size > limit:
        raise SecurityError(f"{what} would build {size} characters or items (limit {limit})")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?([^a-zA-Z%]*)[a-zA-Z%]")
_NUMBER = re.compile(r"\d+")


def check_format(fmt: str) -> None:
    """A `%` format whose widths and precisions are all literal and within MAX_WIDTH."""
    for spec in _PERCENT_SPEC.finditer(fmt):
        flags = spec.group(1)
        if "*" in flags:
            raise SecurityError("a `*` width in a format string is not allowed in titles")
        for number in _NUMBER.findall(flags):
            if len(number) > 6 or int(number) > MAX_WIDTH:
                raise SecurityError(f"format width {number} is over the limit {MAX_WIDTH}")


def _sized(value: Any) -> int | None:
    return len(value) if isinstance(value, (str, list, tuple)) else None


def safe_mul(left: Any, right: Any) -> Any:
    for seq, n in ((left, right), (right, left)):
        size = _sized(seq)
        if size is not None and _int(n):
            _too_big("repetition", size * max(n, 0))
    if _int(left) and _int(right) and left.bit_length() + right.bit_length() > MAX_INT_BITS:
        raise SecurityError(f"product over {MAX_INT_BITS} bits")
    return left * right


def safe_pow(base: Any, exp: Any) -> Any:
    if _int(base) and _int(exp) and abs(base) > 1 and exp > 0 and exp * math.log2(abs(base)) > MAX_INT_BITS:
        raise SecurityError(f"power over {MAX_INT_BITS} bits")
    return base ** exp


def safe_add(left: Any, right: Any) -> Any:
    a, b = _sized(left), _sized(right)
    if a is not None and b is not None:
        _too_big("concatenation", a + b)
    return left + right


def safe_mod(left: Any, right: Any) -> Any:
    if isinstance(left, str):
        check_format(left)
        args = right if isinstance(right, tuple) else (right,)
        _too_big("format", len(left) + sum(len(str(a)) for a in args if isinstance(a, str)))
    return left % right


BINOPS = {"*": safe_mul, "**": safe_pow, "+": safe_add, "%": safe_mod}


def _width(value: Any, what: str) -> None:
    if _int(value) and abs(value) > MAX_WIDTH:
        raise SecurityError(f"{what} {value} is over the limit {MAX_WIDTH}")
    if isinstance(value, str) and len(value) > MAX_WIDTH:
        raise SecurityError(f"{what} of {len(value)} characters is over the limit {MAX_WIDTH}")


def _cat(items: Iterable[Any]) -> str:
    parts = [str(x) for x in items]
    _too_big("`~`", sum(len(p) for p in parts))
    return "".join(parts)


def _iter(value: Any) -> Iterator[Any]:
    for x in value:
        tick()
        yield x


def _center(value: str, width: int = 80) -> str:
    _width(width, "center width")
    return filters.do_center(value, width)


def _indent(s: str, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    _width(width, "indent width")
    size = len(width) if isinstance(width, str) else max(int(width), 0)
    _too_big("indent", len(str(s)) + (str(s).count("\n") + 1) * size)
    return filters.do_indent(s, width, first, blank)


@pass_environment
def _truncate(env: Any, s: str, length: int = 255, killwords: bool = False, end: str = "...",
              leeway: int | None = None) -> str:
    _width(length, "truncate length")
    _width(end, "truncate end")
    if leeway is not None:
        _width(leeway, "truncate leeway")
    return filters.do_truncate(env, s, length, killwords, end, leeway)


@pass_environment
def _wordwrap(env: Any, s: str, width: int = 79, break_long_words: bool = True, wrapstring: str | None = None,
              break_on_hyphens: bool = True) -> str:
    _width(width, "wordwrap width")
    if wrapstring is not None:
        _width(wrapstring, "wordwrap string")
    sep = len(wrapstring) if wrapstring is not None else 1
    _too_big("wordwrap", len(str(s)) + (len(str(s)) // max(int(width), 1) + 1) * sep)
    return filters.do_wordwrap(env, s, width, break_long_words, wrapstring, break_on_hyphens)


def _batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
    _width(linecount, "batch size")
    return filters.do_batch(value, linecount, fill_with)


def _slice(value: Any, slices: int, fill_with: Any = None) -> Any:
    _width(slices, "slice count")
    return filters.do_slice(value, slices, fill_with)


def _format(value: str, *args: Any, **kwargs: Any) -> str:
    if isinstance(value, str):
        check_format(value)
    return filters.do_format(value, *args, **kwargs)


@pass_eval_context
def _replace(eval_ctx: Any, s: str, old: str, new: str, count: int | None = None) -> str:
    text, old_s, new_s = str(s), str(old), str(new)
    hits = (len(text) + 1 if not old_s else text.count(old_s)) if count is None or count < 0 else count
    _too_big("replace", len(text) + max(len(new_s) - len(old_s), 0) * min(hits, len(text) + 1))
    return filters.do_replace(eval_ctx, s, old, new, count)


@pass_eval_context
def _join(eval_ctx: Any, value: Iterable[Any], d: str = "", attribute: str | int | None = None) -> str:
    items = list(value)
    _too_big("join separators", max(len(items) - 1, 0) * len(str(d)))
    joined: str = filters.do_join(eval_ctx, items, d, attribute)
    return joined


@pass_environment
def _sum(env: Any, iterable: Iterable[Any], attribute: str | int | None = None, start: Any = 0) -> Any:
    """Numbers only: summing lists (`start=[]`) copies quadratically."""
    if not isinstance(start, (int, float)) or isinstance(start, bool):
        raise SecurityError("sum: start must be a number in titles")
    return filters.do_sum(env, iterable, attribute, start)


def _thousands(value: Any) -> Any:
    """`1052` → `1,052` (numbers for people); anything that is not a number is left as it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


# Filters a title may use; the amplifying ones are replaced by the checked versions above.
CHECKED_FILTERS = {"center": _center, "indent": _indent, "truncate": _truncate, "wordwrap": _wordwrap,
                   "batch": _batch, "slice": _slice, "format": _format, "replace": _replace, "join": _join,
                   "sum": _sum, "thousands": _thousands}
PLAIN_FILTERS = ("abs", "capitalize", "count", "d", "default", "dictsort", "first", "float", "filesizeformat",
                 "groupby", "int", "items", "last", "length", "list", "lower", "map", "max", "min", "reject",
                 "rejectattr", "reverse", "round", "select", "selectattr", "sort", "string", "striptags", "title",
                 "trim", "unique", "upper", "urlencode", "wordcount")
SAFE_FILTERS = frozenset((*CHECKED_FILTERS, *PLAIN_FILTERS))
SAFE_TESTS = frozenset(("!=", "<", "<=", "==", ">", ">=", "boolean", "defined", "divisibleby", "eq", "equalto",
                        "even", "false", "float", "ge", "greaterthan", "gt", "in", "integer", "iterable", "le",
                        "lessthan", "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence",
                        "string", "true", "undefined", "upper"))


class _Rewrite(NodeTransformer):
    """`a ~ b` → `[a, b] | _ami_cat` (size-checked); `for x in xs` → `for x in xs | _ami_iter` (budgeted)."""

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)  # transforms the children in place
        items = nodes.List(list(node.nodes), lineno=node.lineno)
        return nodes.Filter(items, CAT_FILTER, [], [], None, None, lineno=node.lineno)

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, ITER_FILTER, [], [], None, None, lineno=node.lineno)
        return node


def rewrite(ast: nodes.Template) -> nodes.Template:
    """The template with its `~` and loops routed through the checks above (done by every compile)."""
    return cast(nodes.Template, _Rewrite().visit(ast))


class TitleEnvironment(ImmutableSandboxedEnvironment):
    """Immutable sandbox; `*`, `**`, `+`, `%` size-checked; every lookup ticks the render budget."""

    intercepted_binops = frozenset(BINOPS)

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        tick()
        return BINOPS[op](left, right)

    def compile(self, source: str | nodes.Template, name: str | None = None, filename: str | None = None,
                raw: bool = False, defer_init: bool = False) -> Any:
        """Every template this environment compiles has its `~` and loops routed through the checks."""
        ast = self._parse(source, name, filename) if isinstance(source, str) else source
        return super().compile(rewrite(ast), name, filename, raw, defer_init)  # type: ignore[call-overload]

    def getattr(self, obj: Any, attribute: str) -> Any:
        tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        tick()
        return super().getitem(obj, argument)


def make_environment() -> TitleEnvironment:
    """Titles: no globals (no range, lipsum, namespace …), only SAFE_FILTERS/SAFE_TESTS, checked amplifiers."""
    env = TitleEnvironment(undefined=ChainableUndefined, autoescape=False, keep_trailing_newline=False)
    env.globals.clear()
    kept = {name: env.filters[name] for name in PLAIN_FILTERS}
    env.filters.clear()
    env.filters.update(kept, **CHECKED_FILTERS)
    env.filters[CAT_FILTER] = _cat
    env.filters[ITER_FILTER] = _iter
    env.tests = {name: env.tests[name] for name in SAFE_TESTS}
    return env
