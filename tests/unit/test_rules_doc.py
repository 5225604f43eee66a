"""docs/rules.md is generated from the built-in packs (auditor/rulesdoc.py) and kept in sync by this test."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor import rulesdoc
from auditor.judge import rulefiles
from auditor.judge.rules import load_rules

CITED = """\
pack: mine
description: A pack of my own.
rules:
  - id: mine.hot
    name: Hot cgroups
    title: "{{ facts.cgroups.memory.dying }} dying"
    severity: high
    description: |
      Too many dying
      memory cgroups.
    remediation: Reboot.
    refs: [https://github.com/moby/moby/issues/29638]
    when: "facts.cgroups.memory.dying > `1`"
  - id: mine.image
    title: "machine-id {{ facts.hygiene.machine_id_state }}"
    severity: low
    refs: [https://github.com/systemd/systemd/issues/9609, https://example.org/b]
    when: "facts.hygiene.machine_id_state == 'populated'"
"""


def test_docs_rules_md_is_up_to_date() -> None:
    expected = rulesdoc.builtin_reference()
    current = rulesdoc.DOC.read_text(encoding="utf-8") if rulesdoc.DOC.exists() else ""
    assert current == expected, f"docs/rules.md is out of date: regenerate it with `{rulesdoc.COMMAND}`"


def test_the_reference_has_every_rule_of_every_built_in_pack() -> None:
    text = rulesdoc.DOC.read_text(encoding="utf-8")
    ruleset = load_rules()
    for name in ruleset.packs:
        assert f"\n## {name}\n" in text
    for rule in ruleset.rules:
        section = text[text.index(f"### `{rule.id}`"):]
        section = section[:section.find("\n### ", 1) if "\n### " in section[1:] else len(section)]
        assert f"**{rule.severity}**" in section and all(f"<{url}>" in section for url in rule.refs), rule.id


def test_a_new_pack_is_taken_and_image_capability_follows_the_runtime_sections(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator takes whatever packs the built-in folder holds; cgroups is a runtime area, hygiene is not."""
    assert {"cgroups", "network", "cpu"} <= rulesdoc.runtime_areas() and "hygiene" not in rulesdoc.runtime_areas()
    monkeypatch.setattr(rulefiles, "builtin_rules_dir", lambda: tmp_path)
    (tmp_path / "mine.yaml").write_text(CITED)
    text = rulesdoc.builtin_reference()
    assert "2 rules in 1 packs" in text and "\n## mine\n\nA pack of my own.\n" in text
    hot = text[text.index("### `mine.hot`"):text.index("### `mine.image`")]
    assert "**high** · Hot cgroups" in hot and "Too many dying memory cgroups." in hot
    assert "- Judges: live host only (runtime state: `facts.cgroups`)" in hot
    assert "- Sources: <https://github.com/moby/moby/issues/29638>" in hot and "- Fix: Reboot." in hot
    image = text[text.index("### `mine.image`"):]
    assert "- Judges: image and host\n" in image and "- Reads: `facts.hygiene`" in image
    assert "- Sources: <https://github.com/systemd/systemd/issues/9609>, <https://example.org/b>" in image
    out = tmp_path / "out.md"
    assert rulesdoc.main([str(out)]) == 0 and out.read_text() == text
