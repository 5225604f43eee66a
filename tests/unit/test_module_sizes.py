"""Small units (DESIGN.md, issue 23): every module in auditor/ ≤ 400 lines, every function ≤ 60 (ast).

Today's violators are listed with why; a new violation fails, and so does an entry that no longer
violates (shrink the list when a unit is split)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from tests.paths import ROOT

PACKAGE = ROOT / "auditor"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

# module path (under auditor/) → why it is still longer
MODULE_ALLOWLIST: dict[str, str] = {
    "facttypes.py": "generated from collect/facts.yaml: one TypedDict per object and list row of the schema",
    "image/sections.py": "one reader per probe section of an unbooted root; a fact refused is named per path "
                         "(issue 36 replaces this gate with a report and splits modules by concern)",
    "image/fs.py": "the bounded, no-follow file reads of an image root and their named refusals (issue 36)",
}
# "module path::qualified.name" → why it is still longer
FUNCTION_ALLOWLIST: dict[str, str] = {
    "image/sections.py::ImageSections.hygiene": "one pass over an image's hygiene paths, each refusal named "
                                                "as its fact's failure (issue 36 splits by concern)",
}


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines from `def` to its last line) for every function, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def _sizes() -> tuple[dict[str, int], dict[str, int]]:
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        modules[rel] = len(text.splitlines())
        for name, lines in _functions(ast.parse(text, filename=str(path))):
            functions[f"{rel}::{name}"] = lines
    return modules, functions


MODULES, FUNCTIONS = _sizes()


def test_the_scan_sees_the_package() -> None:
    assert "transport/ssh.py" in MODULES and "image/fs.py::ImageFS._walk" in FUNCTIONS


def test_modules_are_small() -> None:
    over = {m: n for m, n in MODULES.items() if n > MAX_MODULE_LINES and m not in MODULE_ALLOWLIST}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them, or allowlist with a reason): {over}"


def test_functions_are_small() -> None:
    over = {f: n for f, n in FUNCTIONS.items() if n > MAX_FUNCTION_LINES and f not in FUNCTION_ALLOWLIST}
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines (split them, or allowlist with a reason): {over}"


@pytest.mark.parametrize(("allowlist", "sizes", "limit"), [
    (MODULE_ALLOWLIST, MODULES, MAX_MODULE_LINES),
    (FUNCTION_ALLOWLIST, FUNCTIONS, MAX_FUNCTION_LINES),
])
def test_the_allowlists_hold_only_todays_violators(allowlist: dict[str, str], sizes: dict[str, int],
                                                   limit: int) -> None:
    stale = {name: sizes.get(name) for name in allowlist if sizes.get(name, 0) <= limit}
    assert not stale, f"no longer over {limit} lines (or gone): remove from the allowlist: {stale}"
    assert all(reason.strip() for reason in allowlist.values())


def test_the_function_measure_counts_nested_and_method_bodies() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            return 1\n        return g\n")
    assert dict(_functions(tree)) == {"A.f": 4, "A.f.g": 2}
