"""Issue 22's "Must show": the real fleet scanned over SSM with `--notify securityhub --notify ssm-compliance`.

The AZ-a and AZ-b hosts are moto EC2 instances tagged cluster=awsfleet, each an SSM-managed instance of
the test endpoint that runs the probe inside its fleet host (as tests/system/test_ssm_fleet.py does); Security
Hub is moto's server behind the gate of tests/securityhub_gate.py. The first scan finds ecs.service
crash-looping on b1-b3: Security Hub holds the finding ACTIVE for each and Compliance says NON_COMPLIANT.
Then ecs.service is disabled and stopped on b2 (restored afterwards) and the fleet scanned again: ACTIVE
for b1 and b3, ARCHIVED for b2, still one finding per identity; Compliance COMPLIANT for b2 only.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.context import Env
from tests.fleet import Fleet
from tests.securityhub_gate import REGION, all_findings, security_hub
from tests.ssm_endpoint import AwsStandIns, fleet_runner

pytestmark = pytest.mark.fleet

RULE = "systemd.unit-crash-looping"
FIXED = "b2"


def _scan(tmp_path: Path, name: str) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "--ec2", "tag:cluster=awsfleet", "--region", REGION, "--ssm-poll-interval", "0.5",
                 "--deadline", "90", "--store", str(tmp_path / "history.sqlite3"), "--format", "json",
                 "--out", str(tmp_path / name), "--fail-on", "critical",
                 "--notify", f"securityhub:{REGION}", "--notify", f"ssm-compliance:{REGION}"], Env(out, err))
    print(err.getvalue())  # shown when the test fails
    return code, json.loads((tmp_path / name / "report.json").read_text()), err.getvalue()


def _notify_lines(err: str) -> list[str]:
    """The scan's `notify:` lines (Security Hub's, then SSM Compliance's)."""
    return [line.removeprefix("notify: ") for line in err.splitlines() if line.startswith("notify: ")]


def _crash_loop_states(hub: Any) -> dict[str, list[str]]:
    """host → RecordState of each crash-loop finding Security Hub holds for it (GetFindings, paged;
    all_findings already fails on a duplicate Id)."""
    states: dict[str, list[str]] = {}
    for f in all_findings(hub).values():
        if f["GeneratorId"] == RULE:
            states.setdefault(f["ProductFields"]["ami-auditor/host"], []).append(f["RecordState"])
    return states


def _compliance(ssm: Any, instances: dict[str, str]) -> dict[str, str]:
    """host → Status of its crash-loop Compliance item (ListComplianceItems, per instance, paged)."""
    out: dict[str, str] = {}
    for name, iid in instances.items():
        items = [i for page in ssm.get_paginator("list_compliance_items").paginate(
                     ResourceIds=[iid], ResourceTypes=["ManagedInstance"],
                     Filters=[{"Key": "ComplianceType", "Values": ["Custom:AmiAuditor"], "Type": "EQUAL"}])
                 for i in page["ComplianceItems"] if i["Id"] == RULE]
        assert len(items) <= 1, f"{name}: {items}"
        if items:
            out[name] = items[0]["Status"]
    return out


def test_crash_loop_kept_in_step_in_security_hub_and_ssm_compliance(fleet_ready_crashloop: Fleet,
                                                                      tmp_path: Path) -> None:
    fleet = fleet_ready_crashloop
    scanned = sorted(h.name for h in fleet.hosts if h.name[0] in "ab")  # a1-a3, b1-b3 (not golden)
    looping = sorted(fleet.az_b_hosts)
    assert FIXED in looping and len(looping) == 3
    # AwsStandIns first: security_hub() resets moto's (process-wide) backends and enables Security Hub
    # after; the instances are launched once both are up
    with AwsStandIns(visibility_lag_s=0.0) as aws, security_hub() as (gate, hub):
        aws.install_probe_document()
        image = aws.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        instances: dict[str, str] = {}
        for h in fleet.hosts:
            if h.name not in scanned:
                continue
            tags = [{"Key": "Name", "Value": h.name}, {"Key": "cluster", "Value": "awsfleet"}]
            [inst] = aws.ec2.run_instances(
                ImageId=image, MinCount=1, MaxCount=1, Placement={"AvailabilityZone": h.az},
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"]
            aws.endpoint.add_instance(inst["InstanceId"], fleet_runner(fleet, h.name))
            instances[h.name] = inst["InstanceId"]

        code, first, err = _scan(tmp_path, "r1")
        assert {h["name"]: h["status"] for h in first["hosts"]} == dict.fromkeys(scanned, "ok"), err
        assert sorted({f["host"] for f in first["findings"] if f["rule"] == RULE}) == looping
        hub_line, ssm_line = _notify_lines(err)
        assert hub_line.startswith("securityhub:us-east-1: imported ") and "archived 0, 0 unchanged" in hub_line
        assert ssm_line == f"ssm-compliance:us-east-1: {len(scanned)} instance(s) updated, 0 unchanged not sent"
        assert _crash_loop_states(hub) == {n: ["ACTIVE"] for n in looping}
        assert _compliance(aws.ssm, instances) == {n: "NON_COMPLIANT" if n in looping else "COMPLIANT"
                                                   for n in scanned}
        held_first = all_findings(hub)
        # the instance SSM reached, not the one each host's cloud-init data names (they differ here: moto
        # picks its own ids)
        for f in held_first.values():
            [res] = f["Resources"]
            assert res["Type"] == "AwsEc2Instance"
            assert res["Id"].rsplit("/", 1)[1] == instances[f["ProductFields"]["ami-auditor/host"]]

        try:
            fleet.exec(FIXED, ["systemctl", "disable", "--now", "ecs.service"], check=True)
            # loaded and dead with NRestarts as it was, or already unloaded: no crash loop either way
            print("after disable --now:", fleet.systemctl_show(FIXED, "ecs.service",
                                                               ["LoadState", "ActiveState", "SubState", "NRestarts"]))
            code, second, err = _scan(tmp_path, "r2")
        finally:
            fleet.exec(FIXED, ["systemctl", "enable", "--now", "ecs.service"], check=True)
        assert {h["name"]: h["status"] for h in second["hosts"]} == dict.fromkeys(scanned, "ok"), err
        still = [n for n in looping if n != FIXED]
        assert sorted({f["host"] for f in second["findings"] if f["rule"] == RULE}) == still, \
            [f for f in second["findings"] if f["rule"] == RULE and f["host"] == FIXED]
        hub_line, ssm_line = _notify_lines(err)
        assert "archived 0" not in hub_line and "failed" not in hub_line, hub_line
        assert ssm_line.startswith("ssm-compliance:us-east-1: ") and " 0 instance(s) updated" not in ssm_line
        assert "failed" not in ssm_line and "skipped" not in ssm_line, ssm_line
        assert _crash_loop_states(hub) == {**{n: ["ACTIVE"] for n in still}, FIXED: ["ARCHIVED"]}
        held = all_findings(hub)
        assert set(held) >= set(held_first)  # updated in place: no finding of the first scan lost or copied
        assert len(held) == len({(f["GeneratorId"], f["ProductFields"]["ami-auditor/host"],
                                  f["ProductFields"].get("ami-auditor/item")) for f in held.values()})
        assert _compliance(aws.ssm, instances) == {n: "NON_COMPLIANT" if n in still else "COMPLIANT"
                                                   for n in scanned}
        assert max(gate.import_sizes) <= 100
