"""`--notify securityhub`: findings imported into moto's Security Hub server over real HTTP, checked
with GetFindings: fields, updates instead of copies, ARCHIVED on resolution, SUPPRESSED when waived,
nothing sent when nothing changed, 100 per call, throttling retried, refused findings retried later."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.notify import asff, securityhub
from tests.securityhub_gate import ACCOUNT, REGION, Gate, all_findings, security_hub

RULES = """pack: t
params: {fire: 1}
rules:
  - id: t.always
    title: "always on {{ facts.os.pretty_name }}"
    severity: high
    description: Fires while fire is 1.
    remediation: Set t.fire=0.
    when: "${fire} == `1`"
  - id: t.kernel
    title: "kernel {{ facts.kernel.release }}"
    severity: low
    when: "facts.kernel.release != `null`"
"""


@pytest.fixture
def hub() -> Iterator[tuple[Gate, Any]]:
    with security_hub() as pair:
        yield pair


def scan(tmp_path: Path, *extra: str) -> tuple[int, str]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "local", "--binary", "sh", "--no-builtin-rules", "--rules", str(rules),
                 "--store", str(tmp_path / "h.sqlite3"), "--notify", f"securityhub:{REGION}", *extra],
                Env(out, err))
    return code, err.getvalue()


def test_a_scan_imports_updates_archives_and_suppresses(tmp_path: Path, hub: tuple[Gate, Any]) -> None:
    gate, client = hub
    code, err = scan(tmp_path, "--format", "json", "--out", str(tmp_path / "r1"))
    assert (tmp_path / "r1").exists(), err
    report = json.loads((tmp_path / "r1" / "report.json").read_text())
    assert code == report["summary"]["exit_code"] == 1, err
    assert "securityhub:us-east-1: imported 2 finding(s), archived 0" in err
    held = all_findings(client)
    assert len(held) == 2
    always = held[asff.finding_id("t.always", "local", None)]
    assert always["ProductArn"] == f"arn:aws:securityhub:{REGION}:{ACCOUNT}:product/{ACCOUNT}/default"
    assert always["AwsAccountId"] == ACCOUNT and always["GeneratorId"] == "t.always"
    assert always["Severity"]["Label"] == "HIGH" and always["RecordState"] == "ACTIVE"
    assert always["Title"].startswith("local: always on ")
    assert always["Remediation"]["Recommendation"]["Text"] == "Set t.fire=0."
    assert always["Resources"][0]["Type"] == "Other" and always["Workflow"]["Status"] == "NEW"
    first = report["findings"][0]["first_seen"]
    assert always["FirstObservedAt"] == always["CreatedAt"] == first

    code, err = scan(tmp_path)  # nothing changed: nothing sent
    assert "imported 0 finding(s), archived 0, 2 unchanged not sent" in err and gate.import_sizes == [2]

    code, err = scan(tmp_path, "--set", "t.fire=0")  # t.always resolved on a reached host: archived
    assert "imported 0 finding(s), archived 1, 1 unchanged" in err, err
    held = all_findings(client)
    assert len(held) == 2  # updated in place: no copies
    gone = held[asff.finding_id("t.always", "local", None)]
    assert gone["RecordState"] == "ARCHIVED" and gone["FirstObservedAt"] == first
    assert held[asff.finding_id("t.kernel", "local", None)]["RecordState"] == "ACTIVE"

    waivers = tmp_path / "waivers.yaml"
    waivers.write_text("waivers:\n  - {rule: t.kernel, hosts: [local], reason: known, expires: 2999-01-01}\n")
    code, err = scan(tmp_path, "--set", "t.fire=0", "--waivers", str(waivers))
    assert "imported 1 finding(s), archived 0" in err, err
    kernel = all_findings(client)[asff.finding_id("t.kernel", "local", None)]
    assert kernel["Workflow"]["Status"] == "SUPPRESSED" and kernel["RecordState"] == "ACTIVE"

    code, err = scan(tmp_path)  # back again: active once more
    assert "imported 2 finding(s), archived 0" in err and code == 1
    again = all_findings(client)
    assert {f["RecordState"] for f in again.values()} == {"ACTIVE"} and len(again) == 2


def fleet_report(hosts: int, per_host: int) -> dict[str, Any]:
    return {"generated_at": "2026-12-01T00:00:00Z",
            "hosts": [{"name": f"h{i}", "target": f"ssm://i-{i:017x}", "status": "ok",
                       "labels": {"az": "us-east-1b", "ami_id": "ami-0123456789abcdef0"}} for i in range(hosts)],
            "findings": [{"host": f"h{i}", "rule": f"t.r{j}", "severity": "medium", "title": f"r{j} on h{i}",
                          "item": None, "waived": False, "first_seen": "2026-11-30T00:00:00Z"}
                         for i in range(hosts) for j in range(per_host)]}


def test_more_than_250_findings_go_100_per_call_through_throttling(hub: tuple[Gate, Any]) -> None:
    gate, client = hub
    gate.throttle_next = 2  # the first call is throttled twice, then accepted
    ledger: dict[str, dict[str, Any]] = {}
    waits: list[float] = []
    outcome = securityhub.sync(REGION, fleet_report(60, 5), ledger, sleep=waits.append)
    assert outcome.sent == 300 and not outcome.failed
    assert gate.import_sizes == [100, 100, 100] and waits == [0.5, 1.0]
    held = all_findings(client)
    assert len(held) == 300
    one = held[asff.finding_id("t.r0", "h7", None)]
    assert one["Resources"][0]["Type"] == "AwsEc2Instance"
    assert one["Resources"][0]["Id"] == f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/i-{7:017x}"
    assert one["Resources"][0]["Details"]["AwsEc2Instance"]["ImageId"] == "ami-0123456789abcdef0"
    assert len(ledger[f"securityhub:{REGION}:{ACCOUNT}"]) == 300


def test_refused_findings_are_named_and_sent_again_next_time(hub: tuple[Gate, Any]) -> None:
    gate, client = hub
    report = fleet_report(3, 2)
    bad = asff.finding_id("t.r1", "h2", None)
    gate.refuse = {bad}
    ledger: dict[str, dict[str, Any]] = {}
    outcome = securityhub.sync(REGION, report, ledger, sleep=lambda s: None)
    assert outcome.sent == 5 and outcome.failed == [f"{bad}: InvalidInput: refused by the gate"]
    assert "1 failed: " in outcome.text("securityhub:us-east-1")
    gate.refuse = set()
    outcome = securityhub.sync(REGION, report, ledger, sleep=lambda s: None)
    assert outcome.sent == 1 and outcome.unchanged == 5 and gate.import_sizes[-1] == 1


def test_findings_never_go_to_an_instance_the_host_only_claims(hub: tuple[Gate, Any]) -> None:
    """Issue 37 item 9: a host reached by SSH without an instance_id label that reports another instance's id
    (host-written cloud-init data or IMDS answer) gets its findings filed as `Other`, and is named."""
    gate, client = hub
    report = fleet_report(1, 1)
    victim = "i-0123456789abcdef0"
    report["hosts"] = [{"name": "h0", "target": "ssh://10.0.0.9", "status": "ok", "labels": {},
                        "facts_summary": {"instance_id": victim, "az": "us-east-1a"}}]
    outcome = securityhub.sync(REGION, report, {}, sleep=lambda s: None)
    assert outcome.sent == 1 and not outcome.failed
    [held] = all_findings(client).values()
    assert [r["Type"] for r in held["Resources"]] == ["Other"] and victim not in json.dumps(held)
    assert (f"not sent to an instance, 1 host(s): h0 (reports instance {victim} of itself, not established by the "
            "scanner") in outcome.text("securityhub:us-east-1")


def test_a_batch_over_the_limit_is_refused_by_the_gate(hub: tuple[Gate, Any]) -> None:
    """The gate really enforces the limit (so the batching test above can fail)."""
    gate, _ = hub
    hub_client = securityhub.client(REGION)
    docs = asff.documents(fleet_report(101, 1), REGION, ACCOUNT)  # type: ignore[arg-type]
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="InvalidInputException"):
        hub_client.batch_import_findings(Findings=docs)


@pytest.mark.parametrize(("target", "needle"), [
    ("securityhub:mars-north-9", "not a region"), ("securityhub:US-EAST-1", "not a region"),
    ("ssm-compliance:nowhere", "not a region"),
])
def test_a_bad_region_is_bad_input_before_any_host(tmp_path: Path, target: str, needle: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "local", "--store", str(tmp_path / "h.sqlite3"), "--notify", target], Env(out, err))
    assert code == 2 and needle in err.getvalue()
    assert not (tmp_path / "h.sqlite3").exists() and out.getvalue() == ""


def test_no_region_anywhere_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "local", "--store", str(tmp_path / "h.sqlite3"), "--notify", "securityhub"], Env(out, err))
    assert code == 2 and "no region" in err.getvalue()
