"""Waivers: accepted findings, scoped by rule, hosts (glob) or labels, optionally one item, until a date.

    waivers:
      - rule: systemd.unit-crash-looping   # rule id (glob allowed)
        hosts: ["b*"]                      # host-name globs, and/or
        labels: {az: us-east-1b}           # label selector (every label must match; values may be globs)
        item: ecs.service                  # optional: only this item (glob)
        reason: ECS agent removed in the next AMI (OPS-123)
        expires: 2026-09-30

Waived findings stay in the report with `waived: true`; an expired waiver waives nothing and says so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

from ..errors import InputError
from ..models import Finding
from ..yamlload import LineDict, LineList, load_yaml_file, reject_unknown_keys

KEYS = {"rule", "hosts", "labels", "item", "reason", "expires"}


@dataclass(frozen=True)
class Waiver:
    rule: str
    hosts: tuple[str, ...]
    labels: tuple[tuple[str, str], ...]
    item: str | None
    reason: str
    expires: dt.date
    source: str
    line: int

    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def matches(self, finding: Finding, labels: dict[str, str]) -> bool:
        if not fnmatchcase(finding.rule, self.rule):
            return False
        if self.hosts and not any(fnmatchcase(finding.host, h) for h in self.hosts):
            return False
        if any(not fnmatchcase(str(labels.get(k, "")), v) or k not in labels for k, v in self.labels):
            return False
        return self.item is None or (finding.item is not None and fnmatchcase(finding.item, self.item))


def _date(value: object, path: str, line: int) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise InputError(f"expires: {value!r} is not a date (YYYY-MM-DD)", path, line) from None


def _strings(node: LineDict, key: str, path: str) -> tuple[str, ...]:
    value = node.get(key)
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise InputError(f"{key!r} must be a glob or a list of globs", path, node.line_of(key))
    return tuple(values)


def _waiver(node: object, path: str, line: int, rule_ids: set[str] | None) -> Waiver:
    if not isinstance(node, LineDict):
        raise InputError("each waiver must be a mapping", path, line)
    reject_unknown_keys(node, KEYS, path, "waiver")
    for key in ("rule", "reason", "expires"):
        if not node.get(key):
            raise InputError(f"waiver is missing {key!r}", path, node.line)
    rule = node["rule"]
    if not isinstance(rule, str):
        raise InputError("'rule' must be a rule id (glob allowed)", path, node.line_of("rule"))
    if rule_ids is not None and not any(fnmatchcase(r, rule) for r in rule_ids):
        raise InputError(f"rule {rule!r} matches no loaded rule", path, node.line_of("rule"))
    hosts = _strings(node, "hosts", path)
    labels = node.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, (str, int, float)) for v in labels.values()):
        raise InputError("'labels' must be a mapping of label: value (glob)", path, node.line_of("labels"))
    if not hosts and not labels:
        raise InputError("waiver needs 'hosts' (globs) or 'labels' (selector); use hosts: ['*'] for every host",
                         path, node.line)
    item = node.get("item")
    if item is not None and not isinstance(item, str):
        raise InputError("'item' must be a string (glob)", path, node.line_of("item"))
    reason = node["reason"]
    if not isinstance(reason, str):
        raise InputError("'reason' must be a string", path, node.line_of("reason"))
    return Waiver(rule, hosts, tuple((str(k), str(v)) for k, v in labels.items()), item, reason.strip(),
                  _date(node["expires"], path, node.line_of("expires")), path, node.line)


def load_waivers(path: str, rule_ids: set[str] | None = None) -> list[Waiver]:
    """Read a waivers file (a list, or a mapping with `waivers:`); check rule ids against `rule_ids`."""
    doc = load_yaml_file(path)
    if isinstance(doc, LineDict):
        unknown = sorted(set(doc) - {"waivers"}, key=str)  # keys may mix types (`1:` and `zzz:`)
        if unknown:
            raise InputError(f"unknown key {unknown[0]!r} (expected `waivers:`)", path, doc.line_of(unknown[0]))
        doc = doc.get("waivers")
    if doc is None:
        return []
    if not isinstance(doc, LineList):
        raise InputError("waivers must be a list", path, getattr(doc, "line", 1))
    return [_waiver(node, path, doc.line_of(i), rule_ids) for i, node in enumerate(doc)]


def apply_waivers(findings: Iterable[Finding], waivers: list[Waiver], labels: dict[str, dict[str, str]],
                  today: dt.date) -> tuple[list[Finding], list[str]]:
    """Mark findings matched by a live waiver; an expired waiver waives nothing and leaves a note."""
    out: list[Finding] = []
    expired_hits: dict[Waiver, int] = {}
    for f in findings:
        host_labels = labels.get(f.host, {})
        live = expired = None
        for w in waivers:
            if w.matches(f, host_labels):
                if w.expires >= today:
                    live = w
                    break
                expired = expired or w
        if live is not None:
            out.append(replace(f, waived=True, waiver=f"{live.reason} (until {live.expires}; {live.where()})"))
        elif expired is not None:
            expired_hits[expired] = expired_hits.get(expired, 0) + 1
            out.append(replace(f, waiver=f"waiver expired on {expired.expires}; no longer applied "
                                         f"({expired.reason}; {expired.where()})"))
        else:
            out.append(f)
    notes = [f"waiver {w.where()} for {w.rule} expired on {w.expires}; no longer applied"
             f" ({expired_hits.get(w, 0)} finding(s) it would have waived)" for w in waivers if w.expires < today]
    return out, notes
