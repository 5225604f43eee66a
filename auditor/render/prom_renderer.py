"""Prometheus text exposition format, for node_exporter's textfile collector (`--format prom --out DIR`).

Gauges only, named by Prometheus conventions (`ami_auditor_` prefix, base units, `_seconds`, no
`_total` on gauges). Host text is untrusted: label values are escaped as the format requires (backslash,
double quote, newline), and every other control, bidi or surrogate character becomes visible text (`\x0d`,
`\u202e`, as textsafe shows it everywhere), since the format has no escape for `\r` and consumers split on
it. One label set appears once: node_exporter drops a file with a repeated series. A host whose shown name
another host already has (a saved report or `analyze` listing one name twice, or two names alike once
escaped) is labelled `NAME#2`, `NAME#3`…; findings and drift naming it go to its first holder. The file is
written atomically like every report (a temporary file, then a rename), so the collector never reads half
a file.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime
from typing import Any, cast

from ..models import SEVERITIES
from ..reporttypes import HostDoc, ReportDoc
from ..textsafe import escape_controls

PREFIX = "ami_auditor_"
CRASH_LOOP_RULE = "systemd.unit-crash-looping"


def _shown(value: object) -> str:
    """A label value as text: unsafe characters visible (`\\x0d`), newlines kept for the format's own escape."""
    return escape_controls(str(value), keep="\n")


def _label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def host_labels(names: list[str]) -> list[str]:
    """One distinct `host` label per host, in order: a shown name already taken gets `#2`, `#3`…"""
    taken: set[str] = set()
    labels = []
    for name in names:
        label, n = _shown(name), 1
        while label in taken:
            n += 1
            label = f"{_shown(name)}#{n}"
        taken.add(label)
        labels.append(label)
    return labels


def _number(value: float) -> str:
    """A sample value in exposition format; a saved report is untrusted, so huge or odd numbers are NaN/±Inf."""
    try:
        number = float(value)
    except (OverflowError, TypeError, ValueError):
        return "NaN"
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(self, name: str, help_text: str, samples: list[tuple[dict[str, Any], Any]]) -> None:
        full = PREFIX + name
        self.lines.append(f"# HELP {full} {help_text}")
        self.lines.append(f"# TYPE {full} gauge")
        seen: set[str] = set()
        for labels, value in samples:
            body = ",".join(f'{k}="{_label(_shown(v))}"' for k, v in labels.items())
            if body in seen:  # a repeated series (a saved report listing one item twice): the first counts
                continue
            seen.add(body)
            self.lines.append(f"{full}{{{body}}} {_number(value)}" if body else f"{full} {_number(value)}")


def _epoch(text: str) -> float:
    """Unix time of an ISO timestamp; NaN when a (saved, untrusted) report's is not one."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError):
        return math.nan


def render(doc: ReportDoc) -> str:
    out = _Out()
    labels = host_labels([h["name"] for h in doc["hosts"]])
    hosts = [cast(HostDoc, dict(h, name=label)) for h, label in zip(doc["hosts"], labels, strict=True)]
    first: dict[str, str] = {}
    for h, label in zip(doc["hosts"], hosts, strict=True):
        first.setdefault(h["name"], label["name"])

    def host(name: str) -> str:  # findings and drift name a host: its first holder's label
        return first.get(name, name)

    out.metric("scan_timestamp_seconds", "When the scan's report was generated (Unix time).",
               [({}, _epoch(doc["generated_at"]))])
    out.metric("scan_exit_code", "The scan's exit code (0 clean, 1 findings, 3 incomplete).",
               [({}, doc["summary"]["exit_code"])])
    by_status = Counter(h["status"] for h in hosts)
    out.metric("hosts", "Hosts in the scan by status.", [({"status": s}, n) for s, n in sorted(by_status.items())])
    out.metric("host_up", "1 when the host was reached and collected, else 0.",
               [({"host": h["name"], "status": h["status"]}, int(h["status"] == "ok")) for h in hosts])
    out.metric("host_complete", "1 when every facts area of the host was collected.",
               [({"host": h["name"]}, int(bool(h.get("complete")))) for h in hosts])
    out.metric("host_scan_duration_seconds", "Time to reach and collect the host.",
               [({"host": h["name"]}, h.get("duration_s") or 0.0) for h in hosts])
    dying = [({"host": h["name"]}, (h.get("facts_summary") or {}).get("dying_memcgs")) for h in hosts]
    out.metric("dying_memcgs", "Dying (zombie) memory cgroups on the host.",
               [(labels, v) for labels, v in dying if isinstance(v, (int, float))])
    active = Counter((host(f["host"]), f["rule"], f["severity"]) for f in doc["findings"] if not f["waived"])
    out.metric("findings", "Unwaived findings by host, rule and severity.",
               [({"host": h, "rule": r, "severity": s}, n) for (h, r, s), n in sorted(active.items())])
    waived = Counter((host(f["host"]), f["rule"], f["severity"]) for f in doc["findings"] if f["waived"])
    out.metric("findings_waived", "Waived findings by host, rule and severity.",
               [({"host": h, "rule": r, "severity": s}, n) for (h, r, s), n in sorted(waived.items())])
    by_severity = Counter(f["severity"] for f in doc["findings"] if not f["waived"])
    out.metric("findings_by_severity", "Unwaived findings in the scan by severity.",
               [({"severity": s}, by_severity.get(s, 0)) for s in SEVERITIES])
    restarts = [({"host": host(f["host"]), "unit": f["item"]}, f["evidence"]["restarts"]) for f in doc["findings"]
                if f["rule"] == CRASH_LOOP_RULE and f.get("item") and isinstance(f["evidence"].get("restarts"), int)]
    restarts.sort(key=lambda sample: -sample[1])  # one unit listed twice on a host: its highest count is kept
    out.metric("unit_restarts", "Restarts this boot of units judged crash-looping.", restarts)
    drift = Counter((host(d["host"]), d["severity"]) for d in doc["drift"])
    out.metric("drift_items", "Differences from the golden baseline by host and severity.",
               [({"host": h, "severity": s}, n) for (h, s), n in sorted(drift.items())])
    return "\n".join(out.lines) + "\n"
