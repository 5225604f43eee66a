"""One run, whatever its hosts come from: a host source feeds the evaluation core, then the report is
written, the run recorded, and its exit code decided once (exitcodes.decide).

    source.feed(core) → core.finish → source.check → history.annotate → summary, files, store → exit code

`scan` (live hosts), `analyze` (snapshot files) and `rules check --snapshot` (snapshots a command holds)
are sources; the driver never reaches a host itself (.importlinter). History is entered here only, through
history.stage.RunHistory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..collect.snapshot import now_iso
from ..context import Env
from ..errors import OutputError
from ..evaluate.core import EvalPlan, Evaluation, failing
from ..evaluate.gcpolicy import fleet_gc
from ..exitcodes import Outcome, decide
from ..history.stage import RunHistory, StorePlan
from ..models import HostResult, Report
from ..notify import stage as notify_stage
from ..notify.stage import NotifyPlan
from ..render import stage as render_stage
from ..render.stage import RenderPlan, SummaryLines
from ..reportdoc import report_document
from ..reporttypes import ReportDoc

Line = list[tuple[str, str | None]]  # a host's summary line in styled pieces (render/terminal.py)


class HostSource(Protocol):
    """Where a run's hosts come from. `kind` names the run in the store (scan, analyze)."""

    kind: str

    def feed(self, core: Evaluation, term: Env) -> None:
        """Every host into `core` (core.add, with its input position), each dropped once added."""
        ...

    def notes(self) -> list[str]:
        """Run-wide remarks, complete once `feed` has returned."""
        ...

    def check(self, report: Report) -> None:
        """Input that could only be checked once the hosts were read (InputError: exit 2)."""
        ...

    def lines(self, report: Report) -> Iterable[Line]:
        """The host lines the summary prints after the report is made."""
        ...


@dataclass(frozen=True)
class RunPlan:
    """What the driver does with the hosts a source gives: evaluate, write, record, alert."""

    evaluate: EvalPlan
    render: RenderPlan
    history: StorePlan = StorePlan(None)
    notify: NotifyPlan | None = None  # alerts on what is new (scan); they read the report document
    series: bool = False  # each host's earlier numbers in the report, for its trend pictures (scan)


@dataclass
class RunResult:
    """A finished run: its report, its document (read from the report: neither changes afterwards) and its
    exit code."""

    report: Report
    doc: ReportDoc | None
    exit_code: int


def drive(source: HostSource, plan: RunPlan, env: Env) -> RunResult:
    """The whole run; an OutputError (reports not written) is raised after the run is recorded (exit 3)."""
    with fleet_gc():  # a run holding a fleet's results: collections skip them (evaluate/gcpolicy.py)
        term = render_stage.terminal(plan.render, env)  # the summary: stdout, stderr or nowhere (--quiet)
        history = RunHistory.open(plan.history, now_iso(), source.kind)
        try:
            core = Evaluation(plan.evaluate, hook=history.hook())
            source.feed(core, term)
            report = core.finish(now_iso(), source.notes())  # fleet rules, waivers, chains, drift, comparison
            findings, unreached = failing(report), not all(h.complete for h in report.hosts)
            source.check(report)
            history.annotate(report, series=plan.series)
            for line in source.lines(report):
                term.out_styled(line)
            summary = render_stage.summarize(report) if not term.quiet else []
            doc, written, unsaved = _write(core, report, history, plan, env)
        except BaseException:
            history.abandon()  # a crash or Ctrl-C: this run is marked interrupted, earlier ones untouched
            raise
        finally:
            history.close()
        code = decide(Outcome(not_saved=unsaved is not None, findings=findings,
                              incomplete=unreached or history.not_recorded is not None))
        _conclude(summary, code, written, history, env, term)
        if plan.notify is not None and doc is not None:
            notify_stage.apply(plan.notify, doc, term)  # last: never changes the exit code or what was written
        if unsaved is not None:
            raise unsaved  # exit 3 (cli.py): the reports were not saved, the previous set unchanged
        return RunResult(report, doc, code)


def _write(core: Evaluation, report: Report, history: RunHistory, plan: RunPlan,
           env: Env) -> tuple[ReportDoc | None, list[Path], OutputError | None]:
    """The document made once (the files, the store and the alerts read the same one), the reports written,
    then the run recorded: a report that cannot be written still leaves the results in the store, and a
    store that refuses them still leaves the reports."""
    need_doc = plan.notify is not None or render_stage.writes(plan.render) or history.recording
    if not need_doc:
        return None, [], None
    doc = report_document(report)
    written: list[Path] = []
    unsaved: OutputError | None = None
    try:
        written = render_stage.write(plan.render, doc, env)
    except OutputError as exc:
        unsaved = exc
    history.record(doc, core.rows(), core.refused_rows(), now_iso())
    return doc, written, unsaved


def _conclude(summary: SummaryLines, code: int, written: list[Path], history: RunHistory, env: Env,
              term: Env) -> None:
    """Why the store did not take the run, the summary and exit code, the files written, where it was recorded."""
    if history.not_recorded:
        env.err(f"ami-auditor: error: {history.not_recorded}")
    render_stage.print_summary(summary, code, term)
    for path in written:
        term.out(f"wrote {path}")
    if where := history.where():
        term.out(where)


@dataclass
class HeldHosts:
    """Hosts a command already holds (snapshots it loaded), in their order; nothing printed per host."""

    hosts: list[HostResult]
    kind: str = "check"

    def feed(self, core: Evaluation, term: Env) -> None:
        for host in self.hosts:
            core.add(host)

    def notes(self) -> list[str]:
        return []

    def check(self, report: Report) -> None:
        return None

    def lines(self, report: Report) -> Iterable[Line]:
        return ()
