"""Golden files per scenario and format: tests/golden/<scenario>.<exit>.<format>.

HTML goldens hold the report body without the inlined stylesheet and script (those are checked by the
browser test, and a CSS tweak must not churn every golden file); Markdown and JUnit are whole. JSON has no
golden file: re-rendering a saved report must give back the same document, which is asserted on meaning.
Regenerate after an intended change with AMI_AUDITOR_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from auditor.judge.rules import load_rules
from auditor.render import RENDERERS
from auditor.reportdoc import validate_report
from tests.paths import DATA, GOLDEN

DATA = DATA / "reports"
SCENARIOS = ("fleet", "fleet-scan", "clean", "incomplete")  # fleet-scan: a real scan of the test fleet
GOLDEN_FORMATS = ("html", "md", "junit")
UPDATE = os.environ.get("AMI_AUDITOR_UPDATE_GOLDEN") == "1"
_INLINE_ASSETS = re.compile(r"<(script|style)\b[^>]*>.*?</\1>", re.S)


def load(scenario: str) -> dict:
    doc = json.loads((DATA / f"{scenario}.json").read_text(encoding="utf-8"))
    validate_report(doc, str(DATA / f"{scenario}.json"))
    return doc


def comparable(fmt: str, text: str) -> str:
    """What a golden file holds for `fmt`: HTML's <body> with inline script/style elements emptied."""
    if fmt != "html":
        return text
    start, end = text.index("<body"), text.rindex("</body>") + len("</body>")
    return _INLINE_ASSETS.sub(lambda m: f"<{m.group(1)}>…</{m.group(1)}>", text[start:end]) + "\n"


@pytest.mark.parametrize("fmt", GOLDEN_FORMATS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rendering_matches_the_golden_file(scenario: str, fmt: str) -> None:
    doc = load(scenario)
    golden = GOLDEN / f"{scenario}.{doc['summary']['exit_code']}.{fmt}"
    text = comparable(fmt, RENDERERS[fmt][0](doc))
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"{golden} missing: run with AMI_AUDITOR_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8"), (
        f"{fmt} output for {scenario} changed; if intended, rerun with AMI_AUDITOR_UPDATE_GOLDEN=1 and review")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_json_rendering_gives_back_the_same_report(scenario: str) -> None:
    doc = load(scenario)
    text = RENDERERS["json"][0](doc)
    again = json.loads(text)
    validate_report(again, f"{scenario} re-rendered")
    assert again == doc
    assert again["summary"]["exit_code"] == doc["summary"]["exit_code"]
    assert len(again["findings"]) == len(doc["findings"]) and len(again["hosts"]) == len(doc["hosts"])


def test_html_golden_body_still_carries_the_inline_assets_it_elides() -> None:
    html = RENDERERS["html"][0](load("clean"))
    assert re.search(r"<style>\S", html) and re.search(r"<script>\S", html)
    body = comparable("html", html)
    assert "<script>…</script>" in body and "<style" not in body and body.startswith("<body")


def test_rendering_is_deterministic() -> None:
    doc = load("fleet")
    for fmt in RENDERERS:
        assert RENDERERS[fmt][0](doc) == RENDERERS[fmt][0](json.loads(json.dumps(doc))), fmt


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_fixture_reports_name_only_rules_the_product_has(scenario: str) -> None:
    known = load_rules(builtin=True).ids()
    used = {f["rule"] for f in load(scenario)["findings"]}
    assert used <= known, f"{scenario}.json names rules the product does not have: {sorted(used - known)}"


def test_every_golden_file_belongs_to_a_scenario_and_format() -> None:
    expected = {f"{s}.{load(s)['summary']['exit_code']}.{f}" for s in SCENARIOS for f in GOLDEN_FORMATS}
    assert {p.name for p in GOLDEN.iterdir()} == expected
