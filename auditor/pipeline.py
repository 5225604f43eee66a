"""`ami-auditor scan` as one typed pipeline, read top to bottom in `scan()`:

    ScanOptions → prepare → begin → collect ⇢ evaluate (per host as it completes: trends, judge, index)
                → finish (fleet rules, waivers, chains, drift, comparison, symptom, verdict) → since
                → render → record → notify

`prepare` loads and validates every input (rules, waivers, history, baseline, formats, --out,
targets; with --ec2, discovery) BEFORE any host is contacted: bad input is an InputError (exit 2)
and nothing is written. Hosts stream: each snapshot goes through the evaluation core
(auditor/evaluate/, the one `analyze`, `rules check --snapshot` and `diff` use) as its host completes and
is then dropped, so memory grows with distinct configurations, not with hosts. The rooms' own modules
(judge/stage.py, history/stage.py, compare/stage.py, render/stage.py) do the work. No argparse here:
commands/scan.py builds the ScanOptions.

History (auditor/history/): `begin` commits a `running` row in the store before the first host is
contacted (a killed scan stays visible, marked interrupted); the feed publishes `facts.trends` derived
from each host's previous stored snapshot BEFORE it is judged (only the judge decides: rules/trends.yaml)
and packs its store row; `since` adds first-seen times and new/gone hosts; `record` writes the whole scan
in one transaction once its exit code is known, also when the reports could not be written (a full disk:
exit 3 after recording, the previous report set unchanged); `notify` sends what is new last and never
changes the exit code.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from . import exitcodes
from .app import iter_hosts
from .collect.snapshot import now_iso
from .compare import stage as compare_stage
from .compare.stage import ComparePlan
from .context import Env
from .errors import OutputError
from .evaluate.core import EvalPlan, Evaluation
from .evaluate.gcpolicy import fleet_gc
from .history import stage as history_stage
from .history.stage import Session, StorePlan
from .judge import stage as judge_stage
from .judge.stage import JudgePlan
from .models import HostResult, HostSpec, Report
from .notify import stage as notify_stage
from .notify.stage import NotifyPlan
from .options import ScanOptions, TargetOptions
from .render import stage as render_stage
from .render.stage import RenderPlan
from .render.terminal import host_line, progress_printer
from .reportdoc import report_document
from .reporttypes import ReportDoc
from .targets.resolve import check_host_keys, resolve_specs

Line = list[tuple[str, str | None]]  # a host's summary line in styled pieces (render/terminal.py)


@dataclass(frozen=True)
class ScanPlan:
    """Everything a scan needs, validated; building it contacts no host (EC2 discovery may call AWS)."""

    targets: TargetOptions
    specs: tuple[HostSpec, ...]
    notes: tuple[str, ...]
    fail_on: str
    judge: JudgePlan
    history: StorePlan
    compare: ComparePlan
    render: RenderPlan
    notify: NotifyPlan


def prepare(opts: ScanOptions) -> ScanPlan:
    """Load and validate every input, in this order, before any host is contacted (InputError: exit 2)."""
    judge_plan = judge_stage.prepare(opts.judge)
    history_plan = history_stage.prepare(opts.history)
    known_rules = frozenset(judge_plan.ruleset.ids())  # --symptom RULE must be one of these
    compare_plan = compare_stage.prepare(opts.compare, known_rules)
    render_plan = render_stage.prepare(opts.render)
    notify_plan = notify_stage.prepare(opts.notify, store=history_plan.path is not None)
    notes: list[str] = []
    specs = resolve_specs(opts.targets, notes)  # with --ec2, discovery (an API call) gives the labels
    check_host_keys(compare_plan.options(), specs)
    return ScanPlan(opts.targets, tuple(specs), tuple(notes), opts.fail_on,
                    judge_plan, history_plan, compare_plan, render_plan, notify_plan)


def collect(plan: ScanPlan, env: Env, notes: list[str]) -> Iterator[tuple[int, HostResult]]:
    """Reach every host (bounded concurrency): (input index, result, errors redacted) as each completes."""
    t = plan.targets
    return iter_hosts(list(plan.specs), parallel=t.parallel, binaries=t.binaries, deadline_s=t.deadline_s,
                      progress=progress_printer(env), notes=notes, exec_versions=t.exec_versions,
                      deep_cpu=t.deep_cpu)


def evaluate(core: Evaluation, results: Iterator[tuple[int, HostResult]], lines_wanted: bool = True) -> list[Line]:
    """Each host into the core as it completes (the history feed first adds its trend facts and packs its
    store row), its snapshot then dropped; returns the hosts' summary lines in input order (none when
    nothing prints them: --quiet, where a fleet's lines would only be held)."""
    lines: dict[int, Line] = {}
    for index, result in results:
        if lines_wanted:
            lines[index] = host_line(result)
        core.add(result, index)
    return [lines[i] for i in sorted(lines)]


