"""JUnit XML for CI systems: a testsuite per host, a testcase per host × rule.

<failure> for unwaived findings at or above the report's fail_on, <skipped> when every finding of that
host × rule is waived or the rule could not be evaluated there (an area not read: the reason is the message;
a rule that raised is an <error>), <error> for every rule of a host that was not reached (unknown is not a pass)
and for each collector that failed on a reached host; a facility the host lacks (no systemd) is a
<skipped> `collect AREA` case with the reason, as the exit code and Prometheus count it complete (view.
unavailable). Baseline drift is one more testcase per host. Valid for Jenkins' xUnit schema (junit-10.xsd:
`skipped` counts only on <testsuite>).
Built with xml.etree, so host text is escaped by the XML writer; control characters (which XML cannot
carry), bidi overrides and lone surrogates are shown as \\xNN / \\uNNNN (textsafe).
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from collections import defaultdict
from typing import Any

from ..models import severity_rank
from ..notread import FAILED, NOT_COLLECTED, NOTES, not_evaluated, unavailable
from ..reporttypes import DriftDoc, FindingDoc, HostDoc, ReportDoc
from ..textsafe import block
from .view import at_or_above, drift_values, show

DRIFT_CASE = "baseline drift"


def _text(value: Any) -> str:
    """Text XML 1.0 can carry and a terminal shows inertly: control and bidi characters as visible escapes."""
    return block(show(value))


def _seconds(value: Any) -> float:
    """A duration for a `time` attribute: finite and not negative (CI readers reject `nan`), else 0."""
    try:
        seconds = float(value or 0)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past float's range
        return 0.0
    return seconds if math.isfinite(seconds) and seconds >= 0 else 0.0


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: Any) -> ET.Element:
    el = ET.SubElement(parent, tag, {k: _text(v) for k, v in attrs.items()})
    if text:
        el.text = _text(text)
    return el


def _finding_text(f: FindingDoc) -> str:
    lines = [f"[{f['severity']}] {f['title']}" + (f" ({f['item']})" if f.get("item") else "")]
    if f.get("remediation"):
        lines.append(f"remediation: {f['remediation']}")
    if f.get("evidence"):
        lines.append("evidence: " + json.dumps(f["evidence"], sort_keys=True, ensure_ascii=False, default=str))
    return "\n".join(lines)


def _rule_ids(doc: ReportDoc) -> list[str]:
    """Rules that ran, in the report's order, then any rule only the findings name."""
    ids = [str(r["id"]) for r in doc.get("rules") or [] if isinstance(r, dict) and r.get("id")]
    extra = sorted({f["rule"] for f in doc.get("findings") or []} - set(ids))
    return ids + extra


def _rule_case(case: ET.Element, findings: list[FindingDoc], fail_on: str | None) -> str:
    """Fill one host × rule testcase; returns its outcome: failure, error, skipped or passed."""
    active = [f for f in findings if not f.get("waived")]
    if active and all(not_evaluated(f["rule"], f["title"], f.get("evidence")) for f in active):
        errors = [f for f in active if (f.get("evidence") or {}).get("status") == "error"]
        reason = (errors or active)[0]["title"].split(" could not be evaluated: ", 1)[-1]
        _sub(case, "error" if errors else "skipped", message=f"not evaluated: {reason}")
        return "error" if errors else "skipped"
    failing = [f for f in active if at_or_above(f["severity"], fail_on)]
    if failing:
        failing.sort(key=lambda f: -severity_rank(f["severity"]))
        worst = failing[0]
        message = worst["title"] + (f" (+{len(failing) - 1} more)" if len(failing) > 1 else "")
        _sub(case, "failure", "\n\n".join(_finding_text(f) for f in failing), message=message,
             type=worst["severity"])
        rest = [f for f in findings if f not in failing]
    elif findings and not active:
        _sub(case, "skipped", message="waived: " + "; ".join(sorted({f.get("waiver") or "" for f in findings})))
        return "skipped"
    else:
        rest = findings
    if rest:
        _sub(case, "system-out", "\n\n".join(("(waived) " if f.get("waived") else "") + _finding_text(f)
                                             for f in rest))
    return "failure" if failing else "passed"


