"""`--notify securityhub[:REGION]`: the report's findings kept in step in Security Hub (BatchImportFindings).

Each scan sends only what changed since the ledger's last accepted copy: new or changed findings
(waived ones SUPPRESSED), and findings gone from a host this scan reached, re-sent ARCHIVED. At most 100
findings per call (the API's limit); throttling is retried with exponential backoff; findings the API
refuses (FailedFindings) are named and left for the next scan to retry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..textsafe import one_line
from . import asff, backoff

BATCH = 100  # BatchImportFindings: Findings is 1..100
SHOWN_FAILURES = 5
_VOLATILE = ("UpdatedAt", "LastObservedAt")


@dataclass
class Outcome:
    sent: int = 0
    archived: int = 0
    unchanged: int = 0
    failed: list[str] | None = None
    unattributed: list[str] | None = None  # "host (why)": findings filed as `Other`, not under an instance

    def text(self, shown: str) -> str:
        failed = self.failed or []
        line = (f"{shown}: imported {self.sent - self.archived} finding(s), archived {self.archived}, "
                f"{self.unchanged} unchanged not sent")
        if self.unattributed:
            line += (f"; not sent to an instance, {len(self.unattributed)} host(s): "
                     + ", ".join(self.unattributed[:SHOWN_FAILURES]) + (" …" if len(self.unattributed) > SHOWN_FAILURES
                                                                       else ""))
        if failed:
            line += f"; {len(failed)} failed: " + "; ".join(failed[:SHOWN_FAILURES])
            line += " …" if len(failed) > SHOWN_FAILURES else ""
        return one_line(line)


def signature(doc: dict[str, Any]) -> str:
    """What a finding says, without the times that move every scan: equal means nothing to send."""
    stable = {k: v for k, v in doc.items() if k not in _VOLATILE}
    return hashlib.sha256(json.dumps(stable, sort_keys=True).encode("utf-8")).hexdigest()


def changes(report: Mapping[str, Any], sent: dict[str, Any], region: str,
            account: str) -> tuple[list[dict[str, Any]], dict[str, str], int]:
    """(documents to send, Id → host of each, how many were unchanged)."""
    at = report["generated_at"]
    reached = {h["name"] for h in report["hosts"] if h["status"] == "ok"}
    now = {d["Id"]: (d, f["host"]) for f, d in zip(report["findings"], asff.documents(report, region, account))}
    out, hosts, unchanged = [], {}, 0
    for fid, (doc, host) in now.items():
        if sent.get(fid, {}).get("sig") == signature(doc):
            unchanged += 1
            continue
        out.append(doc)
        hosts[fid] = host
    for fid, entry in sorted(sent.items()):
        doc = entry.get("doc")
        if fid in now or entry.get("host") not in reached or not isinstance(doc, dict):
            continue
        if doc.get("RecordState") != "ARCHIVED":
            out.append(asff.archived(doc, at))
            hosts[fid] = entry["host"]
    return out, hosts, unchanged


def batches(docs: list[dict[str, Any]], size: int = BATCH) -> Iterator[list[dict[str, Any]]]:
    for i in range(0, len(docs), size):
        yield docs[i:i + size]


def client(region: str) -> Any:
    return backoff.client("securityhub", region)


def account_id(region: str) -> str:
    import boto3

    return str(boto3.client("sts", region_name=region).get_caller_identity()["Account"])


def import_findings(hub: Any, docs: list[dict[str, Any]],
                    sleep: Callable[[float], None] = time.sleep) -> tuple[set[str], list[str]]:
    """(Ids accepted, "Id: why" per refused finding or failed batch)."""
    from botocore.exceptions import BotoCoreError, ClientError

    accepted: set[str] = set()
    failed: list[str] = []
    for batch in batches(docs):
        try:
            answer = backoff.call_with_backoff(functools.partial(hub.batch_import_findings, Findings=batch), sleep)
        except (ClientError, BotoCoreError) as exc:
            failed.extend(f"{d['Id']}: {type(exc).__name__}: {exc}" for d in batch[:1])
            failed.extend(d["Id"] for d in batch[1:])
            continue
        refused = {f.get("Id"): f"{f.get('ErrorCode')}: {f.get('ErrorMessage')}" for f in answer.get("FailedFindings")
                   or []}
        failed.extend(f"{fid}: {why}" for fid, why in refused.items())
        accepted.update(d["Id"] for d in batch if d["Id"] not in refused)
    return accepted, failed


def sync(region: str, report: Mapping[str, Any], ledger: dict[str, dict[str, Any]],
         sleep: Callable[[float], None] = time.sleep) -> Outcome:
    """Send what changed; `ledger[securityhub:REGION:ACCOUNT]` then holds every accepted document."""
    account = account_id(region)
    sent = ledger.setdefault(f"securityhub:{region}:{account}", {})
    docs, hosts, unchanged = changes(report, sent, region, account)
    accepted, failed = import_findings(client(region), docs, sleep) if docs else (set(), [])
    for doc in docs:
        if doc["Id"] in accepted:
            sent[doc["Id"]] = {"sig": signature(doc), "host": hosts[doc["Id"]], "doc": doc}
    archived = sum(1 for d in docs if d["RecordState"] == "ARCHIVED" and d["Id"] in accepted)
    unattributed = [f"{h['name']} ({why})" for h in report["hosts"] if h["status"] == "ok"
                    and (why := asff.unestablished(h))]
    return Outcome(len(accepted), archived, unchanged, failed, unattributed)
