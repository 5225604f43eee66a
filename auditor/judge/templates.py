"""Finding titles: jinja2 templates over the match, checked when loaded and rendered in an immutable sandbox.

At load: the template must parse, use only the title subset (title_subset.py), name only the render
context (StrictUndefined semantics for names: `{{ bogus }}` is an error, not empty text), and every
`facts.…`, `host.…`, `item.…` chain must be a known fact path, `params.X` a parameter of the pack and
`evidence.X` a declared evidence name. At render: the sandbox (sandbox.py) refuses mutation and caps what
one operation builds; the output is cut at TITLE_MAX characters and the render at its step/time budget,
the title then ending in CUT_MARK.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import Any

from jinja2 import TemplateSyntaxError, meta, nodes
from jinja2.sandbox import SecurityError

from ..collect.schema import FactSpec
from .paths import PathError, Reads, _field
from .sandbox import BUDGET, Budget, make_environment
from .title_subset import SubsetError, check_subset

ENV = make_environment()
# Names a title template may use (the render context of every finding); `item` only in select rules.
CONTEXT_NAMES = ("item", "facts", "host", "labels", "name", "params", "evidence")
TITLE_MAX = 4096  # characters of title kept; the rest is cut
MAX_SOURCE = 16384  # characters of template source (deeper nesting than jinja2 can parse is also exit 2)
CUT_MARK = " …[cut]"


class TemplateError(ValueError):
    """A title template does not parse or names an unknown fact. `lineno` is 1-based within the template."""

    def __init__(self, message: str, lineno: int = 1):
        super().__init__(message)
        self.lineno = lineno


def _chain(node: nodes.Node) -> tuple[str, list[str]] | None:
    """`facts.cpu.threads` → ("facts", ["cpu", "threads"]); None when not a plain attribute chain."""
    attrs: list[str] = []
    while isinstance(node, (nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            attrs.append(node.attr)
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            attrs.append(node.arg.value)
        else:
            return None
        node = node.node
    if isinstance(node, nodes.Name):
        return node.name, attrs[::-1]
    return None


_JINJA_OWN = frozenset({"self", "super"})  # names jinja declares itself in every template or block


def _known(head: str, name: str, known: Collection[str], what: str) -> str | None:
    """An error message when `head.name` is not one of `known`."""
    if name in known:
        return None
    near = difflib.get_close_matches(name, list(known), n=3)
    hint = f" (did you mean {', '.join(near)}?)" if near else f" (known: {', '.join(sorted(known)) or 'none'})"
    return f"unknown {what} {head}.{name}{hint}"


def _check_names(ast: nodes.Template, allowed: set[str]) -> None:
    """StrictUndefined for names, at load time: every name read is a context name or set in the template.
    find_undeclared_variables never reports jinja's own `self` (the template reference) or `super`: refused
    by name, so they cannot slip past the allowlist."""
    internal = next((n for n in ast.find_all(nodes.Name) if n.name in _JINJA_OWN), None)
    if internal is not None:
        raise TemplateError(f"title template: {internal.name!r} is jinja's own name, not one a title can use; "
                            f"a title can use {', '.join(sorted(allowed))} and names it sets", internal.lineno)
    for name in sorted(meta.find_undeclared_variables(ast) - allowed):
        line = next((n.lineno for n in ast.find_all(nodes.Name) if n.name == name), 1)
        extra = " (item is only defined in rules with `select`)" if name == "item" else ""
        raise TemplateError(f"title template: undefined name {name!r}{extra}; a title can use "
                            f"{', '.join(sorted(allowed))} and names it sets", line)


def compile_title(source: str, root: FactSpec, params: Collection[str] | None = None,
                  evidence: Collection[str] | None = None) -> tuple[Any, Reads]:
    """Compile a title template; check it is in the safe subset, names only the context, and that its
    `facts.…`/`host.…`/`item.…` chains are in the schema, `params.X` in `params` and `evidence.X` in
    `evidence` (each when given)."""
    if len(source) > MAX_SOURCE:
        raise TemplateError(f"title template: {len(source)} characters, over the limit {MAX_SOURCE}")
    try:
        return _compile(source, root, params, evidence)
    except RecursionError:
        raise TemplateError("title template: nested too deeply") from None


def _compile(source: str, root: FactSpec, params: Collection[str] | None,
             evidence: Collection[str] | None) -> tuple[Any, Reads]:
    try:
        ast = ENV.parse(source)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"title template: {exc.message}", exc.lineno or 1) from None
    try:
        check_subset(ast)
    except SubsetError as exc:
        raise TemplateError(f"title template: {exc}", exc.lineno) from None
    allowed = {n for n in CONTEXT_NAMES if n != "item" or "item" in root.children}
    _check_names(ast, allowed)
    reads = Reads()
    chains = {id(n): (n, c) for n in ast.find_all((nodes.Getattr, nodes.Getitem)) if (c := _chain(n))}
    inner = {id(m) for n, _ in chains.values() for m in n.find_all((nodes.Getattr, nodes.Getitem))}
    chain_bases: set[int] = set()
    for key, (node, (head, attrs)) in chains.items():
        if key in inner:
            continue
        lists = {"params": (params, "parameter"), "evidence": (evidence, "evidence name")}
        if head in lists and lists[head][0] is not None and attrs:
            problem = _known(head, attrs[0], lists[head][0] or (), lists[head][1])
            if problem:
                raise TemplateError(f"title template: {problem}", node.lineno)
        spec = root.children.get(head)
        if spec is None:
            continue
        chain_bases.update(id(n) for n in node.find_all(nodes.Name) if n.name == head)
        try:
            for i, attr in enumerate(attrs):
                spec = _field(spec, attr, reads, note=i == len(attrs) - 1)
        except PathError as exc:
            raise TemplateError(f"title template: {exc}", node.lineno) from None
    for name in ast.find_all(nodes.Name):
        if name.name in root.children and id(name) not in chain_bases:
            reads.note(root.children[name.name].path or name.name)
    try:
        template = ENV.from_string(ast)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"title template: {exc.message}", exc.lineno or 1) from None
    return template, reads


def render_title(template: Any, context: dict[str, Any], fallback: str) -> str:
    """Render a title within its budget. Output past TITLE_MAX, an operation over the sandbox's limits or a
    render over its step/time budget cut the title (CUT_MARK); any other failure yields the fallback."""
    token = BUDGET.set(Budget())
    parts: list[str] = []
    size, cut, why = 0, False, "output over the size cap"
    stream = template.generate(**context)
    try:
        for chunk in stream:
            parts.append(chunk)
            size += len(chunk)
            if size > TITLE_MAX:
                cut = True
                break
    except SecurityError as exc:
        cut, why = True, str(exc)
    except Exception as exc:  # noqa: BLE001 - a bad title must not sink the judge
        return f"{fallback} (title template failed: {type(exc).__name__})"
    finally:
        stream.close()
        BUDGET.reset(token)
    text = " ".join("".join(parts).split())
    if len(text) > TITLE_MAX:
        text, cut = text[:TITLE_MAX], True
    if cut:
        return (text or f"{fallback} (title template stopped: {why})") + CUT_MARK
    return text or fallback
