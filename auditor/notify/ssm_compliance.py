"""`--notify ssm-compliance[:REGION]`: per SSM-managed instance, one Systems Manager Compliance item per
rule (PutComplianceItems, ComplianceType `Custom:AmiAuditor`, UploadType COMPLETE).

COMPLIANT unless the rule has an unwaived finding on the host (waived: COMPLIANT, the waiver named in
Details). Only hosts this scan reached are sent; a host with no instance id the scanner established (asff.instance_of:
never one the host only reports of itself), or one SSM does not manage (DescribeInstanceInformation), is skipped
with a note. An instance whose items are the same as last sent
(the ledger's content hash) is not sent again. Sizes kept to the API's: ≤ 10,000 items per call, Title
≤ 500, Details keys ≤ 64 and values ≤ 4,096 characters, ExecutionId ≤ 100.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ..textsafe import one_line
from . import asff, backoff

COMPLIANCE_TYPE = "Custom:AmiAuditor"
MAX_ITEMS = 10_000
MAX_TITLE = 500
MAX_ITEM_ID = 100
MAX_DETAIL_VALUE = 4096
SEVERITY = {"critical": "CRITICAL", "high": "HIGH", "medium": "MEDIUM", "low": "LOW", "info": "INFORMATIONAL"}


def items(report: Mapping[str, Any], host: str) -> list[dict[str, Any]]:
    """One item per rule of the report, by rule id (sorted, at most MAX_ITEMS)."""
    mine: dict[str, list[dict[str, Any]]] = {}
    for f in report["findings"]:
        if f["host"] == host:
            mine.setdefault(f["rule"], []).append(f)
    out = []
    for rule in sorted(report.get("rules") or [], key=lambda r: r["id"])[:MAX_ITEMS]:
        found = mine.get(rule["id"], [])
        active = [f for f in found if not f["waived"]]
        shown: dict[str, Any] | None = (active or found or [None])[0]  # type: ignore[list-item]
        title = shown["title"] if shown else rule.get("title") or rule["id"]
        details = {"Rule": rule["id"], "Findings": str(len(active)), "Waived": str(len(found) - len(active))}
        if shown and shown.get("item"):
            details["Item"] = shown["item"]
        if found and not active and found[0].get("waiver"):
            details["Waiver"] = found[0]["waiver"]
        out.append({"Id": asff.cut(rule["id"], MAX_ITEM_ID), "Title": asff.cut(title, MAX_TITLE),
                    "Severity": SEVERITY.get(rule["severity"], "UNSPECIFIED"),
                    "Status": "NON_COMPLIANT" if active else "COMPLIANT",
                    "Details": {k: asff.cut(v, MAX_DETAIL_VALUE) for k, v in details.items()}})
    return out


def content_hash(entries: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest()


def _managed(ssm: Any, ids: list[str]) -> set[str]:
    from ..aws.ssm import ping_statuses

    return set(ping_statuses(ssm, ids))


def sync(region: str, report: Mapping[str, Any], ledger: dict[str, dict[str, Any]],
         sleep: Callable[[float], None] = time.sleep) -> str:
    """Send each reached, SSM-managed instance's items when they changed; one line saying what was done."""
    sent = ledger.setdefault(f"ssm-compliance:{region}", {})
    reached = [h for h in report["hosts"] if h["status"] == "ok"]
    by_instance = {iid: h["name"] for h in reached if (iid := asff.instance_of(h))}
    no_id = [f"{h['name']} ({asff.unestablished(h) or 'no instance id'})" for h in reached if not asff.instance_of(h)]
    ssm = backoff.client("ssm", region)
    managed = _managed(ssm, sorted(by_instance)) if by_instance else set()
    unmanaged = sorted(i for i in by_instance if i not in managed)
    at = datetime.fromisoformat(report["generated_at"].replace("Z", "+00:00"))
    scan_id = (report.get("history") or {}).get("scan_id")
    summary = {"ExecutionTime": at, "ExecutionId": f"ami-auditor-scan-{scan_id}"[:100], "ExecutionType": "Command"}
    put, same, failed = 0, 0, []
    for iid in sorted(managed):
        entries = items(report, by_instance[iid])
        digest = content_hash(entries)
        if sent.get(iid) == digest:
            same += 1
            continue
        call = functools.partial(ssm.put_compliance_items, ResourceId=iid, ResourceType="ManagedInstance",
                                 ComplianceType=COMPLIANCE_TYPE, ExecutionSummary=summary, Items=entries,
                                 ItemContentHash=digest, UploadType="COMPLETE")
        try:
            backoff.call_with_backoff(call, sleep)
        except Exception as exc:  # noqa: BLE001 - one instance failing is reported, the others still sent
            failed.append(f"{iid}: {type(exc).__name__}: {exc}")
            continue
        sent[iid] = digest
        put += 1
    line = f"ssm-compliance:{region}: {put} instance(s) updated, {same} unchanged not sent"
    skipped = no_id + [f"{i} (not SSM-managed)" for i in unmanaged]
    if skipped:
        line += f"; skipped {len(skipped)}: " + ", ".join(skipped[:5]) + (" …" if len(skipped) > 5 else "")
    if failed:
        line += f"; {len(failed)} failed: " + "; ".join(failed[:5])
    return one_line(line)
