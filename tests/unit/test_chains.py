"""Incident chains as data: `leads_to` validated at load (file:line), chains linked per host from real rules
judging recorded real snapshots, partial chains never invented, chain text escaped in every renderer."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import pytest

from auditor.chaingraph import positions
from auditor.cli import main
from auditor.context import Env
from auditor.judge.chains import host_chains
from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from auditor.models import Finding
from auditor.render import RENDERERS, view
from tests.paths import DATA

FLEET = DATA / "compare" / "fleet"
REPORTS = DATA / "reports"

CHAINED = """\
pack: mine
rules:
  - id: mine.first
    title: first
    severity: high
    when: "facts.os.id == 'debian'"
    leads_to: [mine.second]
    link: "it starts on {{ facts.os.id }}"
  - id: mine.second
    title: second
    severity: medium
    when: "facts.os.id == 'debian'"
    leads_to:
      - mine.third
  - id: mine.third
    title: third
    severity: low
    when: "facts.os.id == 'debian'"
"""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def check(tmp_path: Path, text: str) -> tuple[int, str, str]:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return run("rules", "check", str(path), "--no-builtin-rules")


def snapshot(name: str) -> dict:
    return json.loads((FLEET / f"{name}.json").read_text())


def test_a_chained_pack_checks_ok(tmp_path: Path) -> None:
    code, out, err = check(tmp_path, CHAINED)
    assert (code, err) == (0, ""), out


@pytest.mark.parametrize(("text", "line", "message"), [
    (CHAINED.replace("[mine.second]", "[mine.secnd]"), 7, "leads_to: unknown rule 'mine.secnd' (did you mean "
                                                          "mine.second"),
    (CHAINED.replace("      - mine.third", "      - mine.first"), 14, "leads_to: 'mine.first' closes a cycle "
                                                                        "(mine.first → mine.second → mine.first)"),
    (CHAINED.replace("[mine.second]", "[mine.first]"), 7, "closes a cycle (mine.first → mine.first)"),
    (CHAINED.replace("[mine.second]", "[mine.second, mine.second]"), 7, "'mine.second' is listed twice"),
    (CHAINED.replace("[mine.second]", "mine.second"), 7,
     "rule 'mine.first': leads_to must be a list of rule ids, not a string"),
    (CHAINED.replace("[mine.second]", "[Not An Id]"), 7, "leads_to[0] must be a rule id, not 'Not An Id'"),
    (CHAINED.replace("{{ facts.os.id }}", "{{ facts.os.idd }}"), 8, "link template: unknown fact path"),
])
def test_bad_leads_to_or_link_exits_2_naming_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    code, out, err = check(tmp_path, text)
    assert code == 2, (out, err)
    assert re.search(rf"{re.escape(str(tmp_path / 'mine.yaml'))}:{line}:(\d+:)? ", err), err  # schema errors: :COL
    assert message in err


def test_builtin_packs_declare_the_pinterest_chain_in_order() -> None:
    pos = positions(load_rules().graph())
    assert (pos["systemd.ecs-enabled-without-cluster"] < pos["systemd.unit-crash-looping"]
            < pos["cgroups.dying-memcgs"] == pos["cgroups.dying-memcgs-critical"]
            < pos["cpu.hot-core-system-time"] < pos["network.ena-reset-in-kernel-log"])
    assert "provenance.source-not-allowlisted" not in pos  # in no chain


def _incident(snap: dict, restarts: int, dying: int, resets: int) -> dict:
    """A recorded real snapshot with the counts of an incident host (the numbers the chain must tell)."""
    snap = copy.deepcopy(snap)
    for unit in snap["facts"]["systemd"]["units"]:
        if unit["name"] == "ecs.service":
            unit["restarts"] = restarts
    memory = snap["facts"]["cgroups"]["memory"]
    memory["dying"], memory["num_cgroups"] = dying, dying + memory["live"]
    snap["facts"]["network"]["kernel_log"]["events"]["reset_completed"] = resets
    return snap


def test_chain_is_told_with_numbers_and_a_missing_middle_link_is_shown_not_invented() -> None:
    ruleset = load_rules()
    b1 = _incident(snapshot("b1"), restarts=1052, dying=3011, resets=3)
    a1 = _incident(snapshot("a1"), restarts=0, dying=3011, resets=0)
    findings = Judge(ruleset).judge_all([b1, a1])
    chains = host_chains(findings, ruleset.graph())
    assert [c["host"] for c in chains] == ["b1"]  # a1 has dying memcgs alone: no chain
    chain = chains[0]
    assert chain["text"].startswith("ecs.service enabled with no ECS_CLUSTER → ecs.service restarted 1,052 times")
    assert "→ 3,011 dying memcgs → [missing: cpu.hot-core-system-time] → 3 ENA resets" in chain["text"]
    assert chain["partial"] is True
    assert chain["gaps"] == [{"from": "cgroups.dying-memcgs", "to": "network.ena-reset-in-kernel-log",
                              "missing": ["cpu.hot-core-system-time"]}]
    rules = [link["rule"] for link in chain["links"]]
    assert "cpu.hot-core-system-time" not in rules  # the hot core was not seen: never invented
    assert rules.index("systemd.unit-crash-looping") < rules.index("cgroups.dying-memcgs")


def test_waived_and_not_evaluated_findings_are_not_links() -> None:
    graph = {"a": ("b",), "b": ()}
    evaluated = Finding("h", "a", "high", "a fired")
    assert host_chains([evaluated, Finding("h", "b", "info", "b could not be evaluated: x not collected",
                                           evidence={"status": "unknown"})], graph) == []
    assert host_chains([evaluated, Finding("h", "b", "high", "b", waived=True)], graph) == []
    assert host_chains([evaluated, Finding("h", "b", "high", "b")], graph)[0]["text"] == "a fired → b"


def test_chain_text_from_a_host_is_escaped_in_every_renderer() -> None:
    doc = json.loads((REPORTS / "fleet.json").read_text())
    evil = "ecs.service<script>alert(1)</script>\x1b[31m|`*x*` restarted 5 times"
    doc["chains"] = [{"host": "b1<i>", "text": f"{evil} → 3,011 dying memcgs", "partial": False,
                      "links": [{"rule": "systemd.unit-crash-looping", "severity": "high", "text": evil},
                                {"rule": "cgroups.dying-memcgs", "severity": "medium", "text": "3,011 dying memcgs"}],
                      "gaps": []}]
    html = RENDERERS["html"][0](doc)
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[31m" in html
    assert "<b>b1&lt;i&gt;</b>" in html
    md = RENDERERS["md"][0](doc)
    assert "\x1b" not in md and "<script>" not in md and "\\x1b\\[31m" in md
    assert [g.hosts for g in view.chain_groups(doc)] == [["b1<i>"]]


def test_a_partial_chain_is_marked_partial_and_names_the_missing_link() -> None:
    doc = json.loads((REPORTS / "fleet.json").read_text())
    doc["chains"] = [{"host": "b3", "text": "ecs.service restarted 44 times → [missing: cgroups.dying-memcgs, "
                                            "cpu.hot-core-system-time] → 3 ENA resets", "partial": True,
                      "links": [{"rule": "systemd.unit-crash-looping", "severity": "high", "text": "x"},
                                {"rule": "network.ena-reset-in-kernel-log", "severity": "high", "text": "y"}],
                      "gaps": [{"from": "systemd.unit-crash-looping", "to": "network.ena-reset-in-kernel-log",
                                "missing": ["cgroups.dying-memcgs", "cpu.hot-core-system-time"]}]}]
    html = RENDERERS["html"][0](doc)
    first_screen = html[html.index('id="culprit"'):html.index('id="summary"')]
    assert '<li class="chain partial">' in first_screen
    assert "no finding for cgroups.dying-memcgs, cpu.hot-core-system-time" in first_screen
    md = RENDERERS["md"][0](doc)
    assert "*partial*: no finding for cgroups.dying-memcgs, cpu.hot-core-system-time" in md


def test_the_worst_finding_is_by_severity_then_chain_position_then_hosts() -> None:
    doc = json.loads((REPORTS / "fleet-scan.json").read_text())
    worst = view.culprit(doc).finding
    assert worst is not None
    # all high on the same 3 hosts; the chain's first cause wins over kubelet provenance (in no chain)
    assert worst.rule == "systemd.ecs-enabled-without-cluster"
    order = [g.rule for g in view.finding_groups(doc) if g.severity == "high"]
    assert order.index("systemd.unit-crash-looping") < order.index("provenance.source-not-allowlisted")


@pytest.mark.parametrize(("p", "text"), [(0.09999999999999996, "0.1"), (1 / 35, "0.029"), (1.0, "1"),
                                         (0.000123, "1.2e-04"), (1e-9, "< 1e-06")])
def test_p_values_are_printed_for_people(p: float, text: str) -> None:
    assert view.p_value(p) == text
    assert view.score(1.544068044350276) == "1.54"
