"""Waivers: a live waiver marks findings waived (they stay in the report); an expired one waives nothing and says so."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from auditor.compare.stage import ComparePlan
from auditor.errors import InputError
from auditor.evaluate.core import EvalPlan, evaluate
from auditor.judge.rules import load_rules
from auditor.judge.stage import JudgePlan
from auditor.judge.waivers import load_waivers
from auditor.models import HostResult, HostSpec, Report
from tests.paths import DATA
from tests.unit.test_rules_builtin import recorded

TODAY = dt.date(2026, 6, 1)


def judged(tmp_path: Path, waivers_yaml: str) -> Report:
    """Judge recorded fleet snapshots a1 (AZ a) and b1 (AZ b) with a waivers file."""
    path = tmp_path / "waivers.yaml"
    path.write_text(waivers_yaml)
    ruleset = load_rules()
    plan = JudgePlan(ruleset, load_waivers(str(path), ruleset.ids()), TODAY)
    snaps = [recorded("fleet-a1"), recorded("fleet-b1")]
    hosts = [HostResult(HostSpec(s["name"], s["target"]), "ok", None, s) for s in snaps]
    return evaluate(EvalPlan(plan, ComparePlan(), fail_on=None), hosts, "2026-06-01T00:00:00Z")


def crashloop(report: Report) -> list:
    return [f for f in report.findings if f.rule == "systemd.unit-crash-looping"]


def test_without_waivers_the_crash_loop_is_not_waived(tmp_path: Path) -> None:
    [f] = crashloop(judged(tmp_path, "waivers: []\n"))
    assert (f.host, f.waived, f.waiver) == ("b1", False, None)


def test_a_live_waiver_by_label_and_item_suppresses(tmp_path: Path) -> None:
    report = judged(tmp_path, """\
waivers:
  - rule: systemd.unit-crash-looping
    labels: {az: us-east-1b}
    item: ecs.*
    reason: ECS agent removed in AMI 2026.07 (OPS-42)
    expires: 2026-06-01
""")
    [f] = crashloop(report)
    assert f.waived and "OPS-42" in (f.waiver or "") and "waivers.yaml:2" in (f.waiver or "")
    others = [x for x in report.findings if x.host == "b1" and x.rule != "systemd.unit-crash-looping"]
    assert others and not any(x.waived for x in others)
    assert report.notes == []


def test_waiver_scoped_to_other_hosts_or_items_does_not_apply(tmp_path: Path) -> None:
    for scope in ("hosts: [a*]\n    item: ecs.service", "hosts: ['*']\n    item: kubelet.service",
                  "labels: {az: us-east-1a}"):
        [f] = crashloop(judged(tmp_path, f"""\
- rule: systemd.*
    {scope}
  reason: r
  expires: 2030-01-01
""".replace("\n    ", "\n  ")))
        assert not f.waived, scope


def test_an_expired_waiver_stops_waiving_and_says_so(tmp_path: Path) -> None:
    report = judged(tmp_path, """\
- rule: systemd.unit-crash-looping
  hosts: [b1]
  reason: temporary
  expires: 2026-05-31
