"""`--notify ssm-compliance`: one Compliance item per rule per SSM-managed instance, over real HTTP to the
SSM test endpoint (which enforces PutComplianceItems' documented shapes and limits)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from auditor.cli import main
from auditor.context import Env
from auditor.notify import ssm_compliance
from tests.paths import ROOT
from tests.ssm_endpoint import AwsStandIns
from tests.ssm_endpoint.server import local_runner
from tests.system.test_securityhub import RULES

IID = "i-0a1b2c3d4e5f60718"


@pytest.fixture
def aws() -> Iterator[AwsStandIns]:
    with AwsStandIns(visibility_lag_s=0.0) as a:
        a.endpoint.add_instance(IID, local_runner())
        yield a


def scan(tmp_path: Path, *extra: str) -> tuple[int, str]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", f"ssm://{IID}?region=us-east-1", "local", "--ssm-run-shell-script", "--binary", "sh",
                 "--no-builtin-rules", "--rules", str(rules), "--store", str(tmp_path / "h.sqlite3"),
                 "--notify", "ssm-compliance:us-east-1", *extra], Env(out, err))
    return code, err.getvalue()


def listed(ssm: Any) -> dict[str, dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in ssm.get_paginator("list_compliance_items").paginate(
            ResourceIds=[IID], ResourceTypes=["ManagedInstance"],
            Filters=[{"Key": "ComplianceType", "Values": ["Custom:AmiAuditor"], "Type": "EQUAL"}]):
        items.extend(page["ComplianceItems"])
    return {i["Id"]: i for i in items}


def test_items_per_rule_follow_the_findings(tmp_path: Path, aws: AwsStandIns) -> None:
    code, err = scan(tmp_path)
    assert code == 1, err
    assert "ssm-compliance:us-east-1: 1 instance(s) updated, 0 unchanged not sent; skipped 1: local (no instance id)" \
        in err
    items = listed(aws.ssm)
    assert set(items) == {"t.always", "t.kernel"}
    assert items["t.always"]["Status"] == "NON_COMPLIANT" and items["t.always"]["Severity"] == "HIGH"
    assert items["t.always"]["Title"].startswith("always on ")
    assert items["t.always"]["ExecutionSummary"]["ExecutionId"] == "ami-auditor-scan-1"
    summaries = aws.ssm.list_compliance_summaries()["ComplianceSummaryItems"]
    assert summaries[0]["ComplianceType"] == "Custom:AmiAuditor"
    assert summaries[0]["NonCompliantSummary"]["NonCompliantCount"] == 1

    calls = aws.endpoint.calls["PutComplianceItems"]
    code, err = scan(tmp_path)
    assert "0 instance(s) updated, 1 unchanged not sent" in err and aws.endpoint.calls["PutComplianceItems"] == calls

    code, err = scan(tmp_path, "--set", "t.fire=0")
    assert "1 instance(s) updated" in err
    assert listed(aws.ssm)["t.always"]["Status"] == "COMPLIANT"


def test_unmanaged_instances_are_skipped_and_throttling_retried(aws: AwsStandIns) -> None:
    report = {"generated_at": "2026-12-01T00:00:00Z", "history": {"scan_id": 7},
              "rules": [{"id": "t.a", "severity": "critical", "title": "A"}],
              "hosts": [{"name": "m", "target": f"ssm://{IID}", "status": "ok", "labels": {}},
                        {"name": "u", "target": "ssm://i-0000000000000dead", "status": "ok", "labels": {}}],
              "findings": [{"host": "m", "rule": "t.a", "severity": "critical", "title": "x" * 900, "waived": False}]}
    aws.endpoint.throttle("PutComplianceItems", 2)
    waits: list[float] = []
    line = ssm_compliance.sync("us-east-1", report, {}, sleep=waits.append)
    assert line.startswith("ssm-compliance:us-east-1: 1 instance(s) updated") and waits == [0.5, 1.0]
    assert "skipped 1: i-0000000000000dead (not SSM-managed)" in line
    item = listed(aws.ssm)["t.a"]
    assert item["Severity"] == "CRITICAL" and len(item["Title"]) == 500


def test_an_id_the_host_only_reports_of_itself_gets_no_items(aws: AwsStandIns) -> None:
    """Issue 37 item 9: an SSH host without an instance_id label that claims a managed instance's id (its
    cloud-init data, IMDS answer: all host-written) must not overwrite that instance's Compliance."""
    report = {"generated_at": "2026-12-01T00:00:00Z", "history": {"scan_id": 8},
              "rules": [{"id": "t.a", "severity": "critical", "title": "A"}],
              "hosts": [{"name": "liar", "target": "ssh://10.0.0.9", "status": "ok", "labels": {"az": "us-east-1a"},
                         "facts_summary": {"instance_id": IID}},
                        {"name": "labelled", "target": "ssh://10.0.0.5", "status": "ok",
                         "labels": {"instance_id": IID}, "facts_summary": {"instance_id": "i-0000000000000beef"}}],
              "findings": [{"host": "labelled", "rule": "t.a", "severity": "critical", "title": "A", "waived": False}]}
    line = ssm_compliance.sync("us-east-1", report, {}, sleep=lambda s: None)
    assert line.startswith("ssm-compliance:us-east-1: 1 instance(s) updated"), line
    assert (f"skipped 1: liar (reports instance {IID} of itself, not established by the scanner (scan it by ssm:// "
            "or give it an inventory label instance_id))") in line
    assert listed(aws.ssm)["t.a"]["Status"] == "NON_COMPLIANT"  # the labelled host's, not the liar's COMPLIANT
    report["hosts"] = report["hosts"][:1]
    line = ssm_compliance.sync("us-east-1", report, {}, sleep=lambda s: None)
    assert line.startswith("ssm-compliance:us-east-1: 0 instance(s) updated") and "skipped 1: liar" in line
    assert listed(aws.ssm)["t.a"]["Status"] == "NON_COMPLIANT"


