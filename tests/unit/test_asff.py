"""`--format asff`: ASFF documents valid against botocore's Security Hub model, deterministic Ids,
EC2 instances as AwsEc2Instance, images and other hosts as Other, host text escaped and cut."""

from __future__ import annotations

import copy
import json

import botocore.session
import jsonschema
from botocore.validate import ParamValidator

from auditor.notify import asff
from auditor.render import RENDERERS
from tests.asff_schema import asff_schema
from tests.paths import DATA

DATA = DATA / "reports"


def load(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


def test_asff_output_is_valid_against_the_security_hub_model() -> None:
    model = botocore.session.get_session().get_service_model("securityhub")
    shape = model.operation_model("BatchImportFindings").input_shape
    for name in ("fleet", "fleet-scan", "incomplete"):
        doc = load(name)
        out = json.loads(RENDERERS["asff"][0](doc))
        assert len(out) == len(doc["findings"]) > 0
        jsonschema.validate(out, asff_schema())
        report = ParamValidator().validate({"Findings": out[:100]}, shape)
        assert not report.has_errors(), report.generate_report()


def test_ids_are_deterministic_per_rule_host_and_item() -> None:
    doc = load("fleet-scan")
    first = [f["Id"] for f in asff.documents(doc)]
    again = copy.deepcopy(doc)
    again["generated_at"] = "2030-01-01T00:00:00Z"
    assert [f["Id"] for f in asff.documents(again)] == first
    assert len(set(first)) == len(first)  # one Id per identity
    assert asff.finding_id("r", "h", "a.service") != asff.finding_id("r", "h", "b.service")
    assert asff.finding_id("r", "h", None) == asff.finding_id("r", "h", "")


def test_ec2_hosts_are_instances_and_others_are_other() -> None:
    doc = load("fleet-scan")
    host = next(h for h in doc["hosts"] if h["name"] == doc["findings"][0]["host"])
    iid = host["facts_summary"]["instance_id"]
    assert asff.documents(doc, region="eu-west-1", account="123456789012")[0]["Resources"][0]["Type"] == "Other"
    host["labels"]["instance_id"] = iid  # as EC2 discovery or an inventory label gives it
    out = asff.documents(doc, region="eu-west-1", account="123456789012")
    ec2 = out[0]["Resources"][0]
    assert ec2["Type"] == "AwsEc2Instance" and ec2["Region"] == "us-east-1"  # the host's own AZ's region
    assert ec2["Id"] == f"arn:aws:ec2:us-east-1:123456789012:instance/{iid}"
    assert ec2["Details"]["AwsEc2Instance"]["ImageId"] == host["facts_summary"]["ami_id"]
    assert out[0]["ProductArn"] == "arn:aws:securityhub:eu-west-1:123456789012:product/123456789012/default"
    image = asff.resource({"name": "img", "target": "image:///mnt/root", "labels": {}}, "img", "us-east-1",
                          "123456789012")
    assert image["Type"] == "Other" and image["Id"] == "image:///mnt/root"


def test_waived_findings_are_suppressed_and_first_seen_is_created_at() -> None:
    doc = load("fleet")
    for f, d in zip(doc["findings"], asff.documents(doc)):
        assert d["Workflow"]["Status"] == ("SUPPRESSED" if f["waived"] else "NEW")
        assert d["CreatedAt"] == d["FirstObservedAt"] == (f.get("first_seen") or doc["generated_at"])
        assert d["Severity"]["Label"] == asff.SEVERITY_LABEL[f["severity"]]


def test_hostile_text_is_escaped_and_cut_to_the_asff_limits() -> None:
    doc = load("fleet")
    f = doc["findings"][0]
    f["title"] = "\x1b[2J\u202e" + "x" * 5000
    f["description"] = "line\nbreak" + "y" * 5000
    f["remediation"] = "z" * 5000
    f["host"] = "evil\r\nhost"
    d = asff.documents(doc)[0]
    assert len(d["Title"]) <= 256 and "\x1b" not in d["Title"] and "\\x1b" in d["Title"]
    assert "\\u202e" in d["Title"] and "\r" not in d["Title"]
    assert len(d["Description"]) <= 1024 and "\n" not in d["Description"]
    assert len(d["Remediation"]["Recommendation"]["Text"]) <= 512
    jsonschema.validate([d], asff_schema())


def test_the_instance_the_scanner_reached_wins_over_the_one_the_host_reports() -> None:
    """A snapshot is untrusted (and a baked image can carry its build instance's cloud-init data): the
    ssm:// target, then EC2/inventory labels, name the instance; never the host's own claim."""
    claims = {"instance_id": "i-0aaaaaaaaaaaaaaaa", "ami_id": "ami-0aaaaaaaaaaaaaaaa", "az": "eu-west-1a"}
    host = {"name": "b2", "target": "ssm://i-0bbbbbbbbbbbbbbbb?region=us-east-1", "facts_summary": claims,
            "labels": {"instance_id": "i-0cccccccccccccccc", "ami_id": "ami-0cccccccccccccccc", "az": "us-east-1b"}}
    assert asff.instance_of(host) == "i-0bbbbbbbbbbbbbbbb"
    ec2 = asff.resource(host, "b2", "us-east-1", "123456789012")
    assert ec2["Id"] == "arn:aws:ec2:us-east-1:123456789012:instance/i-0bbbbbbbbbbbbbbbb"
    assert ec2["Details"]["AwsEc2Instance"]["ImageId"] == "ami-0cccccccccccccccc" and ec2["Region"] == "us-east-1"
    by_ssh = {**host, "target": "ssh://10.0.0.5"}
    assert asff.instance_of(by_ssh) == "i-0cccccccccccccccc" and asff.unestablished(by_ssh) is None
    assert asff.instance_of({**host, "target": "SSM://i-0bbbbbbbbbbbbbbbb"}) == "i-0bbbbbbbbbbbbbbbb"
    # the host's own claim alone never names the instance: a compromised host would steer findings onto another
    claims_only = {**by_ssh, "labels": {"az": "b"}}
    assert asff.instance_of(claims_only) is None
    assert "reports instance i-0aaaaaaaaaaaaaaaa of itself, not established" in str(asff.unestablished(claims_only))
    only_claims = asff.resource(claims_only, "b2", "us-east-1", "123456789012")
    assert only_claims["Type"] == "Other" and "i-0aaaaaaaaaaaaaaaa" not in json.dumps(only_claims).replace("ami-", "")
    assert only_claims["Region"] == "eu-west-1"  # a label that is no AZ falls back to the host's
