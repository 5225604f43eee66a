"""`ami-auditor analyze DIR…`: judge, compare and report saved snapshots without contacting any host —
streamed, on every core, so a fleet of 100,000 hosts fits in one machine's memory.

The snapshot files (from `collect -o DIR`, or any tool that writes `ami-auditor/snapshot/1` documents)
go through the evaluation core (auditor/evaluate/) as `scan`'s hosts do: read in file-name order in
batches on worker processes, each host judged and indexed as it is read, only its stub kept; then the
fleet rules, waivers, drift, comparison, symptom, the report and the exit code. A file that cannot be read
or is not a valid snapshot is that host's status (`error`, naming the file and line), never the end of
the run: exit 3.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .collect.snapshot import now_iso
from .compare import stage as compare_stage
from .compare.stage import ComparePlan
from .context import Env
from .errors import InputError
from .evaluate.core import EvalPlan, Evaluation
from .evaluate.files import evaluate_files
from .evaluate.gcpolicy import fleet_gc
from .history import stage as history_stage
from .history.stage import StorePlan
from .judge import stage as judge_stage
from .judge.stage import JudgePlan
from .options import AnalyzeOptions
from .pipeline import conclude, save
from .render import stage as render_stage
from .render.stage import RenderPlan
from .render.terminal import host_line
from .targets.resolve import check_host_keys

MAX_JOBS = 64


@dataclass(frozen=True)
class AnalyzePlan:
    """Everything an analysis needs, validated before any snapshot file is read."""

    files: tuple[str, ...]
    jobs: int
    fail_on: str
    judge: JudgePlan
    compare: ComparePlan
    render: RenderPlan
    history: StorePlan



def _is_dir(entry: os.DirEntry[str]) -> bool:
    """A link loop or an unreadable link target is not a directory: it is read as a file and refused there,
    naming it (that host's error), never the end of the run."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def snapshot_files(dirs: tuple[str, ...]) -> list[str]:
    """Every `*.json` in the directories, in name order (InputError when a directory cannot be listed)."""
    if not dirs:
        raise InputError("give at least one snapshot directory (from `ami-auditor collect -o DIR`)")
    files: list[str] = []
    for d in dirs:
        p = Path(d)
        if not p.is_dir():
            raise InputError("not a directory of snapshot files", d)
        try:
            # a *.json that is not a regular file (a FIFO, a link to a device) is read as one and refused
            names = sorted(e.name for e in os.scandir(p) if e.name.endswith(".json") and not _is_dir(e))
        except OSError as exc:
            raise InputError(f"cannot list: {exc.strerror}", d) from None
        files.extend(str(p / n) for n in names)
    if not files:
        raise InputError("no *.json snapshot files in " + ", ".join(dirs))
    if twice := _given_twice(files):
        shown = ", ".join(twice[:5]) + (f", … {len(twice) - 5} more" if len(twice) > 5 else "")
        raise InputError(f"{len(twice)} snapshot file{'s' if len(twice) != 1 else ''} given twice (the same DIR "
                         f"twice, or one linked into another): {shown}; give each DIR once")
    return files


def _given_twice(files: list[str]) -> list[str]:
    """The files that are the same file as one listed before them (same device and inode; else same path)."""
    seen: set[object] = set()
    out = []
    for name in files:
        try:
            st = os.stat(name)
            identity: object = (st.st_dev, st.st_ino)
        except OSError:  # unreadable: refused by name when read
            identity = os.path.abspath(name)
        if identity in seen:
            out.append(name)
        seen.add(identity)
    return out


def prepare(opts: AnalyzeOptions) -> AnalyzePlan:
    """Rules, waivers, baseline, options, formats, --out and the file list, checked before any file is read."""
    if not 0 <= opts.jobs <= MAX_JOBS:
        raise InputError(f"--jobs must be between 1 and {MAX_JOBS} (0: one per CPU), not {opts.jobs}")
    judge_plan = judge_stage.prepare(opts.judge)
    compare_plan = compare_stage.prepare(opts.compare, frozenset(judge_plan.ruleset.ids()))
    render_plan = render_stage.prepare(opts.render)
    history_plan = history_stage.prepare(opts.history)
    files = snapshot_files(opts.dirs)
    jobs = opts.jobs or min(MAX_JOBS, len(os.sched_getaffinity(0)))
    return AnalyzePlan(tuple(files), jobs, opts.fail_on, judge_plan, compare_plan, render_plan, history_plan)


def analyze(opts: AnalyzeOptions, env: Env) -> int:
    """The whole analysis, recorded in the history store as a scan is; returns its exit code."""
    plan = prepare(opts)
    with fleet_gc():  # what prepare loaded is frozen before the workers fork; the report steps run relaxed
        return _analyze(plan, env)


def _analyze(plan: AnalyzePlan, env: Env) -> int:
    term = render_stage.terminal(plan.render, env)  # the summary: stdout, stderr or nowhere (--quiet)
    session, not_recorded = history_stage.begin(plan.history, now_iso(), source="analyze")
    try:
        feed = history_stage.feed(session)
        core = Evaluation(EvalPlan(plan.judge, plan.compare, plan.fail_on), sidecar=feed, keep=feed.keep)
        evaluate_files(core, plan.files, plan.jobs)  # each file read, given its trends, judged, indexed, dropped
        report = core.finish(now_iso(), [f"analyzed {len(plan.files)} saved snapshot files; no host was contacted"])
        read = [h.spec for h in report.hosts if h.status == "ok"]
        if read:  # the labels are known once the files are read: a mistyped one is bad input, not an empty comparison
            check_host_keys(plan.compare.options(), read)
        history_stage.add_since(session, report)
        for host in report.hosts:
            if host.status != "ok":
                term.out_styled(host_line(host))
        saved = save(core, report, session, plan.render, env, term, not_recorded, need_doc=False)
    except BaseException:
        history_stage.abandon(session)
        raise
    finally:
        history_stage.close(session)
    code = conclude(saved, report, session, env, term)
    if saved.unsaved is not None:
        raise saved.unsaved  # exit 3: the reports were not saved (the previous set is unchanged)
    return code
