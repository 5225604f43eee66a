"""`ami-auditor scan` as one typed pipeline, read top to bottom in `scan()`:

    ScanOptions → prepare → collect → judge → trends → compare → verdict → render → record

`prepare` loads and validates every input (rules, waivers, history, baseline, formats, --out,
targets; with --ec2, discovery) BEFORE any host is contacted: bad input is an InputError (exit 2)
and nothing is written. Each later step is a plain function of the plan, the report and the
snapshots; the rooms' own modules (judge/stage.py, history/stage.py, compare/stage.py,
render/stage.py) do the work. No argparse here: commands/scan.py builds the ScanOptions.

Hook for history/trends: `trends()` is where the history room publishes what it derives from
earlier scans (today: the dying-memcg growth finding). Trend *facts* that rules judge must be added
to the snapshots before `judge()` reads them — derive them in `prepare`'s HistoryPlan (it already
holds the previous scan) or in a step placed before `judge()` in `scan()`.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import exitcodes
from .app import collect_hosts, redact_errors
from .collect.snapshot import now_iso
from .compare import stage as compare_stage
from .compare.stage import ComparePlan
from .context import Env
from .history import stage as history_stage
from .history.stage import GROWTH_RULE, HistoryPlan
from .judge import stage as judge_stage
from .judge.stage import JudgePlan
from .models import HostResult, HostSpec, Report, severity_rank
from .options import ScanOptions, TargetOptions
from .render import stage as render_stage
from .render.stage import RenderPlan
from .render.terminal import one_line, progress_printer
from .targets.resolve import check_host_keys, resolve_specs


@dataclass(frozen=True)
class ScanPlan:
    """Everything a scan needs, validated; building it contacts no host (EC2 discovery may call AWS)."""

    targets: TargetOptions
    specs: tuple[HostSpec, ...]
    notes: tuple[str, ...]
    fail_on: str
    judge: JudgePlan
    history: HistoryPlan
    compare: ComparePlan
    render: RenderPlan


def prepare(opts: ScanOptions) -> ScanPlan:
    """Load and validate every input, in this order, before any host is contacted (InputError: exit 2)."""
    judge_plan = judge_stage.prepare(opts.judge)
    history_plan = history_stage.prepare(opts.history)
    known_rules = frozenset(judge_plan.ruleset.ids()) | {GROWTH_RULE}  # --symptom RULE must be one of these
    compare_plan = compare_stage.prepare(opts.compare, known_rules)
    render_plan = render_stage.prepare(opts.render)
    notes: list[str] = []
    specs = resolve_specs(opts.targets, notes)  # with --ec2, discovery (an API call) gives the labels
    check_host_keys([(option, key) for option, key in (
        ("--group-by", compare_plan.group_by),
        ("--symptom", compare_plan.symptom.key if compare_plan.symptom else None)) if key], specs)
    return ScanPlan(opts.targets, tuple(specs), tuple(notes), opts.fail_on,
                    judge_plan, history_plan, compare_plan, render_plan)


def collect(plan: ScanPlan, env: Env, notes: list[str]) -> list[HostResult]:
    """Reach every host (bounded concurrency) and collect its snapshot; errors redacted."""
    t = plan.targets
    results = collect_hosts(list(plan.specs), parallel=t.parallel, binaries=t.binaries, deadline_s=t.deadline_s,
                            progress=progress_printer(env), notes=notes, exec_versions=t.exec_versions,
                            deep_cpu=t.deep_cpu)
    return redact_errors(results)


def judge(plan: JudgePlan, report: Report, snapshots: list[dict]) -> None:
    """Rules over every snapshot; waivers applied. Only the judge makes findings from rules."""
    judge_stage.apply(plan, report, snapshots)


def trends(plan: HistoryPlan, report: Report, snapshots: list[dict]) -> None:
    """What history derives from the previous scan (see the module docstring for the trend-facts hook)."""
    history_stage.apply(plan, report, snapshots)


def compare(plan: ComparePlan, report: Report, snapshots: list[dict]) -> None:
    """Baseline drift, group comparison and symptom ranking (symptom ranking reads the findings)."""
    compare_stage.apply(plan, report, snapshots)


def failing(report: Report) -> bool:
    """Any unwaived finding, or drift, at or above --fail-on."""
    if report.fail_on is None:
        return False
    bar = severity_rank(report.fail_on)
    if any(not f.waived and severity_rank(f.severity) >= bar for f in report.findings):
        return True
    return any(severity_rank(d.severity) >= bar for d in report.drift)


def verdict(report: Report) -> int:
    """The exit code: findings/drift at or above --fail-on, hosts not reached (exitcodes.combine)."""
    return exitcodes.combine(failing(report), not all(h.complete for h in report.hosts))


def render(plan: RenderPlan, report: Report) -> None:
    """Write report.<ext> per format to --out (all rendered first; a renderer failing writes nothing)."""
    render_stage.write(plan, report)


def scan(opts: ScanOptions, env: Env) -> int:
    """The whole scan; returns its exit code."""
    plan = prepare(opts)
    notes = list(plan.notes)
    results = collect(plan, env, notes)
    report = Report(hosts=results, generated_at=now_iso(), fail_on=plan.fail_on, notes=notes)
    snapshots = [r.snapshot for r in results if r.snapshot is not None]
    judge(plan.judge, report, snapshots)
    trends(plan.history, report, snapshots)
    compare(plan.compare, report, snapshots)
    report.exit_code = verdict(report)
    for result in results:
        env.out(one_line(result))
    render(plan.render, report)
    saved = history_stage.finish(plan.history, report)  # record: saved once the exit code is known
    render_stage.summarize(report, env)
    if saved:
        env.out(f"saved to history: {saved}")
    return report.exit_code
