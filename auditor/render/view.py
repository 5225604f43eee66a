"""What people read first, derived from the report document: shared by the HTML and Markdown renderers.

Pure functions over the `ami-auditor/report/1` document (reporttypes.ReportDoc). Identical things are
aggregated (findings by rule × item, drift by change, hosts by what is wrong with them) so 10,000 hosts stay
readable.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..models import SEVERITIES, severity_rank
from ..reporttypes import DriftDoc, HostDoc, ReportDoc

UNGROUPED = "(no group)"


def at_or_above(severity: str, fail_on: str | None) -> bool:
    """True when a finding of `severity` fails a scan run with `--fail-on fail_on` (None: nothing fails)."""
    return fail_on is not None and severity_rank(severity) >= severity_rank(fail_on)


def show(value: Any) -> str:
    """A fact value as one line of text: None is 'unknown', strings as they are, the rest compact JSON."""
    if value is None:
        return "unknown"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def p_value(value: Any) -> str:
    """A p-value for people: two significant digits (0.09999999999999996 → 0.1), tiny ones as `< 1e-06`."""
    try:
        p = float(value)
    except (TypeError, ValueError):
        return show(value)
    if p != p:  # NaN never comes from the ranking; show it rather than hide it
        return "nan"
    if p < 1e-6:
        return "< 1e-06"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def score(value: Any) -> str:
    """A score for people: two decimals."""
    try:
        return f"{float(value):.2f}"
    except (TypeError, ValueError):
        return show(value)


def short(text: str, width: int = 24) -> str:
    """Long values (checksums) cut to `width` characters with an ellipsis."""
    return text if len(text) <= width else text[: width - 1] + "…"


def group_key(doc: ReportDoc) -> str | None:
    """The label hosts are grouped by (comparison.group_by; `labels.az` and `az` both mean label az)."""
    key = (doc.get("comparison") or {}).get("group_by")
    if not key:
        return None
    return key[len("labels."):] if key.startswith("labels.") else key


def host_group(host: HostDoc, key: str | None) -> str:
    if not key:
        return UNGROUPED
    value = (host.get("labels") or {}).get(key) or (host.get("facts_summary") or {}).get(key)
    return str(value) if value else UNGROUPED


def groups(doc: ReportDoc) -> list[str]:
    """Group names in display order: those the comparison counted, then any only unreachable hosts have."""
    key = group_key(doc)
    names = list((doc.get("comparison") or {}).get("groups") or {})
    for host in doc["hosts"]:
        name = host_group(host, key)
        if name not in names:
            names.append(name)
    return sorted(names)


def hosts_by_group(doc: ReportDoc) -> list[dict[str, Any]]:
    """Per group: host count and count per status."""
    key = group_key(doc)
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for host in doc["hosts"]:
        table[host_group(host, key)][host["status"]] += 1
    return [{"group": g, "hosts": sum(table[g].values()), "by_status": dict(sorted(table[g].items()))}
            for g in groups(doc) if g in table]


# ------------------------------------------------------------------------------------------------
# comparison heatmap


@dataclass
class Cell:
    group: str
    values: list[tuple[str, int]]  # (value shown, hosts), most common first
    hosts: int
    heat: float  # share of this group's hosts whose value is not the fleet's most common one


@dataclass
class SplitRow:
    rank: int
    path: str
    score: float
    cells: list[Cell]
    majority: str
    related: list[str] = field(default_factory=list)  # facts about the same subject that split the same way


def heatmap(doc: ReportDoc) -> list[SplitRow]:
    """Splits ranked by score (ties keep the compare stage's order), one cell per group."""
    comparison = doc.get("comparison") or {}
    splits = [s for s in comparison.get("splits") or [] if isinstance(s, dict)]
    order = sorted(range(len(splits)), key=lambda i: (-float(splits[i].get("score") or 0), i))
    names = sorted(comparison.get("groups") or {}) or sorted({g for s in splits for g in s.get("counts") or {}})
    rows = []
    for rank, index in enumerate(order, 1):
        split = splits[index]
        counts: dict[str, dict[str, int]] = split.get("counts") or {}
        fleet: Counter[str] = Counter()
        for per_group in counts.values():
            fleet.update({str(v): int(n) for v, n in per_group.items() if n})
        majority = fleet.most_common(1)[0][0] if fleet else ""
        cells = []
        for name in names:
            per_group = {str(v): int(n) for v, n in (counts.get(name) or {}).items() if n}
            total = sum(per_group.values())
            off = total - per_group.get(majority, 0)
            values = sorted(per_group.items(), key=lambda kv: (-kv[1], kv[0]))
            cells.append(Cell(name, values, total, round(off / total, 3) if total else 0.0))
        related = [str(p) for p in split.get("related") or []]
        rows.append(SplitRow(rank, str(split.get("path", "")), float(split.get("score") or 0), cells, majority,
                             related))
    return rows


def heatmap_groups(doc: ReportDoc) -> list[str]:
    rows = heatmap(doc)
    return [c.group for c in rows[0].cells] if rows else []


# ------------------------------------------------------------------------------------------------
# findings and drift, aggregated


@dataclass
class FindingGroup:
    severity: str
    rule: str
    item: str | None
    title: str
    description: str
    remediation: str
    waived: bool
    waiver: str | None
    hosts: list[str] = field(default_factory=list)
    evidence: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (host, evidence), first few
    fails: bool = False
    since: str | None = None  # earliest first-seen time over its hosts (history store), "new" in this scan


def since_text(first_seen: str | None, generated_at: str) -> str:
    """`since 2026-11-30T14:00:00Z`, `new` (first seen in this scan), or '' without a history store."""
    if not first_seen:
        return ""
    return "new" if first_seen == generated_at else f"since {first_seen}"


def _earliest(current: str | None, candidate: str | None) -> str | None:
    if not candidate:
        return current
    return candidate if current is None or candidate < current else current


EVIDENCE_SAMPLES = 5


NO_CHAIN = 1 << 30  # sorts after every chain position


def chain_positions(doc: ReportDoc) -> dict[str, int]:
    """Rule id → its position in an incident chain (0 = first cause), from the report's rules."""
    out = {}
    for rule in doc.get("rules") or []:
        if isinstance(rule, dict) and isinstance(rule.get("chain_position"), int):
            out[str(rule.get("id"))] = int(rule["chain_position"])
    return out


def finding_groups(doc: ReportDoc) -> list[FindingGroup]:
    """Findings aggregated by rule × item × severity × waived; worst first (severity, then chain position:
    upstream causes before their effects, rules in no chain last), then widest."""
    position = chain_positions(doc)
    by_key: dict[tuple[str, str | None, str, bool], FindingGroup] = {}
    for f in doc.get("findings") or []:
        key = (f["rule"], f.get("item"), f["severity"], bool(f.get("waived")))
        group = by_key.get(key)
        if group is None:
            group = by_key[key] = FindingGroup(
                f["severity"], f["rule"], f.get("item"), f["title"], f.get("description") or "",
                f.get("remediation") or "", bool(f.get("waived")), f.get("waiver"),
                fails=not f.get("waived") and at_or_above(f["severity"], doc.get("fail_on")))
        group.hosts.append(f["host"])
        group.since = _earliest(group.since, f.get("first_seen"))
        if len(group.evidence) < EVIDENCE_SAMPLES:
            group.evidence.append((f["host"], f.get("evidence") or {}))
    return sorted(by_key.values(),
                  key=lambda g: (g.waived, -severity_rank(g.severity), position.get(g.rule, NO_CHAIN), -len(g.hosts),
                                 g.rule, g.item or ""))


@dataclass
class DriftGroup:
    path: str
    kind: str
    expected: str
    actual: str
    severity: str
    hosts: list[str] = field(default_factory=list)
    since: str | None = None


def drift_values(d: DriftDoc) -> tuple[str, str]:
    """(expected, actual) as text; the missing side of an added/removed fact reads 'absent'."""
    expected = "absent" if d["kind"] == "added" and d.get("expected") is None else show(d.get("expected"))
    actual = "absent" if d["kind"] == "removed" and d.get("actual") is None else show(d.get("actual"))
    return expected, actual


def drift_groups(doc: ReportDoc) -> list[DriftGroup]:
    """Identical drift (same path, change and severity) on many hosts becomes one row."""
    by_key: dict[tuple[str, str, str, str, str], DriftGroup] = {}
    for d in doc.get("drift") or []:
        key = (d["path"], d["kind"], *drift_values(d), d["severity"])
        group = by_key.setdefault(key, DriftGroup(*key))
        group.hosts.append(d["host"])
        group.since = _earliest(group.since, d.get("first_seen"))
    return sorted(by_key.values(), key=lambda g: (-severity_rank(g.severity), -len(g.hosts), g.path))


# ------------------------------------------------------------------------------------------------
# hosts, aggregated into classes of hosts that are wrong in the same way


FindingKey = tuple[str, str, str | None, bool]  # severity, rule, item, waived
DriftKey = tuple[str, str, str, str, str]  # severity, path, kind, expected, actual
Key = TypeVar("Key", FindingKey, DriftKey)
K = TypeVar("K")
HOSTS_KEPT = 4  # per host class, the first hosts' rows (their detail and pictures); the JSON has every host
NAMES_LISTED = 200  # host names a report lists in full per row; the JSON report has the rest


@dataclass
class HostClass:
    status: str
    group: str
    hosts: list[HostDoc]  # the first HOSTS_KEPT
    findings: list[tuple[str, str, str | None, str, bool]]  # (severity, rule, item, title, waived)
    drift: list[tuple[str, str, str, str, str]]  # (severity, path, kind, expected, actual)
    collector_errors: list[str]
    worst: str | None  # worst unwaived severity
    names: list[str] = field(default_factory=list)  # the first NAMES_LISTED
    count: int = 0  # hosts in the class

    @property
    def first(self) -> HostDoc:
        return self.hosts[0]

    def add(self, host: HostDoc) -> None:
        self.count += 1
        if len(self.hosts) < HOSTS_KEPT:
            self.hosts.append(host)
        if len(self.names) < NAMES_LISTED:
            self.names.append(host["name"])


def _per_host(rows: Iterable[tuple[str, Key]]) -> dict[str, frozenset[Key]]:
    """(host, key) rows as each host's set of keys, hosts with equal sets sharing one (a class's hosts do)."""
    held: dict[frozenset[Key], frozenset[Key]] = {}
    out: dict[str, frozenset[Key]] = {}
    for host, key in rows:
        now = out.get(host, frozenset()) | {key}
        out[host] = held.setdefault(now, now)
    return out


def host_classes(doc: ReportDoc) -> list[HostClass]:
    """Hosts with the same status, group, findings, drift and failed collectors form one class; a class
    keeps its first hosts' rows and names, and counts the rest."""
    key = group_key(doc)
    titles: dict[FindingKey, str] = {}

    def finding_keys() -> Iterator[tuple[str, FindingKey]]:
        for f in doc.get("findings") or []:
            fk = (f["severity"], f["rule"], f.get("item"), bool(f.get("waived")))
            titles.setdefault(fk, f["title"])
            yield f["host"], fk

    findings = _per_host(finding_keys())
    drift = _per_host((d["host"], (d["severity"], d["path"], d["kind"], *drift_values(d)))
                      for d in doc.get("drift") or [])
    classes: dict[tuple[Any, ...], HostClass] = {}
    in_order: dict[frozenset[Any], tuple[Any, ...]] = {}  # hosts of one class have the same sets: each is sorted once

    def ordered(keys: frozenset[K], order: Callable[[K], tuple[Any, ...]]) -> tuple[K, ...]:
        if keys not in in_order:
            in_order[keys] = tuple(sorted(keys, key=order))
        return in_order[keys]

    for host in doc["hosts"]:
        name = host["name"]
        f_keys = ordered(findings.get(name, frozenset()), lambda k: (-severity_rank(k[0]), k[1], k[2] or ""))
        d_keys = ordered(drift.get(name, frozenset()), lambda k: (-severity_rank(k[0]), k[1]))
        errors = tuple(sorted(host.get("collector_errors") or {}))
        signature = (host["status"], host_group(host, key), f_keys, d_keys, errors)
        cls = classes.get(signature)
        if cls is None:
            active = [k[0] for k in f_keys if not k[3]] + [k[0] for k in d_keys]
            worst = max(active, key=severity_rank) if active else None
            cls = classes[signature] = HostClass(
                host["status"], signature[1], [],
                [(k[0], k[1], k[2], titles[k], k[3]) for k in f_keys], list(d_keys), list(errors), worst)
        cls.add(host)
    return sorted(classes.values(), key=_class_order)


def _class_order(cls: HostClass) -> tuple[int, int, int, str, str]:
    """Worst findings first, then hosts not reached, then clean hosts; bigger classes first."""
    bucket = 0 if cls.worst else (1 if cls.status != "ok" else 2)
    return (bucket, -severity_rank(cls.worst) if cls.worst else 0, -cls.count, cls.group, cls.names[0])


# ------------------------------------------------------------------------------------------------
# the first screen


@dataclass
class Culprit:
    split: SplitRow | None
    next_splits: list[SplitRow]
    finding: FindingGroup | None
    unreached: list[str]
    verdict: str  # "fail", "incomplete" or "pass"
    chains: list[ChainGroup] = field(default_factory=list)


def culprit(doc: ReportDoc, groups: list[FindingGroup] | None = None) -> Culprit:
    """The top split, the worst unwaived finding and the hosts not reached: the on-call's first look.
    `groups`: the report's finding_groups when the caller has them already."""
    rows = heatmap(doc)
    active = [g for g in (finding_groups(doc) if groups is None else groups)  # a rule not evaluated is no finding
              if not g.waived and not g.title.startswith(f"{g.rule} could not be evaluated")]
    unreached = [h["name"] for h in doc["hosts"] if h["status"] != "ok"]
    code = doc["summary"].get("exit_code", 0)
    verdict = {0: "pass", 1: "fail", 3: "incomplete"}.get(code, "fail")
    rows = [r for r in rows if r.score > 0]
    return Culprit(rows[0] if rows else None, rows[1:4], active[0] if active else None, unreached, verdict,
                   chain_groups(doc)[:FIRST_SCREEN_CHAINS])


def symptom_top(doc: ReportDoc) -> dict[str, Any] | None:
    """The fact that best separates hosts with the asked-for symptom, when a symptom was ranked."""
    symptom = doc.get("symptom")
    ranked = (symptom["ranked"] if symptom else None) or []
    return ranked[0] if ranked and isinstance(ranked[0], dict) else None


@dataclass
class ChainGroup:
    """Hosts whose findings form the same chain (same rules, same gaps); told with the first host's numbers."""

    text: str
    rules: list[str]
    partial: bool
    missing: list[str]
    hosts: list[str] = field(default_factory=list)
    texts: list[tuple[str, str]] = field(default_factory=list)  # (host, its line), first few


CHAIN_SAMPLES = 5
FIRST_SCREEN_CHAINS = 3


def chain_groups(doc: ReportDoc) -> list[ChainGroup]:
    """The report's chains grouped by their rules; longest chains first, then most hosts."""
    by_key: dict[tuple[tuple[str, ...], bool, tuple[str, ...]], ChainGroup] = {}
    for chain in doc.get("chains") or []:
        if not isinstance(chain, dict):
            continue
        rules = [str(link.get("rule")) for link in chain.get("links") or [] if isinstance(link, dict)]
        missing = sorted({str(m) for gap in chain.get("gaps") or [] for m in gap.get("missing") or []})
        key = (tuple(rules), bool(chain.get("partial")), tuple(missing))
        group = by_key.get(key)
        if group is None:
            group = by_key[key] = ChainGroup(str(chain.get("text", "")), rules, bool(chain.get("partial")), missing)
        group.hosts.append(str(chain.get("host", "")))
        if len(group.texts) < CHAIN_SAMPLES:
            group.texts.append((str(chain.get("host", "")), str(chain.get("text", ""))))
    return sorted(by_key.values(), key=lambda g: (-len(g.rules), -len(g.hosts), g.rules, g.hosts[0]))


def findings_by_severity(doc: ReportDoc) -> list[tuple[str, int]]:
    counts = doc["summary"].get("findings_by_severity") or {}
    return [(s, int(counts.get(s, 0))) for s in SEVERITIES]
