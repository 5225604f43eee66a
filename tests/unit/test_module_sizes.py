"""Sizes of the units in auditor/: a report, with a few hard limits (DESIGN.md "split by concern, not by count").

Modules: past SOFT_MODULE_LINES a module is listed in the report and must name, in MODULE_CONCERNS, the one
concern that holds it together (if none can be named, split it by concern); past HARD_MODULE_LINES it fails
whatever its concern. Functions stay a gate at FUNCTION_LINES, exceptions listed with why: a function longer
than a screen is nearly always more than one step, and its length is its own business, not a concern's.
Entries that no longer apply fail too, so the lists stay true. `python3 tests/unit/test_module_sizes.py` prints
the report; pytest shows it as a SizeReport warning.
"""

from __future__ import annotations

import ast
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest


def _package() -> Path:
    """auditor/ of this checkout, wherever in tests/ this file sits."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "auditor" / "__init__.py").is_file():
            return parent / "auditor"
    raise RuntimeError("no auditor/ package above " + __file__)


PACKAGE = _package()
SOFT_MODULE_LINES = 400
HARD_MODULE_LINES = 800
FUNCTION_LINES = 60

# module path (under auditor/) → the one concern it holds (required past SOFT_MODULE_LINES)
MODULE_CONCERNS: dict[str, str] = {
    "facttypes.py": "generated from collect/facts.yaml: one TypedDict per object and list row of the schema",
    "image/sections.py": "one reader per probe section of an unbooted root, each refusal named per fact",
    "image/fs.py": "the bounded, no-follow file reads of an image root and their named refusals",
    "judge/rules.py": "a rule pack from YAML to compiled rules, every error in it named with its file and line",
    "render/view.py": "the report document aggregated for people (findings, drift, hosts), shared by HTML and md",
}
# "module path::qualified.name" → why it is longer than FUNCTION_LINES
FUNCTION_ALLOWLIST: dict[str, str] = {
    "image/sections.py::ImageSections.hygiene": "one pass over an image's hygiene paths, each refusal named "
                                                "as its fact's failure, in the probe's s_hygiene order",
}


class SizeReport(UserWarning):
    """The size report, shown in pytest's warnings summary."""


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


def _sizes(package: Path) -> tuple[dict[str, int], dict[str, int]]:
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        text = path.read_text(encoding="utf-8")
        modules[rel] = len(text.splitlines())
        for name, lines in _functions(ast.parse(text, filename=str(path))):
            functions[f"{rel}::{name}"] = lines
    return modules, functions


MODULES, FUNCTIONS = _sizes(PACKAGE)


def module_problems(modules: Mapping[str, int], concerns: Mapping[str, str],
                    soft: int = SOFT_MODULE_LINES, hard: int = HARD_MODULE_LINES) -> list[str]:
    """What fails: a module past `hard`; one past `soft` naming no concern; a concern for a module that is
    gone or back under `soft`; an empty concern."""
    problems = [f"{m}: {n} lines, past the hard ceiling of {hard}: split it by concern"
                for m, n in modules.items() if n > hard]
    problems += [f"{m}: {n} lines, past {soft}: name its one concern in MODULE_CONCERNS, or split it by concern"
                 for m, n in modules.items() if soft < n <= hard and not concerns.get(m, "").strip()]
    problems += [f"{m}: listed in MODULE_CONCERNS but {modules.get(m, 'gone')} lines: remove the entry"
                 for m in concerns if modules.get(m, 0) <= soft]
    return problems


def function_problems(functions: Mapping[str, int], allowed: Mapping[str, str],
                      limit: int = FUNCTION_LINES) -> list[str]:
    """What fails: a function past `limit` with no reason given; a reason for one that is gone or short."""
    problems = [f"{f}: {n} lines, past {limit}: split it into steps (or list it with why)"
                for f, n in functions.items() if n > limit and not allowed.get(f, "").strip()]
    problems += [f"{f}: listed but {functions.get(f, 'gone')} lines: remove the entry"
                 for f in allowed if functions.get(f, 0) <= limit]
    return problems


