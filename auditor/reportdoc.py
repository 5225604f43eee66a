"""The report document (`ami-auditor/report/1`, typed in reporttypes.py): the Report as JSON-shaped data,
validated by its schema.

Renderers take this document, so a saved report re-renders exactly like a fresh one. A fresh report's
hosts, findings and drift are made row by row as they are read (Rows), so writing a fleet's report holds
a slice of rows at a time, never the whole document.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from functools import lru_cache
from importlib import resources
from typing import Any, Generic, TypeVar, cast, overload

from . import REPORT_SCHEMA, __version__
from .errors import InputError
from .facttypes import SystemdUnitsRow
from .jsonload import json_pointer, load_json_file
from .models import SEVERITIES, DriftItem, Finding, HostResult, Report
from .notread import not_read_doc
from .reporttypes import (
    ChainDoc,
    ComparisonDoc,
    CpuDoc,
    DriftDoc,
    FactsSummaryDoc,
    FindingDoc,
    HostDoc,
    HotThreadDoc,
    NotReadDoc,
    ReportDoc,
    RuleDoc,
    SummaryDoc,
    SymptomDoc,
)
from .schemacheck import FastCheck
from .snapshotdoc import Facts, Snapshot

T = TypeVar("T")
R = TypeVar("R")


def _host(result: HostResult) -> HostDoc:
    snap = result.snapshot or {}
    return {  # the host's own dicts, shared, not copied: documents are read, never changed
        "name": result.name,
        "target": result.spec.target,
        "labels": snap.get("labels") or result.spec.labels,
        "status": result.status,
        "error": result.error,
        "duration_s": round(result.duration_s, 3),
        "collector_errors": snap.get("errors") or {},
        "not_applicable": sorted(snap.get("not_applicable") or ()),
        "complete": result.complete,
        "failed_areas": list((snap.get("probe") or {}).get("failed_areas") or []),
        "not_read": cast(dict[str, NotReadDoc], not_read_doc(snap.get("errors") or {}, (snap.get("probe") or {})
                                                             .get("failed_areas"), snap.get("not_applicable"))),
        "facts_summary": result.summary or (facts_summary(result.whole) if result.whole else None),
    }


def facts_summary(snap: Snapshot) -> FactsSummaryDoc:
    """A few headline facts per host for renderers (they never see snapshots)."""
    facts = snap.get("facts") or {}
    host = snap.get("host") or {}
    memory = (facts.get("cgroups") or {}).get("memory") or {}
    systemd = facts.get("systemd")
    units = [u for u in (systemd or {}).get("units") or [] if isinstance(u, dict)]
    return {
        "hostname": host.get("hostname"),
        "instance_id": host.get("instance_id"),
        "ami_id": host.get("ami_id"),
        "az": host.get("az"),
        "os": (facts.get("os") or {}).get("pretty_name"),
        "kernel": (facts.get("kernel") or {}).get("release"),
        "dying_memcgs": memory.get("dying"),
        "enabled_units": None if systemd is None else len(systemd.get("enabled_units") or []),  # None: not read
        "restarts": _restarts(units),
        "unit_restarts": _unit_restarts(units),
        "cpu": _cpu(facts),
    }


def _restarts(units: list[SystemdUnitsRow]) -> int | None:
    """Unit restarts this boot, summed over the host's units (None when systemd gave no units)."""
    counts = [n for u in units if isinstance(n := u.get("restarts"), int)]
    return sum(counts) if units else None


UNIT_RESTARTS_MAX = 20


def _unit_restarts(units: list[SystemdUnitsRow]) -> dict[str, int]:
    """Restarts this boot of the units that restarted (the most first, at most 20): the history store keeps
    this summary per scan, so `history report` draws restarts per unit without inflating snapshots."""
    counts = [(name, n) for u in units if isinstance(name := u.get("name"), str)
              and type(n := u.get("restarts")) is int and n > 0]
    return dict(sorted(counts, key=lambda nc: (-nc[1], nc[0]))[:UNIT_RESTARTS_MAX])


