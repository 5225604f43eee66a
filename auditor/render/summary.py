"""The terminal summary's findings: identical findings across hosts as one line with the count and names.

Ordered as an on-call engineer reads them: an incident chain's cause first (its chain position), then
severity, then how many hosts share it. A group is rule × item × severity, as in the HTML report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..models import Finding, Report, severity_rank
from ..textsafe import one_line
from .view import NO_CHAIN

NAMED = 5  # host names shown before "… N more"


@dataclass
class Group:
    severity: str
    rule: str
    item: str | None
    findings: list[Finding] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return [f.host for f in self.findings]

    def who(self) -> str:
        """`b1`, or `3 hosts (b1, b2, b3)`, or `40 hosts (x00, …, … 35 more)`; host text escaped."""
        hosts = [one_line(h) for h in self.hosts]
        if len(hosts) == 1:
            return hosts[0]
        cut = len(hosts) > NAMED + 1  # never "… 1 more": that name fits
        shown = ", ".join(hosts[:NAMED] if cut else hosts) + (f", … {len(hosts) - NAMED} more" if cut else "")
        return f"{len(hosts)} hosts ({shown})"

    def title(self) -> str:
        """The first finding's title; `(b1; others differ)` when the hosts' titles are not all the same."""
        first = self.findings[0]
        same = all(f.title == first.title for f in self.findings)
        return one_line(first.title) + ("" if same else f" ({one_line(first.host)}; others differ)")


def groups(report: Report) -> list[Group]:
    """Unwaived findings grouped, cause first (chain position), then severity, then host count."""
    position = {str(r.get("id")): r["chain_position"] for r in report.rules
                if isinstance(r, dict) and isinstance(r.get("chain_position"), int)}
    by_key: dict[tuple[str, str | None, str], Group] = {}
    for f in report.findings:
        if not f.waived:
            by_key.setdefault((f.rule, f.item, f.severity), Group(f.severity, f.rule, f.item)).findings.append(f)
    return sorted(by_key.values(), key=lambda g: (position.get(g.rule, NO_CHAIN), -severity_rank(g.severity),
                                                  -len(g.findings), g.rule, g.item or ""))
