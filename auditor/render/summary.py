"""The terminal summary's findings: identical findings across hosts as one line with the count and names.

Worst first, then an incident chain's cause before its effects (chain position), then how many hosts share it.
A group is rule × item × severity, as in the HTML report. Rules that could not be evaluated are folded into
one line per area not read, below the real findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..models import Finding, Report, severity_rank
from ..notread import not_evaluated
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


def _unevaluated(f: Finding) -> bool:
    return not_evaluated(f.rule, f.title, f.evidence)


def groups(report: Report) -> list[Group]:
    """Unwaived real findings grouped, worst first, then cause before effect (chain position), then host count.
    Rules that could not be evaluated are not among them: `unevaluated` folds those."""
    position = {str(r.get("id")): r["chain_position"] for r in report.rules
                if isinstance(r, dict) and isinstance(r.get("chain_position"), int)}
    by_key: dict[tuple[str, str | None, str], Group] = {}
    for f in report.findings:
        if not f.waived and not _unevaluated(f):
            by_key.setdefault((f.rule, f.item, f.severity), Group(f.severity, f.rule, f.item)).findings.append(f)
    return sorted(by_key.values(), key=lambda g: (-severity_rank(g.severity), position.get(g.rule, NO_CHAIN),
                                                  -len(g.findings), g.rule, g.item or ""))


@dataclass
class Fold:
    """Rules that could not be evaluated for the same area(s) not read: one terminal line per area."""

    areas: str | None  # `systemd`, `cgroups, kernel`; None for rules that raised an error
    findings: list[Finding] = field(default_factory=list)

    def line(self) -> str:
        """`could not be evaluated on 3 hosts (a, b, c): 11 rules reading systemd: systemd not collected (…)`."""
        by_host: dict[str, Finding] = {}
        for f in self.findings:
            by_host.setdefault(f.host, f)
        first = next(iter(by_host.values()))
        others_differ = any(_reason(f) != _reason(first) for f in by_host.values())
        why = one_line(_reason(first)) + (f" ({one_line(first.host)}; others differ)" if others_differ else "")
        rules = len({f.rule for f in self.findings})
        who = Group("", "", None, list(by_host.values())).who()
        what = "that raised an error" if self.areas is None else f"reading {self.areas}"
        return f"could not be evaluated on {who}: {rules} rule{'s' if rules != 1 else ''} {what}: {why}"


def _reason(f: Finding) -> str:
    return f.title.split(" could not be evaluated: ", 1)[-1]


def unevaluated(report: Report) -> list[Fold]:
    """Unwaived "could not be evaluated" findings, one Fold per area(s) not read; widest first."""
    folds: dict[str | None, Fold] = {}
    for f in report.findings:
        if not f.waived and _unevaluated(f):
            missing = f.evidence.get("missing")
            areas = ", ".join(str(a) for a in missing) if isinstance(missing, list) and missing else None
            folds.setdefault(areas, Fold(areas)).findings.append(f)
    return sorted(folds.values(), key=lambda fold: (-len(fold.findings), fold.areas or ""))
