"""Waivers: accepted findings, scoped by rule, hosts (glob) or labels, optionally one item, until a date.

    waivers:
      - rule: systemd.unit-crash-looping   # rule id (glob allowed)
        hosts: ["b*"]                      # host-name globs, and/or
        labels: {az: us-east-1b}           # label selector (every label must match; values may be globs)
        item: ecs.service                  # optional: only this item (glob)
        reason: ECS agent removed in the next AMI (OPS-123)
        expires: 2026-09-30

Waived findings stay in the report with `waived: true`; an expired waiver waives nothing and says so.
The file's shape is declared in schemas/waivers.schema.json; the code checks the dates and the rule ids.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

from ..errors import InputError
from ..inputschema import Form, check
from ..models import Finding
from ..yamlload import LineDict, as_text, load_yaml_file


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


_YMD = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
WAIVERS_FORM = Form("waivers", "the waivers file", list_name="waivers")


def _date(node: LineDict, path: str) -> dt.date:
    """`expires`: a date written YYYY-MM-DD, quoted or not, as the schema says (so editors agree): a time of day
    (`2026-09-30T12:00:00Z`), YAML 1.1's one-digit `2026-9-3` and 2026-02-30 are refused here too."""
    value, line = node["expires"], node.line_of("expires")
    written = node.key_texts.get("expires", value) if isinstance(value, dt.date) else value
    try:
        if isinstance(value, dt.datetime) or not _YMD.match(str(written)):
            raise ValueError
        return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))
    except ValueError:
        raise InputError(f"expires: {str(written)!r} is not a date (YYYY-MM-DD)", path, line) from None


def _waiver(node: LineDict, path: str, rule_ids: set[str] | None) -> Waiver:
    """One waiver (its shape checked by the schema): the rule must match a loaded rule."""
    rule = node["rule"]
    if rule_ids is not None and not any(fnmatchcase(r, rule) for r in rule_ids):
        raise InputError(f"rule {rule!r} matches no loaded rule", path, node.line_of("rule"))
    hosts = node.get("hosts") or ()
    labels = node.get("labels") or {}
    return Waiver(rule, (hosts,) if isinstance(hosts, str) else tuple(hosts),
                  tuple((str(k), as_text(labels, k, path, f"labels.{k}")) for k in labels), node.get("item"),
                  node["reason"].strip(),
                  _date(node, path), path, node.line)


def load_waivers(path: str, rule_ids: set[str] | None = None) -> list[Waiver]:
    """Read a waivers file (a list, or a mapping with `waivers:`); check rule ids against `rule_ids`."""
    doc = load_yaml_file(path)
    check(doc, WAIVERS_FORM, path)
    if isinstance(doc, LineDict):
        doc = doc.get("waivers")
    return [_waiver(node, path, rule_ids) for node in doc or ()]


def apply_waivers(findings: Iterable[Finding], waivers: list[Waiver], labels: dict[str, dict[str, str]],
                  today: dt.date) -> tuple[list[Finding], list[str]]:
    """Mark findings matched by a live waiver; an expired waiver waives nothing and leaves a note."""
    out: list[Finding] = []
    expired_hits: dict[Waiver, int] = {}
    for f in findings:
        host_labels = labels.get(f.host, {})
        live = None
        expired: list[Waiver] = []
        for w in waivers:
            if w.matches(f, host_labels):
                if w.expires >= today:
                    live = w
                    break
                expired.append(w)
        if live is not None:
            out.append(replace(f, waived=True, waiver=f"{live.reason} (until {live.expires}; {live.where()})"))
        elif expired:
            for w in expired:  # each expired waiver counts what it alone would have waived
                expired_hits[w] = expired_hits.get(w, 0) + 1
            expired_first = expired[0]
            out.append(replace(f, waiver=f"waiver expired on {expired_first.expires}; no longer applied "
                                         f"({expired_first.reason}; {expired_first.where()})"))
        else:
            out.append(f)
    notes = [f"waiver {w.where()} for {w.rule} expired on {w.expires}; no longer applied"
             f" ({expired_hits.get(w, 0)} finding(s) it would have waived)" for w in waivers if w.expires < today]
    return out, notes
