"""Property tests moved out of the unit tier for its two-minute budget: each runs hundreds of generated
documents or hosts against a reference (the stdlib JSON path, the Python jsonschema validator, the plain
judge, the whole report document). Their helpers stay beside the unit tests of the same module."""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from auditor import jsonload
from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from auditor.render.json_renderer import render, render_stdlib
from auditor.schemacheck import FastCheck
from tests.paths import DATA
from tests.system.fuzz import fuzz_settings
from tests.system.fuzz.strategies import JSON_TOKENS, mutated_doc, mutated_text, reshaped
from tests.unit.test_jsonload import DOCS, HOSTILE, height, long_ints, same
from tests.unit.test_judge_exact_cache import TRICKY_PACK, _host, _reference, _twin
from tests.unit.test_render_json import parsed
from tests.unit.test_schemacheck import SCHEMAS, SEEDS, finite, python_valid, rs_verdict


# from tests/unit/test_schemacheck.py
@pytest.mark.parametrize("kind", list(SCHEMAS))
@fuzz_settings(150)
@given(data=st.data())
def test_mutated_documents_same_verdict(kind: str, data: st.DataObject) -> None:
    """Mutated and reshaped documents: FastCheck never says valid where jsonschema says invalid; on
    documents as JSON gives them (lists, finite numbers, string keys) both say the same (when
    jsonschema-rs can read them at all: it raises on a lone surrogate in a key)."""
    seed = data.draw(st.sampled_from(SEEDS[kind]))
    doc = data.draw(st.one_of(mutated_doc(seed), reshaped(seed, rate=0.2)))
    check = FastCheck(SCHEMAS[kind])
    if check.valid(doc):
        assert python_valid(kind, doc)
    try:
        as_json = json.loads(json.dumps(doc, default=str))
    except (ValueError, TypeError):
        return
    if finite(as_json) and rs_verdict(kind, as_json) is not None:
        assert rs_verdict(kind, as_json) == python_valid(kind, as_json)
        assert check.valid(as_json, from_json=True) == python_valid(kind, as_json)


# from tests/unit/test_render_json.py
@fuzz_settings(150)
@given(reshaped(json.loads((DATA / "reports" / "fleet-scan.json").read_text(encoding="utf-8")), rate=0.3))
def test_reshaped_reports_same_document(doc: dict[str, Any]) -> None:
    assert parsed(render(doc)) == parsed(render_stdlib(doc))


# from tests/unit/test_judge_exact_cache.py
def test_cached_and_remembered_verdicts_equal_fresh_evaluation(tmp_path: Path) -> None:
    (tmp_path / "tricky.yaml").write_text(TRICKY_PACK)
    ruleset = load_rules([tmp_path], builtin=True)
    rng = random.Random(14)
    hosts = []
    for i in range(160):
        hosts.append(_host(rng, i))
        if i % 3 == 0:  # a twin: the same host but for fields only some rules read (pids, mtimes)
            twin = _twin(rng, hosts[-1], i)
            hosts.append(twin)
    judge = Judge(ruleset)
    got = [[asdict(f) for f in judge.judge(s)] for s in hosts]
    want = [_reference(ruleset, s) for s in hosts]
    for snap, g, w in zip(hosts, got, want):
        assert g == w, snap["name"]
    # the shortcuts were taken (otherwise this proves nothing): far fewer runs than rules x hosts
    rules_per_host = sum(1 for r in ruleset.rules if r.fleet is None)
    assert judge.evaluations < rules_per_host * len(hosts) * 0.6
    assert judge.plain.interpreter.memo  # type: ignore[attr-defined]
    # and the hosts really differ in what the rules read: many distinct verdict sets
    assert len({repr(sorted((f["rule"], f["item"], f["title"]) for f in g)) for g in got}) > 40


# from tests/unit/test_jsonload.py
@fuzz_settings(400)
@given(DOCS, st.integers(0, 8), st.booleans())
def test_screen_measures_nesting_exactly(doc: Any, limit: int, ascii_only: bool) -> None:
    """Whatever the strings hold (brackets, quotes, backslashes, escapes), the byte-level screen finds the
    document's real nesting."""
    data = json.dumps(doc, ensure_ascii=ascii_only).encode()
    quotes, _ = jsonload._escapes(data)
    assert jsonload._deeper_than(jsonload._structure(data, quotes), limit) == (height(doc) > limit)
    if long_ints(doc):
        assert jsonload._long_integer(data, quotes)
    # past 256 escapes the positions are not known: the escapes are paired off in the text itself
    assert jsonload._deeper_than(jsonload._structure(data, None), limit) == (height(doc) > limit)


# from tests/unit/test_jsonload.py
@fuzz_settings(300)
@given(st.one_of(DOCS.map(json.dumps), st.sampled_from(list(HOSTILE.values()))).flatmap(
    lambda text: mutated_text(text, JSON_TOKENS)))
def test_mutated_json_same_outcome_as_the_stdlib_path(text: str) -> None:
    same(text)

