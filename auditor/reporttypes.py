"""The report document's sections as types (`ami-auditor/report/1`, auditor/schemas/report.schema.json).

A report is JSON-shaped data: a saved report read back and a fresh one made by reportdoc are the same
thing to a renderer, so the sections are TypedDicts (keys the schema may leave out are optional). The
sections that grow with the fleet (hosts, findings, drift) are typed as read-only sequences: a fresh
report's are rows made as they are read (reportdoc.Rows), a saved report's are lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict


class _SummaryRequired(TypedDict):
    hosts: int
    by_status: dict[str, int]
    findings_by_severity: dict[str, int]
    exit_code: int


class SummaryDoc(_SummaryRequired, total=False):
    findings: int  # unwaived
    waived: int
    drift: int


class HotThreadDoc(TypedDict, total=False):
    pid: int | None
    tid: int | None
    comm: str | None
    ticks: int | None
    system_ticks: int | None


class CpuDoc(TypedDict, total=False):
    """The CPU window compactly: cores as [cpu, user %, system %], the hot core and its busiest thread."""

    count: int | None
    window_s: float | None
    cores: list[list[float | None]]  # [cpu, user %, system %]
    max_core: int | None
    max_core_system_pct: float | None
    hot_thread: HotThreadDoc | None


class FactsSummaryDoc(TypedDict, total=False):
    """A few headline facts per host (renderers never see snapshots); None where not read."""

    hostname: str | None
    instance_id: str | None
    ami_id: str | None
    az: str | None
    os: str | None
    kernel: str | None
    dying_memcgs: int | None
    enabled_units: int | None
    restarts: int | None
    unit_restarts: dict[str, int]
    cpu: CpuDoc | None


class NotReadDoc(TypedDict):
    state: str  # notread's word: not applicable, not collected, failed
    why: str


class _HostRequired(TypedDict):
    name: str
    target: str
    labels: dict[str, str]
    status: str  # ok | unreachable | auth_failed | timeout | error


class HostDoc(_HostRequired, total=False):
    error: str | None
    duration_s: float
    collector_errors: dict[str, str]
    not_applicable: list[str]
    complete: bool
    failed_areas: list[str]
    not_read: dict[str, NotReadDoc]
    facts_summary: FactsSummaryDoc | None


class _FindingRequired(TypedDict):
    host: str
    rule: str
    severity: str
    title: str
    evidence: dict[str, Any]  # what the rule read, as the host gave it
    waived: bool


class FindingDoc(_FindingRequired, total=False):
    description: str
    remediation: str
    item: str | None
    tags: list[str]
    waiver: str | None
    first_seen: str  # only when a history store first saw it


class _DriftRequired(TypedDict):
    host: str
    path: str
    kind: str  # added | removed | changed | unknown
    expected: Any  # fact values, whatever JSON the baseline and host hold
    actual: Any
    severity: str


class DriftDoc(_DriftRequired, total=False):
    first_seen: str


class ChainDoc(TypedDict):
    """Per host, findings linked by their rules' leads_to, upstream first."""

    host: str
    text: str
    partial: bool
    links: list[dict[str, Any]]
    gaps: list[dict[str, Any]]


class ComparisonDoc(TypedDict, total=False):
    group_by: str
    groups: dict[str, int]
    splits: list[dict[str, Any]]
    outliers: list[dict[str, Any]]
    outlier_hosts: list[dict[str, Any]]
    outlier_hosts_total: int


class _SymptomRequired(TypedDict):
    symptom: str
    hosts_with: list[str]
    hosts_without: list[str]
    ranked: list[dict[str, Any]]


class SymptomDoc(_SymptomRequired, total=False):
    kind: str  # rule | label


class _RuleRequired(TypedDict):
    id: str
    severity: str


class RuleDoc(_RuleRequired, total=False):
    title: str
    pack: str | None
    tags: list[str]
    source: str | None
    refs: list[str]
    chain_position: int


class _ReportRequired(TypedDict):
    schema: str
    generated_at: str
    summary: SummaryDoc
    hosts: Sequence[HostDoc]
    findings: Sequence[FindingDoc]
    drift: Sequence[DriftDoc]
    comparison: ComparisonDoc | None


class ReportDoc(_ReportRequired, total=False):
    """The whole report document, what every renderer takes."""

    tool_version: str
    fail_on: str | None
    symptom: SymptomDoc | None
    baseline: dict[str, Any] | None  # {path, source_host, captured_at}
    rules: list[RuleDoc]
    notes: list[str]
    chains: list[ChainDoc]
    history: dict[str, Any]  # {store, scan_id, previous_scan_id, new_hosts, gone_hosts, resolved, series}


class ChangeDoc(TypedDict):
    """One subject's change in release notes (compare/release.py), its fact paths listed."""

    subject: str
    change: str
    severity: str
    before: Any  # the fact's value on each side, as the snapshots hold it
    after: Any
    paths: list[str]


class ReleaseSectionDoc(TypedDict):
    area: str
    title: str
    severity: str  # its worst change's
    changes: list[ChangeDoc]


ReleaseUnknownDoc = TypedDict("ReleaseUnknownDoc", {"area": str, "from": Any, "to": Any})

# `from` is a keyword: the functional form
ReleaseNotesDoc = TypedDict("ReleaseNotesDoc", {
    "schema": str, "from": str, "to": str, "changes": int, "differences": int, "by_severity": dict[str, int],
    "sections": list[ReleaseSectionDoc], "unknown": list[ReleaseUnknownDoc], "not_compared": list[str]})
