"""`ami-auditor scan`: live hosts into the run driver, read top to bottom:

    ScanOptions → prepare → drive(LiveHosts) : collect ⇢ evaluate per host as it completes → finish
                → first-seen times → summary, report files, store → exit code → alerts

`prepare` loads and validates every input (rules, waivers, history, baseline, formats, --out, targets;
with --ec2, discovery) before any host is contacted: bad input is an InputError (exit 2), nothing written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..compare import stage as compare_stage
from ..compare.stage import ComparePlan
from ..context import Env
from ..evaluate.core import EvalPlan, Evaluation
from ..history import stage as history_stage
from ..history.stage import StorePlan
from ..judge import stage as judge_stage
from ..judge.stage import JudgePlan
from ..models import HostResult, HostSpec, Report
from ..notify import stage as notify_stage
from ..notify.stage import NotifyPlan
from ..options import ScanOptions, TargetOptions
from ..render import stage as render_stage
from ..render.stage import RenderPlan
from ..render.terminal import host_line, progress_printer
from ..targets.resolve import check_host_keys, resolve_specs
from .driver import Line, RunPlan, drive
from .live_hosts import iter_hosts


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

    def run_plan(self) -> RunPlan:
        return RunPlan(EvalPlan(self.judge, self.compare, self.fail_on), self.render, self.history, self.notify,
                       series=True)


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


@dataclass
class LiveHosts:
    """The scan's host source: every host reached at once (bounded), each evaluated as it completes."""

    plan: ScanPlan
    kind: str = "scan"
    _notes: list[str] = field(default_factory=list)
    _lines: dict[int, Line] = field(default_factory=dict)

    def collect(self, term: Env) -> Iterator[tuple[int, HostResult]]:
        """(input index, result, errors redacted) as each host completes."""
        t = self.plan.targets
        self._notes = list(self.plan.notes)
        return iter_hosts(list(self.plan.specs), parallel=t.parallel, binaries=t.binaries, deadline_s=t.deadline_s,
                          progress=progress_printer(term), notes=self._notes, exec_versions=t.exec_versions,
                          deep_cpu=t.deep_cpu)

    def feed(self, core: Evaluation, term: Env) -> None:
        """Each host into the core as it completes, its snapshot then dropped; its summary line kept unless
        nothing prints it (--quiet, where a fleet's lines would only be held)."""
        for index, result in self.collect(term):
            if not term.quiet:
                self._lines[index] = host_line(result)
            core.add(result, index)

    def notes(self) -> list[str]:
        return self._notes

    def check(self, report: Report) -> None:
        return None

    def lines(self, report: Report) -> Iterable[Line]:
        return [self._lines[i] for i in sorted(self._lines)]


def scan(opts: ScanOptions, env: Env) -> int:
    """The whole scan; returns its exit code."""
    plan = prepare(opts)
    return drive(LiveHosts(plan), plan.run_plan(), env).exit_code