def _drift_case(case: ET.Element, drift: list[DriftDoc], fail_on: str | None) -> str:
    failing = [d for d in drift if at_or_above(d["severity"], fail_on)]
    lines = [f"[{d['severity']}] {d['path']} {d['kind']}: {' -> '.join(drift_values(d))}" for d in drift]
    if failing:
        _sub(case, "failure", "\n".join(lines), message=f"{len(failing)} drift item(s) at or above {fail_on}",
             type=max((d["severity"] for d in failing), key=severity_rank))
    elif lines:
        _sub(case, "system-out", "\n".join(lines))
    return "failure" if failing else "passed"


def _host_suite(root: ET.Element, doc: ReportDoc, host: HostDoc, rules: list[str],
                findings: list[FindingDoc], drift: list[DriftDoc]) -> dict[str, int]:
    name, fail_on = host["name"], doc.get("fail_on")
    suite = _sub(root, "testsuite", name=name, hostname=name, timestamp=doc.get("generated_at") or "",
                 time=f"{_seconds(host.get('duration_s')):.3f}")
    props = _sub(suite, "properties")
    for key, value in [("target", host.get("target")), ("status", host["status"]),
                       *sorted((host.get("labels") or {}).items())]:
        _sub(props, "property", name=key, value=value)
    tally = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    by_rule: dict[str, list[FindingDoc]] = defaultdict(list)
    for f in findings:
        by_rule[f["rule"]].append(f)
    names = rules + ([DRIFT_CASE] if doc.get("baseline") or drift else [])
    for rule in names:
        case = _sub(suite, "testcase", classname=name, name=rule, time="0")
        tally["tests"] += 1
        if host["status"] != "ok":
            _sub(case, "error", host.get("error") or "", message=f"host {host['status']}: not evaluated",
                 type=host["status"])
            tally["errors"] += 1
            continue
        outcome = _drift_case(case, drift, fail_on) if rule == DRIFT_CASE else _rule_case(case, by_rule[rule],
                                                                                          fail_on)
        if outcome in ("failure", "error", "skipped"):
            tally[{"failure": "failures", "error": "errors", "skipped": "skipped"}[outcome]] += 1
    answers = unavailable(host.get("collector_errors") or {}, host.get("failed_areas"))
    for area, message in sorted((host.get("collector_errors") or {}).items()):
        case = _sub(suite, "testcase", classname=name, name=f"collect {area}", time="0")
        tally["tests"] += 1
        if area in answers:
            _sub(case, "skipped", message=f"{area} {NOT_COLLECTED}: {message}")
            tally["skipped"] += 1
            continue
        if area in NOTES and host.get("complete"):  # links read as chroot would: said, nothing left unknown
            _sub(case, "system-out", message)
            continue
        _sub(case, "error", message, message=f"collector {area} {FAILED}: its facts are unknown", type="collector")
        tally["errors"] += 1
    for key, n in tally.items():
        suite.set(key, str(n))
    return tally


def render(doc: ReportDoc) -> str:
    rules = _rule_ids(doc)
    findings: dict[str, list[FindingDoc]] = defaultdict(list)
    for f in doc.get("findings") or []:
        findings[f["host"]].append(f)
    drift: dict[str, list[DriftDoc]] = defaultdict(list)
    for d in doc.get("drift") or []:
        drift[d["host"]].append(d)
    root = ET.Element("testsuites", {"name": "ami-auditor"})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    elapsed = 0.0
    for host in doc["hosts"]:
        for key, n in _host_suite(root, doc, host, rules, findings[host["name"]], drift[host["name"]]).items():
            totals[key] += n
        elapsed += _seconds(host.get("duration_s"))
    for key, n in totals.items():
        if key != "skipped":  # junit-10.xsd allows `skipped` on <testsuite> only
            root.set(key, str(n))
    root.set("time", f"{_seconds(elapsed):.3f}")  # huge durations may sum to inf
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