def _cpu(facts: Facts) -> CpuDoc | None:
    """The CPU window compactly, for the report's per-core strip: cores as [cpu, user %, system %], the hot
    core and its busiest thread (the one with most system ticks that last ran there)."""
    cpu = facts.get("cpu") or {}
    cores: list[list[float | None]] = [[c["cpu"], c.get("user_pct") or 0, c.get("system_pct") or 0]
                                       for c in cpu.get("cores") or []
                                       if isinstance(c, dict) and isinstance(c.get("cpu"), int)]
    if not cores:
        return None
    hot = cpu.get("max_core")
    threads = [t for t in cpu.get("threads") or [] if isinstance(t, dict) and t.get("cpu") == hot]
    busiest = max(threads, key=lambda t: (t.get("system_ticks") or 0, t.get("ticks") or 0), default=None)
    thread = {k: busiest.get(k) for k in ("pid", "tid", "comm", "ticks", "system_ticks")} if busiest else None
    return {"count": cpu.get("count"), "window_s": cpu.get("window_s"), "cores": cores, "max_core": hot,
            "max_core_system_pct": cpu.get("max_core_system_pct"), "hot_thread": cast(HotThreadDoc | None, thread)}


def summary(report: Report) -> SummaryDoc:
    by_status = Counter(h.status for h in report.hosts)
    active = [f for f in report.findings if not f.waived]
    by_severity = {s: sum(1 for f in active if f.severity == s) for s in SEVERITIES}
    return {
        "hosts": len(report.hosts),
        "by_status": dict(sorted(by_status.items())),
        "findings_by_severity": by_severity,
        "findings": len(active),
        "waived": sum(1 for f in report.findings if f.waived),
        "drift": len(report.drift),
        "exit_code": report.exit_code,
    }


class Rows(Sequence[R], Generic[T, R]):
    """A report section made row by row as it is read, from the finished report's own objects: a writer takes
    a slice at a time, so the rows of a 100,000-host report are never all held, and the report is never
    changed to make room for them. Read twice, the rows are made twice (equal, not the same objects)."""

    __slots__ = ("_items", "_row")

    def __init__(self, items: Sequence[T], row: Callable[[T], R]):
        self._items = items
        self._row = row

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> R: ...

    @overload
    def __getitem__(self, index: slice) -> list[R]: ...

    def __getitem__(self, index: int | slice) -> R | list[R]:
        if isinstance(index, slice):
            return [self._row(item) for item in self._items[index]]
        return self._row(self._items[index])

    def __iter__(self) -> Iterator[R]:
        return map(self._row, self._items)

    def __repr__(self) -> str:
        return f"Rows({len(self)} rows)"


def report_document(report: Report) -> ReportDoc:
    """The report's document: the small sections made now, hosts, findings and drift made as they are read
    (Rows). Hosts carry status and headline facts, never whole snapshots. The report must not change
    afterwards: the document reads it."""
    doc: ReportDoc = {
        "schema": REPORT_SCHEMA,
        "tool_version": __version__,
        "generated_at": report.generated_at,
        "fail_on": report.fail_on,
        "summary": summary(report),
        "hosts": Rows(report.hosts, _host),
        "findings": Rows(report.findings, _finding_rows()),
        "drift": Rows(report.drift, _drift),
        "comparison": cast(ComparisonDoc | None, report.comparison),
        "symptom": cast(SymptomDoc | None, report.symptom),
        "baseline": report.baseline,
        "rules": cast(list[RuleDoc], report.rules),
        "notes": report.notes,
        "chains": cast(list[ChainDoc], report.chains),
    }
    if report.history is not None:
        doc["history"] = report.history
    return doc


def whole(doc: ReportDoc) -> ReportDoc:
    """The document with every section a list: what a reader that keeps it (a test, json.dumps) needs."""
    out = dict(doc)
    for key, value in doc.items():
        if isinstance(value, Rows):
            out[key] = list(value)
    return cast(ReportDoc, out)


def report_to_dict(report: Report) -> ReportDoc:
    """The report's document held whole (report_document, every row made once and kept)."""
    return whole(report_document(report))


_FINDING_FIELDS = tuple(f.name for f in fields(Finding) if f.name not in ("link", "first_seen"))
_DRIFT_FIELDS = tuple(f.name for f in fields(DriftItem) if f.name != "first_seen")


