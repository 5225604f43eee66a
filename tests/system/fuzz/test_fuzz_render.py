"""Fuzz the renderers (json, html, md, junit) on reports full of hostile text and numbers.

Inputs: the saved reports in tests/data/reports with hostile strings and numbers put in place of their
values (control characters, `</script>`, `]]>`, lone surrogates, huge numbers, NaN, infinities), kept
valid against the report schema; and reports built from hostile snapshots judged by the built-in rules.

Contract: no renderer raises; JSON output is strict JSON (no NaN); JUnit output is well-formed XML with
finite times; HTML has exactly the `<script` elements of the template (data never opens one).
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from auditor.models import HostResult, HostSpec, Report
from auditor.render import RENDERERS
from auditor.reportdoc import report_json_schema, report_to_dict
from tests.paths import DATA
from tests.system.fuzz import fuzz_settings, ran
from tests.system.fuzz.strategies import reshaped

REPORTS = sorted((DATA / "reports").glob("*.json"))
SNAPSHOTS = sorted((DATA / "snapshots").glob("*.json"))
# Values the schema pins (enums, consts, bounded scores): keep them, make everything else hostile.
PINNED = {"schema", "severity", "status", "kind", "fail_on", "score"}


@cache
def seed(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


@cache
def validator() -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator(report_json_schema())


@cache
def ruleset() -> Judge:
    return Judge(load_rules())


def unpin(doc: Any, hostile: Any) -> Any:
    """`hostile` with the original value back under every PINNED key, and renamed keys back beside
    their hostile copies (so required keys stay)."""
    if isinstance(doc, dict) and isinstance(hostile, dict):
        out = {k: doc[k] if k in PINNED and k in doc else unpin(doc.get(k), v) for k, v in hostile.items()}
        return {**{k: v for k, v in doc.items() if k not in out}, **out}
    if isinstance(doc, list) and isinstance(hostile, list):
        return [unpin(d, h) for d, h in zip(doc, hostile)]
    return hostile


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} in JSON output")


def script_tags(html: str) -> tuple[int, int]:
    low = html.lower()
    return low.count("<script"), low.count("</script")


@cache
def template_script_tags() -> tuple[int, int]:
    """`<script` / `</script` counts of the HTML page for a clean report (the template's own)."""
    return script_tags(RENDERERS["html"][0](seed(REPORTS[0])))


def assert_renders(doc: dict[str, Any]) -> None:
    for fmt, (render, _ext) in RENDERERS.items():
        out = render(doc)
        assert isinstance(out, str) and out, fmt
        if fmt == "json":
            json.loads(out, parse_constant=_no_constant)
        elif fmt == "junit":
            root = ET.fromstring(out)
            for el in root.iter():
                if "time" in el.attrib:
                    assert math.isfinite(float(el.attrib["time"])), (el.tag, el.attrib["time"])
        elif fmt == "html":
            assert script_tags(out) == template_script_tags(), "data opened or closed a <script> element"


@given(path=st.sampled_from(REPORTS), data=st.data())
@fuzz_settings(150)
def test_render_hostile_reports(path: Path, data: st.DataObject) -> None:
    original = seed(path)
    doc = unpin(original, data.draw(reshaped(original, rate=0.3), label="report"))
    assume(validator().is_valid(doc))
    ran("render.reports")
    assert_renders(doc)


@given(path=st.sampled_from(SNAPSHOTS), data=st.data())
@fuzz_settings(60)
def test_render_reports_of_hostile_snapshots(path: Path, data: st.DataObject) -> None:
    """A hostile snapshot judged by the built-in rules, as a report: evidence and titles carry its values."""
    ran("render.snapshots")
    snap = data.draw(reshaped(seed(path), rate=0.05), label="snapshot")
    findings = ruleset().judge(snap)
    spec = HostSpec(str(snap.get("name")), str(snap.get("target")), labels={"az": "us-east-1a"})
    report = Report(hosts=[HostResult(spec, "ok", None, snap)], findings=findings,
                    generated_at="2026-01-01T00:00:00Z")
    doc = report_to_dict(report)
    assert_renders(doc)


def test_the_script_check_catches_unescaped_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTML oracle can fail: with autoescape off, a host named `</script><script>` shows up in it."""
    from auditor.render import html_renderer

    doc = json.loads(json.dumps(seed(REPORTS[0])))
    doc["hosts"][0]["name"] = "</script><script>alert(1)</script>"
    assert script_tags(RENDERERS["html"][0](doc)) == template_script_tags()
    unescaped = html_renderer.environment().overlay(autoescape=False)
    monkeypatch.setattr(html_renderer, "environment", lambda: unescaped)
    assert script_tags(html_renderer.render(doc)) != template_script_tags()


@pytest.mark.parametrize("duration", [math.nan, math.inf, -math.inf, 10**400], ids=["nan", "inf", "-inf", "10**400"])
def test_render_number_crashes_found_by_fuzzing_stay_fixed(duration: float) -> None:
    """Before: JSON output carried NaN/Infinity, JUnit said time="nan" (or raised OverflowError)."""
    doc = json.loads(json.dumps(seed(REPORTS[0])))
    doc["hosts"][0]["duration_s"] = duration
    assert_renders(doc)
