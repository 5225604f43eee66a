"""The bound on what a rule's JMESPath can build (judge/expansion.py) holds for what jmespath really
builds: the count of copies is never below the real size ratio, and ordinary rules stay far under it."""

from __future__ import annotations

import json

import jmespath
import pytest

from auditor.judge.expansion import MAX_COPIES, copies
from auditor.judge.rules import load_rules

DATA = {"facts": {"os": {"id": "amzn", "version_id": "2"},
                  "systemd": {"units": [{"name": f"u{i}", "restarts": i} for i in range(5)]}}}


@pytest.mark.parametrize("expression", [
    "facts.os", "facts.os | [@, @]", "facts.os | [@, @] | [@, @, @]", "[facts.os, facts.os, facts]",
    "facts.systemd.units[].[@, @]", "facts.systemd.units[].{a: @, b: @, c: name}",
    "facts.systemd.units[?restarts > `1`].[@, @] | [@, @]", "{x: facts, y: [facts, facts]} | [@, @]",
    "sort_by(facts.systemd.units, &name)[].[@, @]", "to_array(facts) | [@, @][]", "merge(facts, facts.os)",
    "facts.systemd.units[0:3].[@, @]", "facts || [facts, facts]", "values(facts)[].[@, @]",
])
def test_the_count_is_never_below_what_jmespath_builds(expression: str) -> None:
    built = len(json.dumps(jmespath.search(expression, DATA)))
    assert built <= copies(jmespath.compile(expression).parsed) * len(json.dumps(DATA)) + 2, expression


def test_the_builtin_rules_build_far_less_than_the_bound() -> None:
    """Every built-in expression loads (the loader checks the bound); this says by how much they pass."""
    seen: list[int] = []
    real = jmespath.compile

    def counting(text: str) -> object:
        compiled = real(text)
        seen.append(copies(compiled.parsed))
        return compiled

    jmespath.compile = counting  # type: ignore[assignment]
    try:
        load_rules()
    finally:
        jmespath.compile = real
    assert seen and max(seen) * 16 <= MAX_COPIES