@dataclass
class Saved:
    """What the end of a run kept: its document, the summary told, and what could not be kept."""

    doc: ReportDoc | None  # None when nothing reads it (no report file, no store)
    told: render_stage.Told
    unsaved: OutputError | None  # the reports could not be written (a full or read-only disk)
    not_recorded: str | None  # why the store did not take the run (locked, refused, never opened)
    written: tuple[Path, ...] = ()  # the report files written (--out), each told as `wrote PATH`


def save(core: Evaluation, report: Report, session: Session | None, plan: RenderPlan, env: Env, term: Env,
         not_recorded: str | None, need_doc: bool = True) -> Saved:
    """The summary told, the document made once (the files, the store and the alerts read the same one),
    the reports written, then the run recorded: a report that cannot be written still leaves the results
    in the store, and a store that refuses them still leaves the reports (scan and analyze alike)."""
    told = render_stage.tell(report) if not term.quiet else []
    doc = report_document(report) if need_doc or render_stage.writes(plan) or session is not None else None
    unsaved: OutputError | None = None
    written: list[Path] = []
    if doc is not None:
        try:
            written = render_stage.write(plan, doc, env)
        except OutputError as exc:
            unsaved = exc
        if session is not None:
            rows = history_stage.pending(session, core.extras(), core.spare())
            not_recorded = history_stage.finish(session, doc, rows, now_iso())
    return Saved(doc, told, unsaved, not_recorded, tuple(written))


def conclude(saved: Saved, report: Report, session: Session | None, env: Env, term: Env) -> int:
    """The exit code once the store has answered (incomplete unless findings fail when it did not take
    the run), the summary, and where the run was recorded."""
    if saved.not_recorded:
        env.err(f"ami-auditor: error: {saved.not_recorded}")
        report.exit_code = exitcodes.combine(report.exit_code == exitcodes.FINDINGS, True)
    render_stage.show(saved.told, report.exit_code, term)
    for path in saved.written:
        term.out(f"wrote {path}")
    if session is not None and not saved.not_recorded:
        term.out(f"recorded as scan {session.scan_id} in {session.path}")
    return report.exit_code


def scan(opts: ScanOptions, env: Env) -> int:
    """The whole scan; returns its exit code."""
    plan = prepare(opts)
    with fleet_gc():  # a run holding a fleet's results: collections skip them (evaluate/gcpolicy.py)
        term = render_stage.terminal(plan.render, env)  # the summary: stdout, stderr or nowhere (--quiet)
        session, not_recorded = history_stage.begin(plan.history, now_iso())  # a killed scan stays visible
        try:
            notes = list(plan.notes)
            feed = history_stage.feed(session)
            core = Evaluation(EvalPlan(plan.judge, plan.compare, plan.fail_on), sidecar=feed, keep=feed.keep)
            lines = evaluate(core, collect(plan, term, notes), lines_wanted=not term.quiet)
            report = core.finish(now_iso(), notes)  # fleet rules, waivers, chains, drift, comparison, exit code
            history_stage.add_since(session, report)  # first-seen times; new, gone and resolved hosts
            history_stage.add_series(session, report)  # each host's earlier numbers, for the trend pictures
            for line in lines:
                term.out_styled(line)
            saved = save(core, report, session, plan.render, env, term, not_recorded)
        except BaseException:
            history_stage.abandon(session)  # a crash or Ctrl-C: this scan is marked, earlier ones untouched
            raise
        finally:
            history_stage.close(session)
        code = conclude(saved, report, session, env, term)
        assert saved.doc is not None  # need_doc: the alerts read it
        notify_stage.apply(plan.notify, saved.doc, term)  # last: never changes the exit code or what was written
        if saved.unsaved is not None:
            raise saved.unsaved  # exit 3: the reports were not saved (the previous set is unchanged)
        return code
