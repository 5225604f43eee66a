"""The evaluation core: host results in (any order, each with its input position), a Report out.

`add` judges a host as it arrives (the Judge caches results by the content each rule reads), puts it on
its configuration in the fleet index (normalized once per stable key), keeps its stub, findings and fleet
slice, and drops the snapshot. A worker process's core hands what it added to its parent as a
`WorkerBatch` (`hand_over`); the parent `merge`s batches in any order. `finish` runs the fleet rules,
waivers, chains, drift, comparison, symptom ranking and the exit code, hosts in input order.

A host name seen twice (two snapshot files of one host): the first (by arrival) is judged, the next is an
`error` host saying so — the run is incomplete (exit 3), never a crash, and no host's findings are
counted twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Protocol

from ..compare import stage as compare_stage
from ..compare.index import IndexBuilder, ViewMemo, ViewRef, host_attrs
from ..compare.normalize import NormalView
from ..compare.stage import ComparePlan
from ..contentkey import Shared
from ..exitcodes import Outcome, decide
from ..judge import stage as judge_stage
from ..judge.engine import Judge
from ..judge.fleet import FleetSlice
from ..judge.plain import FleetRead
from ..judge.stage import JudgePlan
from ..models import Finding, HostResult, HostSpec, Report, severity_rank
from ..snapshotdoc import Snapshot
from .interning import intern_slice, intern_stub
from .retained import fleet_cut, fleet_slice, stub

DUPLICATE = "duplicate host name: an earlier snapshot names the same host"


class HostHook(Protocol):
    """The run's per-host step before the judge (history: trend facts on the snapshot, its store row packed).

    `before_judge` may add facts and returns the host's row (None: nothing to record); `hold` is what the
    core keeps of an accepted host's row (a store row's bulk spooled to disk)."""

    def before_judge(self, snap: Snapshot) -> object | None: ...

    def hold(self, row: object) -> object: ...


@dataclass(frozen=True)
class EvalPlan:
    """What turns snapshots into a report: rules and waivers, compare options, --fail-on."""

    judge: JudgePlan
    compare: ComparePlan
    fail_on: str | None = "high"


@dataclass(slots=True)
class HostRecord:
    """All the core keeps of one host."""

    position: int
    host: HostResult  # its snapshot is a stub (retained.stub)
    findings: list[Finding]
    view: ViewRef | None = None
    attrs: dict[str, str] | None = None
    slice: FleetSlice | None = None
    fleet: tuple[FleetRead, ...] = ()  # what the host gives each fleet rule (Judge.fleet_reads)
    row: object | None = None  # what the host hook returned (a store row)
    source: str | None = None  # the file it was read from (names a duplicate); dropped once accepted


@dataclass
class WorkerBatch:
    """What a worker's core added since its last `hand_over`: records, and the views its parent has not seen."""

    records: list[HostRecord] = field(default_factory=list)
    views: dict[ViewRef, NormalView] = field(default_factory=dict)


