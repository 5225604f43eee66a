"""JUnit XML: a testcase per host × rule; failures exactly where findings reach fail_on."""

from __future__ import annotations

import copy
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from auditor.render.junit_renderer import render
from tests.paths import DATA

DATA = DATA / "reports"
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
            if suite is root and attr == "skipped":
                assert suite.get(attr) is None  # junit-10.xsd: not an attribute of <testsuites>
                continue
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


# ------------------------------------------------------------------------------------------------
# the real consumers: Jenkins' xUnit schema, and agreement with the exit code and Prometheus

# Jenkins' xUnit plugin schema, as pytest's sdist ships it; put in place by .ci/setup.d/60-junit-xsd.sh (taken
# from the registry by package name, never committed)
JUNIT_XSD = Path(os.environ.get("AMI_AUDITOR_JUNIT_XSD") or "/var/cache/ami-auditor-ci/junit-10.xsd")
SCENARIOS = sorted(p.stem for p in DATA.glob("*.json"))


@pytest.fixture(scope="module")
def jenkins_schema() -> Any:
    import xmlschema

    if not JUNIT_XSD.is_file():
        pytest.skip(f"{JUNIT_XSD} missing: run .ci/setup.d/60-junit-xsd.sh")
    return xmlschema.XMLSchema10(str(JUNIT_XSD))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_report_is_valid_for_jenkins_xunit(scenario: str, jenkins_schema: Any) -> None:
    xml = render(json.loads((DATA / f"{scenario}.json").read_text(encoding="utf-8")))
    errors = [f"{e.path}: {e.reason}" for e in jenkins_schema.iter_errors(xml)]
    assert not errors, errors


def recorded_host(name: str, **section_rc: int) -> Any:
    """A real snapshot built from the recorded AL2023 probe output, some sections ending with another status
    (3: the probe's "not on this host", as where systemctl is missing; 124: timed out)."""
    from auditor.collect.snapshot import build_snapshot
    from auditor.models import CommandResult, HostResult, HostSpec
    from tests.framing_fixtures import FIXTURE_NONCE

    raw = (DATA.parent / "probe" / "al2023" / "raw.txt").read_text(encoding="utf-8")
    for section, rc in section_rc.items():
        raw = re.sub(rf"^(@@AMI-AUDITOR-END {FIXTURE_NONCE} {section}) rc=\d+@@$", rf"\1 rc={rc}@@", raw, flags=re.M)
    spec = HostSpec(name, "ssh://recorded")
    return HostResult(spec, "ok", None, build_snapshot(spec, CommandResult(raw, "", 0, 1.0), FIXTURE_NONCE))


def no_systemd_host_report() -> dict:
    """A host without systemd, made into a report by the product."""
    from auditor.models import Report
    from auditor.reportdoc import report_to_dict

    result = recorded_host("nosystemd", unit_files=3)
    report = Report(hosts=[result], generated_at="2026-11-30T00:00:00Z", fail_on="high")
    report.exit_code = 0 if result.complete else 3
    return report_to_dict(report)


def test_a_missing_facility_is_skipped_with_its_reason_not_an_error(jenkins_schema: Any) -> None:
    doc = no_systemd_host_report()
    [host] = doc["hosts"]
    assert host["complete"] and "systemd" in host["collector_errors"]  # exit 0 and host_complete 1 say: answer
    xml = render(doc)
    jenkins_schema.validate(xml)
    got = outcomes(xml)
    assert "error" not in got.values()
    assert got[("nosystemd", "collect systemd")] == "skipped"
    skipped = ET.fromstring(xml).find(".//testcase[@name='collect systemd']/skipped")
    assert skipped.get("message").startswith("systemd not collected: systemd is not running")


def test_a_failed_collection_stays_an_error_next_to_a_missing_facility() -> None:
    doc = no_systemd_host_report()
    doc["hosts"][0]["collector_errors"]["cgroups"] = "probe section 'cgroups' timed out on the host"
    doc["hosts"][0]["failed_areas"] = ["cgroups"]
    doc["hosts"][0]["complete"] = False
    got = outcomes(render(doc))
    assert got[("nosystemd", "collect cgroups")] == "error"
    assert got[("nosystemd", "collect systemd")] == "skipped"


def test_scan_local_exit_code_prometheus_and_junit_agree(tmp_path: Path) -> None:
    """This machine, scanned for real: whatever its collectors could not read, the exit code, Prometheus'
    host_complete and the JUnit errors tell the same story."""
    import io

    from auditor.cli import main
    from auditor.context import Env

    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "local", "--no-store", "--format", "json,junit,prom", "--out", str(tmp_path)],
                Env(stdout=out, stderr=err))
    assert code in (0, 1, 3), err.getvalue()
    [host] = json.loads((tmp_path / "report.json").read_text())["hosts"]
    complete = re.search(r'^ami_auditor_host_complete\{host="local"\} (\d)$', (tmp_path / "report.prom").read_text(),
                         re.M)
    assert complete and complete.group(1) == str(int(host["complete"]))
    collect_errors = {name for (_, name), kind in outcomes((tmp_path / "report.xml").read_text()).items()
                      if kind == "error" and name.startswith("collect ")}
    assert collect_errors == {f"collect {a}" for a in host["failed_areas"]}
    assert (code == 3) == (not host["complete"])
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith("local "))
    answers = sorted(set(host["collector_errors"]) - set(host["failed_areas"]))
    if answers:  # this VM: no systemd as PID 1
        assert f"not collected: {','.join(answers)}" in line and "failed:" not in line, line


def test_the_terminal_line_says_not_collected_like_junit() -> None:
    from auditor.render.terminal import one_line

    line = one_line(recorded_host("h", unit_files=3, cgroups=124))
    assert "failed: cgroups" in line and "not collected: systemd" in line, line
