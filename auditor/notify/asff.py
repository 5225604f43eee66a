"""Findings as AWS Security Finding Format documents (pure): what `--format asff` writes and
`--notify securityhub` imports.

One document per finding identity (rule + host + item), with a deterministic `Id`, so a re-scan updates
the finding in Security Hub instead of adding a copy. Host text is escaped (textsafe) and every string
cut to the ASFF limits (Title 256, Description 1024, Recommendation 512, ProductFields values 2048).
The rule's public sources (`refs`, from the report's rules): the first as `Remediation.Recommendation.Url`
(a page about the problem and its fix), all of them in ProductFields `ami-auditor/refs`, whole URLs only
(a cut URL would be a wrong link).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from ..models import cited, is_ref
from ..textsafe import one_line

SCHEMA_VERSION = "2018-10-08"
TYPE = "Software and Configuration Checks/ami-auditor"
SEVERITY_LABEL = {"critical": "CRITICAL", "high": "HIGH", "medium": "MEDIUM", "low": "LOW", "info": "INFORMATIONAL"}
MAX_TITLE = 256
MAX_DESCRIPTION = 1024
MAX_RECOMMENDATION = 512
MAX_ID = 512
MAX_FIELD_KEY = 128
MAX_FIELD_VALUE = 2048
PLACEHOLDER_ACCOUNT = "000000000000"  # `--format asff`: no account is known offline; the importer sets it
PLACEHOLDER_REGION = "us-east-1"
_INSTANCE = re.compile(r"^i-[0-9a-f]{8,17}$")
_AMI = re.compile(r"^ami-[0-9a-f]{8,17}$")
_AZ = re.compile(r"^([a-z]{2}(-[a-z]+)+-\d+)[a-z]$")


def cut(text: object, limit: int) -> str:
    """One escaped line of at most `limit` characters (never empty: ASFF needs non-blank text)."""
    line = one_line(text).strip() or "-"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def finding_id(rule: str, host: str, item: str | None) -> str:
    """The same Id for the same rule + host + item in every scan (host text only hashed)."""
    digest = hashlib.sha256(json.dumps([rule, host, item or ""]).encode("utf-8")).hexdigest()[:40]
    return f"ami-auditor/{cut(rule, MAX_ID - 60)}/{digest}"


def partition_of(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def product_arn(region: str, account: str) -> str:
    """The account's default custom product: every account may import its own findings there."""
    return f"arn:{partition_of(region)}:securityhub:{region}:{account}:product/{account}/default"


def _first(pattern: re.Pattern[str], *candidates: object) -> str | None:
    return next((c for c in candidates if isinstance(c, str) and pattern.match(c)), None)


def instance_of(host: dict[str, Any]) -> str | None:
    """The instance id the scanner established: the ssm:// target it reached, else an EC2-discovery or inventory
    label. Never the id the host reports of itself (a snapshot is untrusted: a compromised host could steer
    findings or COMPLIANT items onto another instance; a baked image reports its build instance)."""
    target = str(host.get("target") or "")
    return _first(_INSTANCE, target[6:].partition("?")[0] if target.lower().startswith("ssm://") else None,
                  (host.get("labels") or {}).get("instance_id"))


def unestablished(host: dict[str, Any]) -> str | None:
    """Why a host's findings go to no instance: the id it reports of itself, not established by the scanner."""
    claimed = (host.get("facts_summary") or {}).get("instance_id")
    if instance_of(host) or not isinstance(claimed, str) or not claimed:
        return None
    return (f"reports instance {one_line(claimed)[:40]} of itself, not established by the scanner "
            "(scan it by ssm:// or give it an inventory label instance_id)")


