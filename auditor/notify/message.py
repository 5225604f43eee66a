"""What an alert says (pure): the new findings of a report document, as a bounded JSON payload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models import SEVERITIES
from ..textsafe import clip, one_line

MAX_FINDINGS = 100  # listed in one alert; the rest are counted
MAX_TITLE = 300


def new_findings(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Unwaived findings whose first-seen time is this scan's, worst first."""
    order = {s: i for i, s in enumerate(SEVERITIES)}
    found = [f for f in doc["findings"] if not f["waived"] and f.get("first_seen") == doc["generated_at"]]
    return sorted(found, key=lambda f: (order.get(f["severity"], 99), f["rule"], f["host"], f.get("item") or ""))


def _slack(text: str) -> str:
    """Slack's three control characters in message text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def payload(doc: Mapping[str, Any], findings: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON body: a Slack-compatible `text` plus the findings as data (host text escaped and cut)."""
    shown = findings[:MAX_FINDINGS]
    rows = [{"host": one_line(f["host"]), "rule": f["rule"], "severity": f["severity"],
             "item": one_line(f["item"]) if f.get("item") else None, "title": clip(one_line(f["title"]), MAX_TITLE),
             "first_seen": f.get("first_seen")} for f in shown]
    history = doc.get("history") or {}
    head = (f"ami-auditor: {len(findings)} new finding{'s' if len(findings) != 1 else ''} "
            f"(scan {history.get('scan_id', '?')}, {doc['generated_at']}, exit {doc['summary']['exit_code']})")
    lines = [head] + [f"[{r['severity'].upper()}] {r['host']}: {r['title']}" for r in rows]
    if len(findings) > len(shown):
        lines.append(f"… and {len(findings) - len(shown)} more")
    return {"text": _slack("\n".join(lines)), "scan_id": history.get("scan_id"), "generated_at": doc["generated_at"],
            "exit_code": doc["summary"]["exit_code"], "new_findings": len(findings), "findings": rows}