def test_the_endpoint_enforces_the_documented_shapes(aws: AwsStandIns) -> None:
    ssm = boto3.client("ssm", region_name="us-east-1")
    base = {"ResourceId": IID, "ResourceType": "ManagedInstance", "ComplianceType": "Custom:AmiAuditor",
            "ExecutionSummary": {"ExecutionTime": "2026-12-01T00:00:00Z"}}
    item = {"Id": "x", "Severity": "HIGH", "Status": "COMPLIANT"}
    for bad, code in [({"Items": [item] * 10_001}, "ItemSizeLimitExceededException"),
                      ({"Items": [{**item, "Title": "t" * 501}]}, "ValidationException"),
                      ({"Items": [{**item, "Details": {"k" * 65: "v"}}]}, "ValidationException"),
                      ({"Items": [item], "ResourceId": "i-0000000000000beef"}, "InvalidResourceId")]:
        with pytest.raises(ClientError, match=code):
            ssm.put_compliance_items(**{**base, **bad})


def test_the_iam_policy_allows_both_notify_calls_and_no_more() -> None:
    import json

    policy = json.loads((ROOT / "docs/iam-policy.json").read_text())
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    hub = by_sid["NotifySecurityHubImportOwnAccountOnly"]
    assert hub["Action"] == "securityhub:BatchImportFindings"
    assert hub["Resource"].endswith(":product/ACCOUNT_ID/default")  # the product ProductArn names (asff.py)
    assert hub["Condition"]["StringEquals"]["securityhub:TargetAccount"] == "ACCOUNT_ID"
    assert by_sid["NotifySsmComplianceOnInstances"]["Action"] == "ssm:PutComplianceItems"
    actions = {a for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert "ssm:DescribeInstanceInformation" in actions  # which instances SSM manages