class Evaluation:
    """One run's evaluation; `worker=True` keeps what it adds for `hand_over` instead of indexing it."""

    def __init__(self, plan: EvalPlan, judge: Judge | None = None, worker: bool = False,
                 hook: HostHook | None = None):
        self.plan = plan
        self.judge = judge or Judge(plan.judge.ruleset)
        self.hook = hook
        self._worker = worker
        self._cut = fleet_cut(self.judge)
        self._indexing = plan.compare.active
        keys = plan.compare.keys()  # labels and host facts to group by (fact paths are read from the views)
        self._keys = [k for k in keys if not k.startswith("facts.")]
        self._memo = ViewMemo()
        self._builder = IndexBuilder()
        self._shared = Shared()  # what hosts of one configuration keep is held once
        self._records: list[HostRecord] = []
        self._names: set[str] = set()  # the hosts judged so far
        # views that arrived on refused duplicates: a worker's memo sends each view once, so the next host
        # of that configuration brings only its number
        self._unadopted: dict[ViewRef, NormalView] = {}
        self._refused_rows: list[object] = []  # rows of refused duplicates (a store body may ride on one)
        self._batch = WorkerBatch()
        self._positions = count()
        self._finished = False

    def add(self, result: HostResult, position: int | None = None, source: str | None = None) -> None:
        """Judge and index one host; its snapshot is not kept. `source`: the file it was read from."""
        entry, view = self._evaluate(result, next(self._positions) if position is None else position)
        entry.source = source
        views = {entry.view: view} if view is not None and entry.view is not None else {}
        if self._worker:
            self._batch.records.append(entry)
            self._batch.views.update(views)
        else:
            self._accept(entry, views)

    def hand_over(self) -> WorkerBatch:
        """A worker's records since the last hand-over (its views sent once per process)."""
        batch, self._batch = self._batch, WorkerBatch()
        return batch

    def merge(self, batch: WorkerBatch) -> None:
        """A worker's batch, in the parent."""
        for entry in batch.records:
            self._accept(entry, batch.views)

    def _evaluate(self, result: HostResult, position: int) -> tuple[HostRecord, NormalView | None]:
        snap = result.whole
        if result.status != "ok" or snap is None:
            return HostRecord(position, result, []), None
        row = self.hook.before_judge(snap) if self.hook is not None else None
        findings = self.judge.judge(snap)
        ref, view = self._memo.ref(snap) if self._indexing else (None, None)
        attrs = host_attrs(snap, self._keys) if self._keys else None
        cut = fleet_slice(self._cut, snap)
        reads = self.judge.fleet_reads(snap) if cut is not None else ()
        return HostRecord(position, stub(result), findings, ref, attrs, cut, reads, row), view

    def _accept(self, entry: HostRecord, views: dict[ViewRef, NormalView]) -> None:
        name, ref = entry.host.name, entry.view
        if entry.host.status == "ok":
            if name in self._names:
                if entry.row is not None:
                    self._refused_rows.append(entry.row)
                if ref is not None and ref in views and not self._builder.known(ref):
                    self._unadopted[ref] = views[ref]
                entry = _duplicate(entry)
            else:
                self._names.add(name)
                self._hold(entry)
                entry.source = None
                if ref is not None:
                    if not self._builder.known(ref):
                        view = self._unadopted.pop(ref, None)
                        self._builder.adopt(ref, views[ref] if view is None else view)
                    self._builder.place(name, ref)
        self._records.append(entry)

    def _hold(self, entry: HostRecord) -> None:
        """How the core holds an accepted host: its row as the hook holds it (a store row spooled), and what
        it has in common with hosts of its configuration held once (evaluate/interning.py)."""
        if self.hook is not None and entry.row is not None:
            entry.row = self.hook.hold(entry.row)
        intern_stub(self._shared, entry.host)
        if entry.slice is not None:
            intern_slice(self._shared, entry.slice, entry.host)
        entry.attrs = self._shared.one(entry.attrs)

    def rows(self) -> Iterable[tuple[HostResult, object]]:
        """Each judged host's stub and the row its hook returned, in arrival order."""
        return ((e.host, e.row) for e in self._records if e.row is not None)

    def refused_rows(self) -> list[object]:
        """The rows of hosts refused as duplicates: not recorded, but the first copy of a stable body a
        worker packed may be among them."""
        return self._refused_rows

    def finish(self, generated_at: str, notes: Iterable[str] = ()) -> Report:
        """The report: hosts in input order, every section filled, its exit code set. Once only: it lets go
        of what only it reads (fleet slices and reads, views, group keys), so a fleet's run does not hold
        them through the report phase."""
        if self._finished:
            raise RuntimeError("Evaluation.finish() runs once")
        self._finished = True
        entries = sorted(self._records, key=lambda e: e.position)
        self._name_unread(entries)
        report = Report(hosts=[e.host for e in entries], generated_at=generated_at, fail_on=self.plan.fail_on,
                        notes=list(notes))
        findings = [f for e in entries for f in e.findings]
        findings += self.judge.fleet_findings([(e.slice, e.fleet) for e in entries if e.slice is not None])
        labels = {h.name: dict((h.snapshot or {}).get("labels") or h.spec.labels) for h in report.hosts}
        judge_stage.apply(self.plan.judge, report, findings, labels)
        if self._indexing:
            attrs = {e.host.name: e.attrs for e in entries if e.attrs is not None}
            order = [e.host.name for e in entries if e.view is not None and e.host.status == "ok"]
            compare_stage.apply(self.plan.compare, report, self._builder.index(attrs, order))
        report.exit_code = verdict(report)
        for e in entries:
            e.findings, e.view, e.attrs, e.slice, e.fleet = [], None, None, None, ()
        self._builder, self._shared, self._unadopted = IndexBuilder(), Shared(), {}
        return report

    def _name_unread(self, entries: list[HostRecord]) -> None:
        """A file that could not be read names its host by its stem, a guess: when a snapshot (or an earlier
        such file) names that host, the error host is named by its file instead, so a name in the report is
        one host (the store records a host by name) and the user sees which file failed. An unread file that
        collides with nothing keeps its stem: the host's history in the store goes on."""
        taken: set[str] = set()
        for e in entries:
            if e.host.status == "ok" or e.source is None:  # judged, a refused duplicate, or not from a file
                continue
            name, n = e.host.name, 1
            while name in self._names or name in taken:
                n += 1
                name = e.source if n == 2 else f"{e.source} ({n - 1})"
            if name != e.host.name:
                e.host.spec = replace(e.host.spec, name=name)
            taken.add(name)


def _duplicate(entry: HostRecord) -> HostRecord:
    """The error host of a refused duplicate, naming its file: its target is the snapshot's own (ssh://…)."""
    spec = entry.host.spec
    why = DUPLICATE if entry.source is None else f"{DUPLICATE} (this one is {entry.source})"
    host = HostResult(HostSpec(spec.name, spec.target, dict(spec.labels)), "error", why)
    return HostRecord(entry.position, host, [])


def failing(report: Report) -> bool:
    """Any unwaived finding, or drift, at or above --fail-on."""
    if report.fail_on is None:
        return False
    bar = severity_rank(report.fail_on)
    if any(not f.waived and severity_rank(f.severity) >= bar for f in report.findings):
        return True
    return any(severity_rank(d.severity) >= bar for d in report.drift)


def verdict(report: Report) -> int:
    """The report's exit code: findings/drift at or above --fail-on, hosts not reached (exitcodes.decide)."""
    return decide(Outcome(findings=failing(report), incomplete=not all(h.complete for h in report.hosts)))


def evaluate(plan: EvalPlan, results: Iterable[HostResult], generated_at: str, notes: Iterable[str] = (),
             hook: HostHook | None = None) -> Report:
    """Host results held by the caller (saved snapshots, a test's fleet) through one core, in their order."""
    core = Evaluation(plan, hook=hook)
    for result in results:
        core.add(result)
    return core.finish(generated_at, notes)
