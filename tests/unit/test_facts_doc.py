"""docs/facts.md is generated from the fact schema (auditor/factsdoc.py) and kept in sync by this test."""

from __future__ import annotations

from pathlib import Path

from auditor import factsdoc
from auditor.collect.schema import fact_paths, parse_schema

MINE = """\
host:
  hostname: {type: string, volatile: true, description: Host name}
facts:
  mine:
    level: {type: integer, drift: high, description: "A level | with a pipe"}
    rows:
      type: list
      key: name
      description: Rows of mine
      items:
        name: {type: string, description: Row name}
        seen: {type: integer, volatile: true, description: Times seen}
    tags: {type: map, values: string, description: Free tags}
"""


def test_docs_facts_md_is_up_to_date() -> None:
    current = factsdoc.DOC.read_text(encoding="utf-8") if factsdoc.DOC.exists() else ""
    assert current == factsdoc.reference(), f"docs/facts.md is out of date: regenerate it with `{factsdoc.COMMAND}`"


def test_every_declared_path_has_its_row() -> None:
    text = factsdoc.DOC.read_text(encoding="utf-8")
    for path, spec in fact_paths().items():
        if spec.type == "object" and not spec.description or path in ("host", "facts") or path.count(".") == 1 \
                and path.startswith("facts."):
            continue
        assert f"| `{path}` |" in text, path


def test_a_schema_becomes_its_table(tmp_path: Path) -> None:
    text = factsdoc.render(parse_schema(MINE))
    assert "6 declared paths: `host` and 1 areas under `facts`" in text
    assert "\n## `host`\n" in text and "\n## `facts.mine`\n" in text
    assert "| `host.hostname` | string | volatile | Host name |" in text
    assert "| `facts.mine.level` | integer | drift: high | A level \\| with a pipe |" in text
    assert "| `facts.mine.rows` | list of rows (key `name`) |  | Rows of mine |" in text
    assert "| `facts.mine.rows[].seen` | integer | volatile | Times seen |" in text
    assert "| `facts.mine.tags` | map of string |  | Free tags |" in text
    out = tmp_path / "facts.md"
    assert factsdoc.main([str(out)]) == 0 and out.read_text() == factsdoc.reference()