def report(modules: Mapping[str, int] = MODULES, functions: Mapping[str, int] = FUNCTIONS,
           concerns: Mapping[str, str] = MODULE_CONCERNS, allowed: Mapping[str, str] = FUNCTION_ALLOWLIST) -> str:
    """Modules past the soft size and functions past the limit, largest first, each with its stated
    concern or reason; then what fails, if anything."""
    lines = [f"modules over {SOFT_MODULE_LINES} lines (hard ceiling {HARD_MODULE_LINES}), "
             f"{len(modules)} modules in all:"]
    big = sorted(((n, m) for m, n in modules.items() if n > SOFT_MODULE_LINES), reverse=True)
    lines += [f"  {n:5}  {m}: {concerns.get(m) or 'NO CONCERN NAMED'}" for n, m in big] or ["  none"]
    lines.append(f"functions over {FUNCTION_LINES} lines:")
    long = sorted(((n, f) for f, n in functions.items() if n > FUNCTION_LINES), reverse=True)
    lines += [f"  {n:5}  {f}: {allowed.get(f) or 'NO REASON GIVEN'}" for n, f in long] or ["  none"]
    problems = module_problems(modules, concerns) + function_problems(functions, allowed)
    lines += ["failing:", *(f"  {p}" for p in problems)] if problems else []
    return "\n".join(lines)


def test_the_scan_sees_the_package() -> None:
    assert "transport/ssh.py" in MODULES and "image/fs.py::ImageFS._walk" in FUNCTIONS


def test_size_report() -> None:
    """Shows the report in the run's warnings summary; fails on what module_problems finds."""
    warnings.warn(SizeReport("\n" + report()), stacklevel=1)
    problems = module_problems(MODULES, MODULE_CONCERNS)
    assert not problems, "\n".join(problems)


def test_functions_are_small() -> None:
    problems = function_problems(FUNCTIONS, FUNCTION_ALLOWLIST)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("modules", "concerns", "fails"), [
    ({"a.py": 801}, {"a.py": "one concern"}, "past the hard ceiling"),  # a concern does not lift the ceiling
    ({"a.py": 401}, {}, "name its one concern"),  # a new long module must say what holds it together
    ({"a.py": 401}, {"a.py": "  "}, "name its one concern"),
    ({"a.py": 400}, {"a.py": "one concern"}, "remove the entry"),  # back under the soft size
    ({}, {"gone.py": "one concern"}, "remove the entry"),
])
def test_the_module_check_fails_on_what_it_must(modules: dict[str, int], concerns: dict[str, str],
                                                fails: str) -> None:
    [problem] = module_problems(modules, concerns)
    assert fails in problem


def test_the_module_check_passes_a_long_module_with_a_concern() -> None:
    assert module_problems({"a.py": 800, "b.py": 12}, {"a.py": "one concern"}) == []


@pytest.mark.parametrize(("functions", "allowed", "fails"), [
    ({"m.py::f": 61}, {}, "split it into steps"),
    ({"m.py::f": 60}, {"m.py::f": "why"}, "remove the entry"),
])
def test_the_function_check_fails_on_what_it_must(functions: dict[str, int], allowed: dict[str, str],
                                                  fails: str) -> None:
    [problem] = function_problems(functions, allowed)
    assert fails in problem


def test_the_report_lists_long_units_with_their_concern_and_what_fails() -> None:
    text = report({"big.py": 500, "huge.py": 900, "small.py": 10}, {"m.py::f": 70},
                  {"big.py": "one concern"}, {})
    assert "    900  huge.py: NO CONCERN NAMED" in text and "    500  big.py: one concern" in text
    assert "small.py" not in text and "     70  m.py::f: NO REASON GIVEN" in text
    assert "huge.py: 900 lines, past the hard ceiling of 800" in text.split("failing:")[1]


def test_the_function_measure_counts_nested_and_method_bodies() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            return 1\n        return g\n")
    assert dict(_functions(tree)) == {"A.f": 4, "A.f.g": 2}


if __name__ == "__main__":
    text = report()
    print(text)
    sys.exit(1 if "\nfailing:" in text else 0)