""")
    [f] = crashloop(report)
    assert not f.waived
    assert f.waiver and f.waiver.startswith("waiver expired on 2026-05-31; no longer applied")
    assert report.notes == [f"waiver {tmp_path / 'waivers.yaml'}:1 for systemd.unit-crash-looping expired on "
                            "2026-05-31; no longer applied (1 finding(s) it would have waived)"]


@pytest.mark.parametrize(("text", "line", "message"), [
    ("- rule: systemd.nope\n  hosts: ['*']\n  reason: r\n  expires: 2030-01-01\n", 1, "matches no loaded rule"),
    ("- rule: systemd.*\n  hosts: ['*']\n  reason: r\n  expires: someday\n", 4, "must be a date (YYYY-MM-DD)"),
    ("- rule: systemd.*\n  hosts: ['*']\n  reason: r\n  expires: '2026-02-30'\n", 4, "is not a date"),
    # caught by schemas/waivers.schema.json
    ("- rule: systemd.*\n  hosts: []\n  reason: r\n  expires: 2030-01-01\n", 1, "needs 'hosts'"),
    ("- rule: systemd.*\n  labels: {prod: yes}\n  reason: r\n  expires: 2030-01-01\n", 2,
     "waivers[0].labels.prod must be a string (glob) or a number; quote it"),
    ("waivers:\n  - rule: systemd.*\n    hosts: ['*']\n    reason: '  '\n    expires: 2030-01-01\n", 4,
     "waivers[0].reason must be a non-empty string"),
    ("- rule: [systemd.*]\n  hosts: ['*']\n  reason: r\n  expires: 2030-01-01\n", 1,
     "waivers[0].rule must be a rule id (glob allowed), not a list"),
    ("- rule: systemd.*\n  hosts: ['*', 3]\n  reason: r\n  expires: 2030-01-01\n", 2,
     "hosts[1] must be a non-empty glob"),
    ("waivers: {rule: x}\n", 1, "waivers must be a list of waivers, not a mapping"),
    ("- rule: systemd.*\n  reason: r\n  expires: 2030-01-01\n", 1, "needs 'hosts'"),
    ("- rule: systemd.*\n  hosts: ['*']\n  expires: 2030-01-01\n", 1, "missing 'reason'"),
    ("- rule: systemd.*\n  hosts: ['*']\n  reason: r\n  expires: 2030-01-01\n  until: x\n", 5, "unknown key 'until'"),
    ("- rule: systemd.*\n  hosts: ['*'\n", 3, "invalid YAML"),
])
def test_bad_waivers_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load_waivers(str(path), load_rules().ids())
    assert (exc.value.path, exc.value.line) == (str(path), line)
    assert message in exc.value.message


def test_a_schema_error_names_the_column_of_the_key(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("waivers:\n  - rule: systemd.*\n    hosts: ['*']\n    reason: r\n    expires: 2030-01-01\n"
                    "    until: x\n")
    with pytest.raises(InputError) as exc:
        load_waivers(str(path))
    assert (exc.value.line, exc.value.column) == (6, 5)
    assert str(exc.value).startswith(f"{path}:6:5: unknown key 'until' in waivers[0] (allowed: expires, hosts, ")


def test_each_expired_waiver_counts_the_findings_it_would_have_waived(tmp_path: Path) -> None:
    report = judged(tmp_path, """\
- rule: systemd.unit-crash-looping
  hosts: [b1]
  reason: first
  expires: 2026-05-31
- rule: systemd.*
  hosts: ['*']
  reason: second
  expires: 2026-04-30
""")
    [f] = crashloop(report)
    assert not f.waived and "(first;" in (f.waiver or "")
    systemd_findings = len([x for x in report.findings if x.rule.startswith("systemd.")])
    assert [n.endswith(f"no longer applied ({count} finding(s) it would have waived)")
            for n, count in zip(report.notes, (1, systemd_findings))] == [True, True], report.notes


def test_waiver_expiry_is_judged_on_the_utc_date_whatever_the_scanner_s_time_zone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37 item 8: reports are UTC, so is a waiver's last day. A zone whose date differs from UTC's right now
    (UTC+14 from 10:00 UTC, else UTC-12) flipped the exit code when the scanner used its local date."""
    import io
    import shutil
    import time

    from auditor.cli import main
    from auditor.context import Env

    now = dt.datetime.now(dt.timezone.utc)
    zone, expires = ("Etc/GMT-14", now.date()) if now.hour >= 10 else ("Etc/GMT+12", now.date() - dt.timedelta(1))
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    for name in ("fleet-a1", "fleet-b1"):
        shutil.copy(DATA / "snapshots" / f"{name}.json", snaps)
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(f"waivers:\n  - rule: '*'\n    hosts: ['*']\n    reason: accepted (OPS-1)\n"
                       f"    expires: {expires}\n")

    def exit_code(tz: str) -> tuple[int, str]:
        monkeypatch.setenv("TZ", tz)
        time.tzset()
        out, err = io.StringIO(), io.StringIO()
        code = main(["analyze", str(snaps), "--waivers", str(waivers), "--no-store"], Env(out, err))
        return code, err.getvalue()

    try:
        in_utc, there = exit_code("UTC"), exit_code(zone)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert in_utc[0] == (0 if expires >= now.date() else 1), in_utc[1]
    assert there[0] == in_utc[0], there[1]
