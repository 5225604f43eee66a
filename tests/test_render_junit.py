"""JUnit XML: a testcase per host × rule; failures exactly where findings reach fail_on."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from auditor.render.junit_renderer import render

DATA = Path(__file__).parent / "data" / "reports"
HOSTILE_HOST = "b4</script><script>alert(1)</script>"


def fleet() -> dict:
    return json.loads((DATA / "fleet.json").read_text(encoding="utf-8"))


def outcomes(xml: str) -> dict[tuple[str, str], str]:
    root = ET.fromstring(xml)
    result = {}
    for case in root.iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        assert len(kinds) <= 1, kinds
        result[(case.get("classname"), case.get("name"))] = kinds[0] if kinds else "passed"
    return result


def test_a_testcase_per_host_and_rule_and_failures_only_on_az_b() -> None:
    doc = fleet()
    got = outcomes(render(doc))
    rules = [r["id"] for r in doc["rules"]]
    for host in doc["hosts"]:
        for rule in rules:
            assert (host["name"], rule) in got
    failed = {key for key, kind in got.items() if kind == "failure"}
    assert failed == {(h, r) for h in ("b1", "b2", "b3")
                      for r in ("systemd.unit-crash-looping", "systemd.ecs-enabled-without-cluster", "baseline drift")}


def test_unreachable_host_is_an_error_for_every_rule_never_a_pass() -> None:
    got = outcomes(render(fleet()))
    hostile = {rule: kind for (host, rule), kind in got.items() if host == HOSTILE_HOST}
    assert hostile and set(hostile.values()) == {"error"}


def test_waived_is_skipped_and_below_fail_on_passes_with_output() -> None:
    xml = render(fleet())
    got = outcomes(xml)
    assert got[("a1", "kernel.thp-mode")] == "skipped"
    assert got[("b1", "provenance.source-not-allowlisted")] == "passed"  # medium < high
    case = ET.fromstring(xml).find(".//testcase[@classname='b1'][@name='provenance.source-not-allowlisted']")
    assert "dl.k8s.io" in case.findtext("system-out")


def test_failed_collector_is_an_error() -> None:
    assert outcomes(render(fleet()))[("a3", "collect ecs")] == "error"


def test_totals_match_the_testcases() -> None:
    root = ET.fromstring(render(fleet()))
    for suite in [root, *root.iter("testsuite")]:
        cases = list(suite.iter("testcase"))
        assert int(suite.get("tests")) == len(cases)
        for attr, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
            assert int(suite.get(attr)) == sum(c.find(tag) is not None for c in cases), (suite.get("name"), attr)


def test_fail_on_moves_the_bar() -> None:
    doc = fleet()
    doc["fail_on"] = "medium"
    got = outcomes(render(doc))
    assert got[("b1", "provenance.source-not-allowlisted")] == "failure"
    doc["fail_on"] = None  # scan without a bar: nothing fails
    assert "failure" not in outcomes(render(doc)).values()


def test_hostile_text_round_trips_and_control_characters_stay_valid_xml() -> None:
    doc = fleet()
    bad = copy.deepcopy(doc["findings"][0])
    bad["title"] = "esc \x1b[31mred\x1b[0m & <b>\x00"
    doc["findings"].insert(0, bad)
    root = ET.fromstring(render(doc))
    assert root.find(f"testsuite[@name='{HOSTILE_HOST}']") is not None
    messages = [f.get("message") for f in root.iter("failure")]
    assert "esc \\x1b[31mred\\x1b[0m & <b>\\x00 (+1 more)" in messages  # two failing findings, one case
    evidence = root.find(".//testcase[@classname='b1'][@name='systemd.unit-crash-looping']/failure").text
    assert "<img src=x onerror=alert(1)>" in evidence


def test_junitparser_reads_the_same_outcomes(tmp_path: Path) -> None:
    """A third-party JUnit reader (as CI plugins use) agrees with the XML's own totals."""
    from junitparser import Error, Failure, JUnitXml, Skipped

    path = tmp_path / "report.xml"
    path.write_text(render(fleet()), encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    failed, errored, skipped = set(), set(), set()
    for suite in xml:
        for case in suite:
            for result in case.result:
                bucket = {Failure: failed, Error: errored, Skipped: skipped}[type(result)]
                bucket.add((case.classname, case.name))
    assert {host for host, _ in failed} == {"b1", "b2", "b3"}
    assert (HOSTILE_HOST, "systemd.unit-crash-looping") in errored
    assert skipped == {("a1", "kernel.thp-mode")}
