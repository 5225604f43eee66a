"""Finding titles: sandboxed jinja2 templates over the match, with their fact paths checked like expressions."""

from __future__ import annotations

from typing import Any

from jinja2 import ChainableUndefined, TemplateSyntaxError, nodes
from jinja2.sandbox import SandboxedEnvironment

from ..collect.schema import FactSpec
from .paths import PathError, Reads, _field

ENV = SandboxedEnvironment(undefined=ChainableUndefined, autoescape=False, keep_trailing_newline=False)
# Names a title template may use (the render context of every finding).
CONTEXT_NAMES = ("item", "facts", "host", "labels", "name", "params", "evidence")


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


def compile_title(source: str, root: FactSpec) -> tuple[Any, Reads]:
    """Compile a title template; check `facts.…`, `host.…` and `item.…` chains against the schema."""
    try:
        ast = ENV.parse(source)
        template = ENV.from_string(source)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"title template: {exc.message}", exc.lineno or 1) from None
    reads = Reads()
    chains = {id(n): (n, c) for n in ast.find_all((nodes.Getattr, nodes.Getitem)) if (c := _chain(n))}
    inner = {id(m) for n, _ in chains.values() for m in n.find_all((nodes.Getattr, nodes.Getitem))}
    chain_bases: set[int] = set()
    for key, (node, (head, attrs)) in chains.items():
        spec = root.children.get(head)
        if key in inner or spec is None:
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
    return template, reads


def render_title(template: Any, context: dict[str, Any], fallback: str) -> str:
    """Render a title; a template that fails at run time yields the fallback, never an exception."""
    try:
        text = template.render(**context)
    except Exception as exc:  # noqa: BLE001 - a bad title must not sink the judge
        return f"{fallback} (title template failed: {type(exc).__name__})"
    return " ".join(text.split()) or fallback
