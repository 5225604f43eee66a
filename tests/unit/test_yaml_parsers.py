"""The YAML loader runs over libyaml's parser (C): the same documents, lines and refusals as over PyYAML's own.

PyYAML's pure-Python scanner took 2.5 minutes and 3.2 GB for an 8 MiB file (every rule pack, waiver file,
baseline and inventory is read through this loader), so the loader parses with libyaml and keeps PyYAML's
composer and constructor, where the line numbers, depth and alias bounds live. These tests load every YAML
file of the repository and a set of tricky and hostile texts both ways and compare everything a caller
sees: values, types, the line and column of each key and item, the source text of numbers and the spans of
block scalars; and that what one refuses, the other refuses at the same line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditor.errors import InputError
from auditor.yamlload import LineDict, LineList, _LineLoader, _LineLoading, _Parser, _PyParser, load_yaml_text
from tests.paths import ROOT

FILES = sorted(p for d in ("rules", "tests/data", "contrib", "docs", ".github") for p in (ROOT / d).rglob("*.y*ml")
               if p.suffix in (".yaml", ".yml"))


class _PyLineLoader(_LineLoading, _PyParser):
    def __init__(self, stream: str):
        _PyParser.__init__(self, stream)
        _LineLoading.__init__(self)


def _load(loader_class: type, text: str) -> Any:
    loader = loader_class(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _seen(value: Any) -> Any:
    """Everything a caller can read of a loaded value, as plain data."""
    if isinstance(value, LineDict):
        return ("map", value.line, value.col, [(k, _seen(v)) for k, v in value.items()], value.key_lines,
                value.key_cols, value.key_texts, getattr(value, "value_spans", None))
    if isinstance(value, LineList):
        return ("list", value.line, value.col, [_seen(v) for v in value], value.item_lines, value.item_cols,
                value.item_texts)
    return (type(value).__name__, repr(value))


TRICKY = [
    "a: 1\nb: [1, 2, {c: d}]\n",
    "x: &anchor {k: v}\ny: *anchor\nz:\n  <<: *anchor\n  k2: v2\n",
    "text: |\n  line one\n  line two\nfolded: >-\n  a\n  b\nnext: 1\n",
    "n: 010\nh: 0x1F\no: 0o17\nf: 1.5e3\nb: yes\nnull1: ~\nnull2:\nd: 2026-12-04\nt: 2026-12-04T01:02:03Z\n",
    "'quoted key': \"v\\tx\"\n? complex\n: value\nlist:\n- a\n-   b\n- - nested\n  - again\n",
    "# comment\n---\nkey: value # trailing\n...\n",
    "multi: \"one\n  two\"\nplain: one\n  two\n",
    "unicode: héllo ✓ 😀\n\"k é\": [é, ✓]\n",
    "empty: {}\nlist: []\nstr: ''\n",
    "deep: " + "[" * 40 + "]" * 40 + "\n",
    "",
    "just a scalar\n",
]

REFUSED = [
    "a: [1, 2\nb: 3\n",
    "a: 1\n---\nb: 2\n",
    "a: 1\n\tb: 2\n",
    "a: 1\na: 2\n",
    "a: *nowhere\n",
    "a: &x [*x]\n",
    "deep: " + "[" * 100 + "]" * 100 + "\n",
    "laughs: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
    "a: \"x\x1by\"\n",
    "a: 1\nb: x\x00y\n",
    "n: " + "1" * 5000 + "\n",
    "f: .nan\n",
    "t: !!timestamp nope\n",
    "i: !!int x\n",
    "key: - a\n",
    "{a: 1\n",
    "a: 'unterminated\n",
    "a: !!python/object:os.system ls\n",
]


def test_libyaml_is_what_the_loader_parses_with() -> None:
    """Every PyYAML 6 wheel has libyaml; without it the loader would silently fall back to the slow path."""
    assert _Parser is not _PyParser


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_yaml_file_of_the_repository_loads_the_same_both_ways(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _seen(_load(_LineLoader, text)) == _seen(_load(_PyLineLoader, text))


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_texts_load_the_same_both_ways(text: str) -> None:
    assert _seen(_load(_LineLoader, text)) == _seen(_load(_PyLineLoader, text))


@pytest.mark.parametrize("text", REFUSED)
def test_what_one_parser_refuses_the_other_refuses_too(text: str) -> None:
    """Through load_yaml_text, with either parser: an InputError, at the same line when both name one."""
    with pytest.raises(InputError) as c_side:
        load_yaml_text(text, "x.yaml")
    with pytest.raises(Exception) as py_side:
        _load(_PyLineLoader, text)
    mark = getattr(py_side.value, "problem_mark", None)
    py_line = getattr(py_side.value, "line", None) or (mark.line + 1 if mark is not None else None)
    if c_side.value.line is not None and py_line is not None:
        assert abs(c_side.value.line - py_line) <= 1, (c_side.value, py_side.value)


def test_a_large_file_loads_whole() -> None:
    """A 20,000-item list (what a big inventory or baseline holds in items), every item and line kept."""
    text = "items:\n" + "".join(f"- {{name: h{i}, n: {i}}}\n" for i in range(20_000))
    doc = load_yaml_text(text, "big.yaml")
    items = doc["items"]
    assert len(items) == 20_000 and items[-1] == {"name": "h19999", "n": 19999}
    assert items.line_of(19_999) == 20_001


def test_a_document_of_more_values_than_the_bound_is_refused_at_the_line_it_passes_it() -> None:
    """8 MiB of `[1,1,1,…` is 4,000,000 values: refused once the count passes MAX_NODES, at that line,
    before the rest is parsed or built."""
    from auditor.yamlload import MAX_NODES

    per_line = 1000
    lines = MAX_NODES // per_line + 10
    text = "a:\n" + "".join("- [" + ",".join(["1"] * (per_line - 1)) + "]\n" for _ in range(lines))
    with pytest.raises(InputError) as info:
        load_yaml_text(text, "big.yaml")
    assert f"more than {MAX_NODES:,} values" in info.value.message
    assert info.value.line == 1 + MAX_NODES // per_line  # `a:` is line 1; with the root, a and its list it is
    # 3 + 1,000 values per line, so the 1,000th list (line 1,001) passes the bound


def test_garbage_collection_is_paused_only_while_a_document_is_built() -> None:
    """Paused for the load (each full collection would walk every node built so far), on again after a
    document and after a refusal; left off when the caller had it off."""
    import gc

    seen: list[bool] = []
    original = _LineLoading.construct_yaml_str

    def spy(loader: Any, node: Any) -> Any:
        seen.append(gc.isenabled())
        return original(loader, node)

    _LineLoading.yaml_constructors["tag:yaml.org,2002:str"] = spy
    try:
        assert load_yaml_text("a: b\n") == {"a": "b"} and seen == [False, False] and gc.isenabled()
        with pytest.raises(InputError):
            load_yaml_text("a: b\na: c\n")
        assert gc.isenabled()
        gc.disable()
        try:
            load_yaml_text("a: b\n")
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        _LineLoading.yaml_constructors["tag:yaml.org,2002:str"] = original
