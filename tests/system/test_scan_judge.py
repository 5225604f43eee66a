"""`ami-auditor scan` end to end through cli.main: this machine (plain Debian, no systemd as PID 1) and the
real test fleet (crash-looping ecs.service on AZ b, real failed units, real dying memcgs)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.judge.rules import load_rules
from auditor.reportdoc import validate_report
from tests.fleet import AZ_B_HOSTS, Fleet


def scan(*argv: str, out_dir: Path) -> tuple[int, str, dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", *argv, "--format", "json", "--out", str(out_dir)], Env(stdout=out, stderr=err))
    assert code != 2, err.getvalue()
    doc = json.loads((out_dir / "report.json").read_text())
    validate_report(doc)
    return code, out.getvalue(), doc


def hosts_with(doc: dict[str, Any], rule: str, item: str | None = None, waived: bool = False) -> set[str]:
    return {f["host"] for f in doc["findings"] if f["rule"] == rule and (item is None or f["item"] == item)
            and f["waived"] == waived and f["evidence"].get("status") not in ("unknown", "error")}


def test_scan_local_on_a_plain_debian_machine(tmp_path: Path) -> None:
    code, out, doc = scan("local", out_dir=tmp_path)
    assert code == 0  # nothing high here; systemd not running is reported, not failed
    assert {r["id"] for r in doc["rules"]} >= {"systemd.unit-crash-looping", "cgroups.dying-memcgs"}
    [host] = doc["hosts"]
    assert host["status"] == "ok"
    unknown = [f for f in doc["findings"] if f["evidence"].get("status") == "unknown"]
    if host["collector_errors"].get("systemd"):  # this VM: no systemd as PID 1
        # exactly the host rules that read the systemd area (the Pinterest chain's among them)
        reads_systemd = {r.id for r in load_rules().rules if "systemd" in r.areas and r.fleet is None}
        assert {"systemd.unit-crash-looping", "systemd.unit-failed", "systemd.ecs-enabled-without-cluster"} <= \
            reads_systemd
        assert {f["rule"] for f in unknown} == reads_systemd
        assert all(f["severity"] == "info" and "systemd not collected" in f["title"] for f in unknown)
    assert "1/1 hosts reached; findings:" in out and "exit code 0" in out


def test_fail_on_turns_unknowns_into_a_failure_only_when_asked(tmp_path: Path) -> None:
    code, _, doc = scan("local", "--fail-on", "info", out_dir=tmp_path)
    assert code == (1 if doc["findings"] else 0)


@pytest.mark.fleet
def test_crash_loop_fires_for_ecs_on_every_az_b_host_and_no_az_a_host(fleet_ready_crashloop: Fleet,
                                                                     tmp_path: Path) -> None:
    fleet = fleet_ready_crashloop
    fleet.wait_crashloop()
    code, out, doc = scan("-i", str(fleet.inventory_path), out_dir=tmp_path / "plain")
    assert code == 1  # high findings, --fail-on high by default
    az_b = set(AZ_B_HOSTS)
    assert hosts_with(doc, "systemd.unit-crash-looping", "ecs.service") == az_b
    assert hosts_with(doc, "systemd.unit-crash-looping") == az_b  # no AZ-a host has any looping unit
    assert hosts_with(doc, "systemd.ecs-enabled-without-cluster") == az_b
    assert hosts_with(doc, "provenance.source-not-allowlisted", "kubelet") == az_b
    assert "ecs.service is crash-looping" in out

    waivers = tmp_path / "waivers.yaml"
    waivers.write_text("""\
waivers:
  - rule: systemd.unit-crash-looping
    labels: {az: us-east-1b}
    item: ecs.service
    reason: being removed from the image
    expires: 2999-01-01
  - rule: provenance.source-not-allowlisted
    hosts: ["*"]
    reason: expired exception
    expires: 2001-01-01
""")
    _, _, doc = scan("-i", str(fleet.inventory_path), "--waivers", str(waivers), out_dir=tmp_path / "waived")
    assert hosts_with(doc, "systemd.unit-crash-looping", waived=True) == az_b
    assert hosts_with(doc, "systemd.unit-crash-looping") == set()
    assert hosts_with(doc, "provenance.source-not-allowlisted") == az_b  # expired: not waived
    assert any("expired on 2001-01-01; no longer applied" in n for n in doc["notes"])


@pytest.mark.fleet
def test_a_really_failed_unit_is_reported_on_its_host_only(fleet: Fleet, tmp_path: Path) -> None:
    unit = "ami-auditor-test-fail"
    fleet.exec("a3", ["systemd-run", f"--unit={unit}", "--no-block", "/bin/false"], check=True)
    try:
        fleet.wait_for("a3", lambda f, h: f.systemctl_show(h.name, f"{unit}.service", ["ActiveState"])
                       .get("ActiveState") == "failed", timeout=20, what=f"{unit} failed")
        _, _, doc = scan("-i", str(fleet.inventory_path), out_dir=tmp_path)
        assert hosts_with(doc, "systemd.unit-failed", f"{unit}.service") == {"a3"}
    finally:
        fleet.exec("a3", ["systemctl", "reset-failed", f"{unit}.service"])


@pytest.mark.fleet
@pytest.mark.kernel
def test_dying_memcg_rule_fires_on_every_host_after_real_dying_memcgs(fleet: Fleet, tmp_path: Path) -> None:
    from tests.fleet import memcg

    reason = memcg.available()
    if reason:
        pytest.skip(reason)
    everyone = {h.name for h in fleet.hosts}
    _, _, before = scan("-i", str(fleet.inventory_path), out_dir=tmp_path / "before")
    dying_before = {f["host"] for f in before["findings"] if f["rule"].startswith("cgroups.dying-memcgs")}
    assert dying_before == set(), "dying memcgs already above the warn level on this machine"
    try:
        rose = memcg.make_dying_memcgs(2500)
        assert rose >= 2000
        _, _, after = scan("-i", str(fleet.inventory_path), out_dir=tmp_path / "after")
        assert hosts_with(after, "cgroups.dying-memcgs") == everyone  # one kernel: every host sees them
        dying = [f["evidence"]["dying"] for f in after["findings"] if f["rule"] == "cgroups.dying-memcgs"]
        assert min(dying) >= 2000
    finally:
        memcg.cleanup_dying_memcgs()