def _finding_rows() -> Callable[[Finding], FindingDoc]:
    """A finding as JSON; its chain `link` text is told in `chains`, not repeated here; `first_seen` only when
    a history store gave one. Its evidence is shared, not copied (a fleet's hosts share one evidence object
    per distinct result: judge/engine.py), and a rule's tags list is made once and shared by its rows:
    renderers read documents, never change them."""
    tags: dict[tuple[str, ...], list[str]] = {}

    def row(finding: Finding) -> FindingDoc:
        out = {name: getattr(finding, name) for name in _FINDING_FIELDS}
        key = tuple(finding.tags)
        out["tags"] = tags.get(key) or tags.setdefault(key, list(key))
        if finding.first_seen is not None:
            out["first_seen"] = finding.first_seen
        return cast(FindingDoc, out)

    return row


def _drift(item: DriftItem) -> DriftDoc:
    """A drift row; its expected and actual values are shared, not deep-copied (hosts of one configuration
    share them: compare/drift.py); `first_seen` only when a history store gave one."""
    out = {name: getattr(item, name) for name in _DRIFT_FIELDS}
    if item.first_seen is not None:
        out["first_seen"] = item.first_seen
    return cast(DriftDoc, out)


@lru_cache(maxsize=1)
def report_json_schema() -> dict[str, Any]:
    text = resources.files("auditor.schemas").joinpath("report.schema.json").read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


@lru_cache(maxsize=1)
def _fast_check() -> FastCheck:
    return FastCheck(report_json_schema())


_CHUNKED = ("hosts", "findings", "drift", "chains")  # the arrays that grow with the fleet
CHUNK = 500  # items per fast check: bounds the rows made and the copy jsonschema-rs makes of them


def _pieces(doc: ReportDoc) -> Iterator[dict[str, Any]]:
    """The document as several valid-or-not-alike documents, made one at a time as they are checked: the
    document with its big arrays (and every section made as it is read) emptied, then a skeleton (the
    top-level fields the schema requires, the big arrays empty) holding one chunk of one array at a time.
    The schema checks array items one by one, never across items, so the document is valid exactly when
    every piece is."""
    arrays = {k: v for k in _CHUNKED if isinstance(v := doc.get(k), Rows) or isinstance(v, list) and len(v) > CHUNK}
    empty: dict[str, Any] = {k: [] for k in arrays}
    base = {**doc, **empty}
    yield base
    skeleton = {k: base.get(k) for k in _REQUIRED} | empty
    for key, items in arrays.items():
        for i in range(0, len(items), CHUNK):
            yield {**skeleton, key: list(items[i:i + CHUNK])}


_REQUIRED = ("schema", "generated_at", "summary", "hosts", "findings", "drift", "comparison")


def validate_report(doc: ReportDoc, path: str = "<report>", as_json: bool = False) -> None:
    """Raise InputError naming the first schema violation (jsonschema-rs first, in chunks for a big fleet;
    jsonschema for the message: auditor/schemacheck.py). `as_json`: `doc` is judged as JSON text, where a
    tuple is an array: it was parsed from JSON, or is about to be written as JSON (the render step), so
    it is not walked for tuples (at 100,000 hosts that walk took longer than writing the report)."""
    check = _fast_check()
    if all(check.valid(piece, as_json) for piece in _pieces(doc)):
        return
    import jsonschema  # when a report is validated, not at start-up

    whole_doc: Any = whole(doc)  # the message's reader: every section a list
    if as_json:  # the message names what a reader of the JSON would see wrong, never a tuple
        whole_doc = json.loads(json.dumps(whole_doc, default=str))
    try:
        jsonschema.validate(whole_doc, report_json_schema())
    except jsonschema.ValidationError as exc:
        where = json_pointer(exc.absolute_path) or "the top level"
        raise InputError(f"not a valid {REPORT_SCHEMA} document at JSON pointer {where}: {exc.message}",
                         path) from None


def load_report(path: str) -> ReportDoc:
    """Read a saved report JSON (for `ami-auditor report`), validated against its schema."""
    doc = cast(ReportDoc, load_json_file(path))
    validate_report(doc, path, as_json=True)
    return doc
