"""The engine: unknown areas are explicit, results are shared between hosts with the same content only."""

from __future__ import annotations

from pathlib import Path

from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from tests.unit.test_rules_builtin import recorded

HOSTNAME_RULE = """\
rules:
  - id: t.hostname
    title: "{{ name }} is {{ host.hostname }}"
    severity: info
    when: "facts.os.id == 'debian'"
"""


def test_an_area_not_collected_is_unknown_never_a_pass() -> None:
    snap = recorded("fleet-b1")
    snap["facts"]["systemd"] = None
    snap["errors"]["systemd"] = "systemctl timed out"
    rules = load_rules()
    findings = Judge(rules).judge(snap)
    unknown = {f.rule: f for f in findings if f.evidence.get("status") == "unknown"}
    # exactly the host rules that read the systemd area, the Pinterest chain's among them
    assert set(unknown) == {r.id for r in rules.rules if "systemd" in r.areas and r.fleet is None}
    assert {"systemd.unit-crash-looping", "systemd.unit-failed", "systemd.ecs-enabled-without-cluster"} <= set(unknown)
    f = unknown["systemd.unit-crash-looping"]
    assert f.severity == "info" and "systemd not collected (systemctl timed out)" in f.title
    assert f.evidence["missing"] == ["systemd"] and "unknown" in f.tags
    # rules that read other areas still ran: the ECS agent churn is still reported
    assert any(f.rule == "systemd.ecs-agent-churn" and f.evidence.get("status") is None for f in findings)


def test_identical_content_is_evaluated_once_and_fanned_out() -> None:
    judge = Judge(load_rules())
    snaps = []
    for i in range(50):
        s = recorded("fleet-b1" if i % 2 else "fleet-a1")
        s["name"] = f"h{i}"
        s["host"]["hostname"] = f"h{i}"  # volatile identity differs on every host; no rule reads it
        snaps.append(s)
    findings = judge.judge_all(snaps)
    assert judge.evaluations <= 2 * len(judge.rules)
    looping = sorted(f.host for f in findings if f.rule == "systemd.unit-crash-looping")
    assert looping == sorted(f"h{i}" for i in range(1, 50, 2))


def test_a_rule_reading_host_facts_is_not_shared_between_hosts(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(HOSTNAME_RULE)
    judge = Judge(load_rules([tmp_path], builtin=False))
    titles = []
    for name in ("x1", "x2"):
        s = recorded("fleet-a1")
        s["name"], s["host"]["hostname"] = name, f"{name}.internal"
        titles += [f.title for f in judge.judge(s)]
    assert titles == ["x1 is x1.internal", "x2 is x2.internal"]
    assert judge.evaluations == 2


def test_a_runtime_type_error_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text("""\
rules:
  - id: t.bad-types
    title: never
    severity: low
    when: "contains(facts.os.pretty_name, `1`) || abs(facts.os.id) > `0`"
""")
    [f] = Judge(load_rules([tmp_path], builtin=False)).judge(recorded("fleet-a1"))
    assert f.evidence["status"] == "error" and f.severity == "info" and "could not be evaluated" in f.title
