"""Golden files per scenario and format: tests/golden/<scenario>.<exit>.<format>.

Regenerate after an intended change with AMI_AUDITOR_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from auditor.render import RENDERERS
from auditor.reportdoc import validate_report

DATA = Path(__file__).parent / "data" / "reports"
GOLDEN = Path(__file__).parent / "golden"
SCENARIOS = ("fleet", "fleet-scan", "clean", "incomplete")  # fleet-scan: a real scan of the test fleet
FORMATS = ("json", "html", "md", "junit")
UPDATE = os.environ.get("AMI_AUDITOR_UPDATE_GOLDEN") == "1"


def load(scenario: str) -> dict:
    doc = json.loads((DATA / f"{scenario}.json").read_text(encoding="utf-8"))
    validate_report(doc, str(DATA / f"{scenario}.json"))
    return doc


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rendering_matches_the_golden_file(scenario: str, fmt: str) -> None:
    doc = load(scenario)
    golden = GOLDEN / f"{scenario}.{doc['summary']['exit_code']}.{fmt}"
    text = RENDERERS[fmt][0](doc)
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"{golden} missing: run with AMI_AUDITOR_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8"), (
        f"{fmt} output for {scenario} changed; if intended, rerun with AMI_AUDITOR_UPDATE_GOLDEN=1 and review")


def test_rendering_is_deterministic() -> None:
    doc = load("fleet")
    for fmt in FORMATS:
        assert RENDERERS[fmt][0](doc) == RENDERERS[fmt][0](json.loads(json.dumps(doc))), fmt


def test_every_golden_file_belongs_to_a_scenario_and_format() -> None:
    expected = {f"{s}.{load(s)['summary']['exit_code']}.{f}" for s in SCENARIOS for f in FORMATS}
    assert {p.name for p in GOLDEN.iterdir()} == expected
