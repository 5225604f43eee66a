"""What was not read has one word each — failed, not collected, not applicable — the same in the terminal,
the HTML, Markdown and JSON reports and JUnit; rules that could not be evaluated are JUnit `skipped` with the
reason, and the terminal lists findings worst first with "could not be evaluated" folded into one line per
area below them.

The host is the recorded AL2023 probe output (tests/data/probe) with systemd missing (the probe's "not on
this host", as where systemctl is absent) and the cgroups section timed out, analyzed by the product."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.render.terminal import one_line
from tests.unit.test_image_transport import make_root
from tests.unit.test_render_junit import JUNIT_XSD, outcomes, recorded_host

UNCLEAR = ("not available", "n/a", "?")  # the words used before: one meaning each, never these


def analyze(tmp_path: Path, **section_rc: int) -> tuple[int, str, Path]:
    """`analyze` of the recorded host (sections ending with the given statuses), every format written."""
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    host = recorded_host("h1", **section_rc)
    (snaps / "h1.json").write_text(json.dumps(host.snapshot), encoding="utf-8")
    out = tmp_path / "report"
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["analyze", str(snaps), "--no-store", "--jobs", "1", "--format", "json,junit,html,md",
                 "--out", str(out), "--color", "never"], Env(stdout=stdout, stderr=stderr))
    assert code in (0, 1, 3), stderr.getvalue()
    return code, stdout.getvalue(), out


@pytest.fixture(scope="module")
def no_systemd(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    return analyze(tmp_path_factory.mktemp("nosystemd"), unit_files=3, cgroups=124)


def test_the_host_line_names_what_was_not_read_and_states_no_value_for_it() -> None:
    line = one_line(recorded_host("h", unit_files=3, cgroups=124))
    assert "failed: cgroups" in line and "not collected: systemd" in line, line
    assert "enabled units" not in line and "dying memcgs" not in line, line  # not "0 enabled units"
    assert not any(word in line for word in UNCLEAR), line
    line = one_line(recorded_host("h"))  # all read: the values, no word
    assert re.search(r"\d+ enabled units", line) and "dying memcgs" in line and "not collected" not in line, line


def test_terminal_lists_worst_first_and_folds_what_could_not_be_evaluated(no_systemd: tuple[int, str, Path]) -> None:
    _, text, _ = no_systemd
    lines = text.splitlines()
    findings = [ln for ln in lines if ln.startswith("  [")]
    ranks = ["CRITICAL", "HIGH", "MEDIUM", "LOW", "INFO"]
    order = [ranks.index(re.match(r"  \[(\w+)", ln).group(1)) for ln in findings]
    assert findings and order == sorted(order), findings
    assert not any("could not be evaluated" in ln for ln in findings), findings
    folded = [ln for ln in lines if "could not be evaluated" in ln]
    assert len(folded) == 2, folded  # one line per area, not one per rule
    systemd = next(ln for ln in folded if "reading systemd:" in ln)
    cgroups = next(ln for ln in folded if "reading cgroups:" in ln)
    assert re.search(r"h1: \d+ rules reading systemd: systemd not collected \(systemd is not running", systemd)
    assert "cgroups failed (probe section 'cgroups' timed out" in cgroups
    assert lines.index(folded[0]) > lines.index(findings[-1])  # below the real findings


def test_junit_skips_the_rules_not_evaluated_with_the_reason(no_systemd: tuple[int, str, Path]) -> None:
    _, _, out = no_systemd
    xml = (out / "report.xml").read_text(encoding="utf-8")
    got = outcomes(xml)
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    unevaluated = {f["rule"] for f in doc["findings"] if "could not be evaluated" in f["title"]}
    assert unevaluated and {got[("h1", rule)] for rule in unevaluated} == {"skipped"}
    root = ET.fromstring(xml)
    crash = root.find(".//testcase[@name='systemd.unit-crash-looping']/skipped")
    assert crash is not None and crash.get("message", "").startswith(
        "not evaluated: systemd not collected (systemd is not running")
    memcgs = root.find(".//testcase[@name='cgroups.dying-memcgs']/skipped")
    assert memcgs is not None and memcgs.get("message", "").startswith("not evaluated: cgroups failed")
    assert got[("h1", "collect cgroups")] == "error" and got[("h1", "collect systemd")] == "skipped"
    assert root.find(".//testcase[@name='collect systemd']/skipped").get("message", "").startswith(
        "systemd not collected: ")
    suite = root.find("testsuite")
    assert int(suite.get("skipped")) == sum(v == "skipped" for v in got.values())
    if JUNIT_XSD.is_file():  # the Jenkins schema test (test_render_junit) skips with the reason when absent
        import xmlschema

        xmlschema.XMLSchema10(str(JUNIT_XSD)).validate(xml)


def test_reports_use_the_same_words(no_systemd: tuple[int, str, Path]) -> None:
    _, _, out = no_systemd
    [host] = json.loads((out / "report.json").read_text(encoding="utf-8"))["hosts"]
    assert {a: v["state"] for a, v in host["not_read"].items()} == {"cgroups": "failed", "systemd": "not collected"}
    assert host["facts_summary"]["enabled_units"] is None  # not 0: systemd was not read
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<dt>failed</dt><dd class=\"unknown\">cgroups: probe section" in html
    assert "<dt>not collected</dt><dd class=\"unknown\">systemd: systemd is not running" in html
    assert "<dt>enabled units</dt>" not in html and "<dt>unknown</dt>" not in html
    md = (out / "report.md").read_text(encoding="utf-8")
    assert re.search(r"\*\*Not read:\*\* cgroups failed on 1 host: h1 .*; systemd not collected on 1 host: h1", md)


def test_an_image_says_not_applicable_everywhere(tmp_path: Path) -> None:
    make_root(tmp_path / "img")
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", f"image://{tmp_path / 'img'}", "--no-store", "--format", "json,html,md", "--out",
                 str(tmp_path / "r"), "--color", "never"], Env(stdout=out, stderr=err))
    assert code in (0, 1), err.getvalue()
    collected = io.StringIO()
    assert main(["collect", f"image://{tmp_path / 'img'}", "-o", str(tmp_path / "snaps")],
                Env(stdout=collected, stderr=err)) == 0, err.getvalue()
    line = next(ln for ln in collected.getvalue().splitlines() if ln.startswith(str(tmp_path / "img")))
    assert "not applicable: cgroups,cpu,cpu_stack,disk,gpu,network,proc" in line and "n/a" not in line, line
    [host] = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))["hosts"]
    states: dict[str, Any] = host["not_read"]
    assert states["cgroups"]["state"] == "not applicable" and "unbooted image" in states["cgroups"]["why"]
    html = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "<dt>not applicable</dt>" in html and "<dt>dying memcgs</dt>" not in html


def test_a_rule_not_evaluated_is_never_the_worst_finding(tmp_path: Path) -> None:
    """A host whose only findings are rules that could not be evaluated: the first screen names no finding."""
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    snap = recorded_host("h1", unit_files=3).snapshot
    (snaps / "h1.json").write_text(json.dumps(snap), encoding="utf-8")
    rules = tmp_path / "rules"
    rules.mkdir()  # one pack of one rule that reads systemd (not collected on h1)
    (rules / "mine.yaml").write_text(
        "pack: mine\nrules:\n  - id: mine.units\n    name: units\n    title: some unit failed\n    severity: high\n"
        "    when: \"length(facts.systemd.units[?active_state == 'failed']) > `0`\"\n", encoding="utf-8")
    out = tmp_path / "report"
    code = main(["analyze", str(snaps), "--no-store", "--jobs", "1", "--no-builtin-rules", "--rules", str(rules),
                 "--format", "json,md,html", "--out", str(out)], Env(stdout=io.StringIO(), stderr=io.StringIO()))
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert code == 0 and [f["rule"] for f in doc["findings"]] == ["mine.units"], doc["findings"]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "**Worst finding:**" not in md and "systemd not collected on 1 host" in md, md
    assert "no findings" not in md  # nor all clear: a rule was not evaluated
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Worst finding" not in html and "no findings" not in html