def resource(host: dict[str, Any] | None, name: str, region: str, account: str) -> dict[str, Any]:
    """AwsEc2Instance (instance id, AMI, AZ where known; labels before what the host reports); an image or a
    non-EC2 host as `Other`."""
    host = host or {"name": name}
    summary = host.get("facts_summary") or {}
    labels = host.get("labels") or {}
    az = _first(_AZ, labels.get("az"), summary.get("az"))
    ami = _first(_AMI, labels.get("ami_id"), summary.get("ami_id"))
    instance = instance_of(host)
    where = _AZ.match(az).group(1) if az else region  # type: ignore[union-attr]
    tags = {k: cut(v, 256) for k, v in (("ami-auditor:host", name), ("ami-auditor:az", az)) if v}
    if instance:
        details: dict[str, Any] = {"AwsEc2Instance": {"ImageId": ami}} if ami else {}
        return {"Type": "AwsEc2Instance", "Partition": partition_of(where), "Region": where, "Tags": tags,
                "Id": f"arn:{partition_of(where)}:ec2:{where}:{account}:instance/{instance}", **(
                    {"Details": details} if details else {})}
    other = {"ami-auditor:target": cut(host.get("target") or name, MAX_FIELD_VALUE)}
    if ami:
        other["ImageId"] = ami
    return {"Type": "Other", "Partition": partition_of(where), "Region": where, "Tags": tags,
            "Id": cut(host.get("target") or name, MAX_ID), "Details": {"Other": other}}


def refs_field(refs: list[str]) -> str | None:
    """The sources that fit whole in one ProductFields value, space-separated (None when there are none)."""
    out: list[str] = []
    for url in refs:
        if len(" ".join([*out, url])) > MAX_FIELD_VALUE:
            break
        out.append(url)
    return " ".join(out) or None


def document(finding: dict[str, Any], host: dict[str, Any] | None, at: str, region: str,
             account: str, refs: list[str] | None = None) -> dict[str, Any]:
    """One ASFF finding. CreatedAt/FirstObservedAt: the store's first-seen time; waived: SUPPRESSED.
    `refs`: its rule's public sources."""
    rule, name, item = finding["rule"], finding["host"], finding.get("item")
    first = finding.get("first_seen") or at
    refs = [r for r in refs or () if is_ref(r)]
    fields = {"ami-auditor/rule": rule, "ami-auditor/host": name, "ami-auditor/item": item,
              "ami-auditor/waiver": finding.get("waiver") if finding.get("waived") else None,
              "ami-auditor/refs": refs_field(refs)}
    doc: dict[str, Any] = {
        "SchemaVersion": SCHEMA_VERSION,
        "Id": finding_id(rule, name, item),
        "ProductArn": product_arn(region, account),
        "GeneratorId": cut(rule, MAX_ID),
        "AwsAccountId": account,
        "Types": [TYPE],
        "CreatedAt": first, "UpdatedAt": at, "FirstObservedAt": first, "LastObservedAt": at,
        "Severity": {"Label": SEVERITY_LABEL.get(finding["severity"], "INFORMATIONAL"),
                     "Original": finding["severity"]},
        "Title": cut(f"{name}: {finding['title']}", MAX_TITLE),
        "Description": cut(finding.get("description") or finding["title"], MAX_DESCRIPTION),
        "ProductFields": {k: cut(v, MAX_FIELD_VALUE) for k, v in fields.items() if v},
        "Resources": [resource(host, name, region, account)],
        "RecordState": "ACTIVE",
        "Workflow": {"Status": "SUPPRESSED" if finding.get("waived") else "NEW"},
    }
    recommendation: dict[str, str] = {}
    if finding.get("remediation"):
        recommendation["Text"] = cut(finding["remediation"], MAX_RECOMMENDATION)
    if refs:
        recommendation["Url"] = refs[0]
    if recommendation:
        doc["Remediation"] = {"Recommendation": recommendation}
    return doc


def documents(report: Mapping[str, Any], region: str = PLACEHOLDER_REGION,
              account: str = PLACEHOLDER_ACCOUNT) -> list[dict[str, Any]]:
    """Every finding of a report document (waived ones SUPPRESSED), in the report's order."""
    hosts = {h["name"]: h for h in report["hosts"]}
    at = report["generated_at"]
    refs = cited(report.get("rules"))
    return [document(f, hosts.get(f["host"]), at, region, account, refs.get(f["rule"])) for f in report["findings"]]


def archived(previous: dict[str, Any], at: str) -> dict[str, Any]:
    """A finding sent before and gone from its (reached) host now: the same document, ARCHIVED."""
    return {**previous, "UpdatedAt": at, "RecordState": "ARCHIVED"}
