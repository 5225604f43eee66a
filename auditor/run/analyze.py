"""`ami-auditor analyze DIR…`: saved snapshot files into the run driver, no host contacted.

The files (from `collect -o DIR`, or any tool that writes `ami-auditor/snapshot/1` documents) are read in
name order in batches on worker processes (evaluate/files.py), each host judged and indexed as it is read.
A file that cannot be read or is not a valid snapshot is that host's `error` (naming the file), never the
end of the run: exit 3.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..compare import stage as compare_stage
from ..compare.stage import ComparePlan
from ..context import Env
from ..errors import InputError
from ..evaluate.core import EvalPlan, Evaluation
from ..evaluate.files import evaluate_files
from ..history import stage as history_stage
from ..history.stage import StorePlan
from ..judge import stage as judge_stage
from ..judge.stage import JudgePlan
from ..models import Report
from ..options import AnalyzeOptions
from ..render import stage as render_stage
from ..render.stage import RenderPlan
from ..render.terminal import host_line
from ..targets.resolve import check_host_keys
from .driver import Line, RunPlan, drive

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


@dataclass
class SnapshotFiles:
    """The analysis's host source: the files, on `jobs` worker processes, merged in file order."""

    plan: AnalyzePlan
    kind: str = "analyze"

    def feed(self, core: Evaluation, term: Env) -> None:
        evaluate_files(core, self.plan.files, self.plan.jobs)  # each read, given its trends, judged, dropped

    def notes(self) -> list[str]:
        return [f"analyzed {len(self.plan.files)} saved snapshot files; no host was contacted"]

    def check(self, report: Report) -> None:
        """The labels are known once the files are read: a mistyped one is bad input, not an empty comparison."""
        if read := [h.spec for h in report.hosts if h.status == "ok"]:
            check_host_keys(self.plan.compare.options(), read)

    def lines(self, report: Report) -> Iterable[Line]:
        return [host_line(host) for host in report.hosts if host.status != "ok"]


def analyze(opts: AnalyzeOptions, env: Env) -> int:
    """The whole analysis, recorded in the history store as a scan is; returns its exit code."""
    plan = prepare(opts)  # what prepare loaded is frozen (evaluate/gcpolicy.py) before the workers fork
    run = RunPlan(EvalPlan(plan.judge, plan.compare, plan.fail_on), plan.render, plan.history)
    return drive(SnapshotFiles(plan), run, env).exit_code
