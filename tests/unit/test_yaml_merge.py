"""YAML merge keys (`<<: *anchor`): a mapping's own keys override merged ones (YAML merge semantics), so a
rule can be written as "that one, with another id"; a key written twice in the mapping itself is still a
duplicate; with several sources the first one listed wins."""

from __future__ import annotations

import io
from pathlib import Path

from auditor.cli import main
from auditor.context import Env
from auditor.yamlload import load_yaml_file

BASE = 'rules:\n  - &b {id: mine.a, title: t, severity: high, when: "`true`"}\n  - <<: *b\n    id: mine.b\n'


def rules_check(tmp_path: Path, text: str) -> tuple[int, str]:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    code = main(["rules", "check", str(path)], Env(out, err))
    return code, out.getvalue() + err.getvalue()


def test_an_own_key_overrides_a_merged_one(tmp_path: Path) -> None:
    code, text = rules_check(tmp_path, BASE + "    severity: low\n")
    assert code == 0, text
    assert "mine.a, mine.b" in text


def test_an_own_key_written_twice_is_still_a_duplicate(tmp_path: Path) -> None:
    code, text = rules_check(tmp_path, BASE + "    id: mine.c\n")
    assert code == 2, text
    assert f"{tmp_path / 'r.yaml'}:5: duplicate key 'id'" in text


def test_merged_values_and_lines(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("a: &a {x: 1, y: 2}\nb: &b {x: 3, z: 4}\nc:\n  <<: [*a, *b]\n  y: 9\n")
    doc = load_yaml_file(path)
    assert doc["c"] == {"x": 1, "y": 9, "z": 4}  # the first source wins over the second, own keys over both
    assert doc["c"].line_of("y") == 5 and doc["c"].line_of("x") == 1
