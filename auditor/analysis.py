"""`ami-auditor analyze DIR…`: judge, compare and report saved snapshots without contacting any host —
streamed, on every core, so a fleet of 100,000 hosts fits in one machine's memory.

The snapshot files (from `collect -o DIR`, or any tool that writes `ami-auditor/snapshot/1` documents)
are read in file-name order in batches. Each worker process reads a batch, and for every host judges it
(its Judge caches by the content each rule reads, across all its batches), normalizes it into its
share of the fleet index, and keeps for the report only a stub: labels, status, headline facts, its
findings, and the slice of facts the fleet rules read. The parent merges the batches in order:
configurations by content (the shared parts of normalized views are re-numbered by their content, never
by a worker's counter), hosts in file order; then the fleet rules, waivers, drift, comparison, symptom,
the report and the exit code, as `scan` does. A file that cannot be read or is not a valid snapshot is
that host's status (`error`, naming the file and line), never the end of the run: exit 3.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any, cast

from .collect.snapshot import now_iso
from .compare import stage as compare_stage
from .compare.index import Config, FleetIndex, host_attrs
from .compare.normalize import NormalView, normalize, stable_key
from .compare.sources import load_snapshot_file
from .compare.stage import ComparePlan
from .context import Env
from .errors import InputError
from .judge import stage as judge_stage
from .judge.engine import Judge
from .judge.shapes import Shape, merge_shapes, prune
from .judge.stage import JudgePlan
from .models import Finding, HostResult, HostSpec, Report
from .options import AnalyzeOptions
from .pipeline import verdict
from .render import stage as render_stage
from .render.stage import RenderPlan
from .render.terminal import host_line
from .reportdoc import facts_summary
from .snapshotdoc import Snapshot


@dataclass(frozen=True)
class AnalyzePlan:
    """Everything an analysis needs, validated before any snapshot file is read."""

    files: tuple[str, ...]
    jobs: int
    fail_on: str
    judge: JudgePlan
    compare: ComparePlan
    render: RenderPlan


BATCH = 500  # files per task: big enough to amortize a task, small enough to stream
MAX_JOBS = 64
_STUB_KEYS = ("labels", "errors", "not_applicable")


@dataclass
class Batch:
    """What a worker sends back for one batch of files, hosts in file order."""

    hosts: list[HostResult] = field(default_factory=list)
    findings: list[list[Finding]] = field(default_factory=list)  # per judged host
    views: list[tuple[int, int]] = field(default_factory=list)  # per judged host: (worker pid, its view id)
    new_views: dict[tuple[int, int], NormalView] = field(default_factory=dict)  # first seen in this batch
    attrs: list[dict[str, str]] = field(default_factory=list)  # per judged host: the grouping keys' values
    slices: list[Snapshot] = field(default_factory=list)  # per judged host: what fleet rules read


@dataclass(frozen=True)
class FleetCut:
    """What the fleet rules read of a host: facts (by shape), `host` keys (None: all), or everything."""

    shapes: dict[str, Shape]
    host_keys: tuple[str, ...] | None
    everything: bool


def fleet_cut(judge: Judge) -> FleetCut:
    shapes: dict[str, Shape] = {}
    host_keys: set[str] | None = set()
    everything = False
    for rule in judge.rules:
        if rule.fleet is None:
            continue
        everything = everything or "*" in rule.roots
        for area, shape in rule.shapes:
            shapes[area] = merge_shapes(shapes[area], shape) if area in shapes else shape
        if "host" in rule.roots and host_keys is not None:
            keys = rule.root_keys.get("host")
            host_keys = None if keys is None else host_keys | set(keys)
    return FleetCut(shapes, None if host_keys is None else tuple(sorted(host_keys)), everything)


class _Worker:
    """A worker's state: its Judge (and caches), and the views it has already sent."""

    def __init__(self, judge: Judge, keys: list[str], fleet: FleetCut):
        self.judge = judge
        self.keys = keys
        self.fleet = fleet
        self.view_ids: dict[Any, int] = {}
        self.key_ids: dict[bytes, int] = {}  # stable content key → view id

    def batch(self, paths: list[str]) -> Batch:
        out = Batch()
        pid = os.getpid()
        for path in paths:
            name = Path(path).stem
            try:
                snap = load_snapshot_file(path)
            except (InputError, OSError) as exc:
                out.hosts.append(HostResult(HostSpec(name, path, {}), "error", _why(exc)))
                continue
            name = str(snap.get("name") or name)
            out.findings.append(self.judge.judge(snap))
            key = stable_key(snap)
            vid = self.key_ids.get(key) if key is not None else None
            if vid is None:  # normalized once per distinct stable content, then once per distinct view
                view = normalize(snap)
                ident = view.identity()
                vid = self.view_ids.get(ident)
                if vid is None:
                    vid = self.view_ids[ident] = len(self.view_ids)
                    out.new_views[(pid, vid)] = view
                if key is not None:
                    self.key_ids[key] = vid
            out.views.append((pid, vid))
            out.attrs.append(host_attrs(snap, self.keys))
            out.slices.append(self._slice(snap))
            stub = cast(Snapshot, {k: snap.get(k) for k in _STUB_KEYS if k in snap})
            probe = snap.get("probe") or {}
            stub["probe"] = {"complete": probe.get("complete", True), "failed_areas": probe.get("failed_areas")}
            out.hosts.append(HostResult(HostSpec(name, str(snap.get("target") or path), dict(snap.get("labels") or {})),
                                        "ok", None, stub, 0.0, facts_summary(snap)))
        return out

    def _slice(self, snap: Snapshot) -> Snapshot:
        """The snapshot cut to what the fleet rules read (judge/shapes.py), name and status kept."""
        cut = self.fleet
        if cut.everything:
            return snap
        facts = snap.get("facts") or {}
        keep: dict[str, Any] = {k: snap.get(k) for k in ("name", "target", "labels", "errors", "not_applicable")
                                if k in snap}
        host: Mapping[str, Any] | None = snap.get("host")
        if host is not None:
            keep["host"] = host if cut.host_keys is None or not isinstance(host, dict) else {
                k: host[k] for k in cut.host_keys if k in host}
        keep["facts"] = {a: prune(facts.get(a), s) for a, s in cut.shapes.items() if a in facts}
        return cast(Snapshot, keep)


_WORKER: _Worker | None = None  # set in the parent before the pool forks, so workers inherit it


def _worker_signals() -> None:
    """Workers leave SIGINT to the parent (which stops the pool) and die on SIGTERM: the parent's clean-stop
    handler (interrupt.py) raising inside a worker could leave the task queue's lock held for good."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run_batch(paths: list[str]) -> Batch:
    assert _WORKER is not None
    return _WORKER.batch(paths)


def _why(exc: BaseException) -> str:
    if isinstance(exc, InputError):
        return str(exc)
    return f"cannot read: {exc.strerror or exc}" if isinstance(exc, OSError) else str(exc)


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
            names = sorted(e.name for e in os.scandir(p) if e.name.endswith(".json") and not e.is_dir())
        except OSError as exc:
            raise InputError(f"cannot list: {exc.strerror}", d) from None
        files.extend(str(p / n) for n in names)
    if not files:
        raise InputError("no *.json snapshot files in " + ", ".join(dirs))
    return files


class _Merge:
    """The parent's side: configurations merged by content, hosts and findings in file order."""

    def __init__(self) -> None:
        self.configs: list[Config] = []
        self.by_identity: dict[Any, int] = {}
        self.by_worker_view: dict[tuple[int, int], int] = {}
        self.part_tokens: dict[Any, int] = {}
        self.tokens = count()
        self.host_config: dict[str, int] = {}
        self.attrs: dict[str, dict[str, str]] = {}
        self.hosts: list[HostResult] = []
        self.findings: list[Finding] = []
        self.slices: list[Snapshot] = []

    def _adopt(self, view: NormalView) -> int:
        """The parent's configuration for a worker's view: parts re-numbered by content."""
        parts = []
        for _, items in view.parts:
            token = self.part_tokens.get(items)
            if token is None:
                token = self.part_tokens[items] = next(self.tokens)
            parts.append((token, items))
        mine = NormalView(view.rest, tuple(parts), view.unknown, view.not_applicable)
        ident = mine.identity()
        index = self.by_identity.get(ident)
        if index is None:
            index = self.by_identity[ident] = len(self.configs)
            self.configs.append(Config(mine))
        return index

    def add(self, batch: Batch) -> None:
        for key, view in batch.new_views.items():
            self.by_worker_view[key] = self._adopt(view)
        judged = iter(zip(batch.views, batch.attrs, batch.slices, batch.findings))
        for host in batch.hosts:
            if host.status != "ok":
                self.hosts.append(host)
                continue
            view_key, attrs, piece, findings = next(judged)
            if host.name in self.host_config:  # the first file naming a host is judged; the next is an error
                self.hosts.append(HostResult(HostSpec(host.name, host.spec.target, host.spec.labels), "error",
                                             "duplicate host name: another snapshot file names the same host"))
                continue
            index = self.by_worker_view[view_key]
            self.configs[index].hosts.append(host.name)
            self.host_config[host.name] = index
            self.attrs[host.name] = attrs
            self.hosts.append(host)
            self.slices.append(piece)
            self.findings.extend(findings)

    def index(self) -> FleetIndex:
        return FleetIndex(self.configs, self.host_config, self.attrs)


def _batches(files: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(files), BATCH):
        yield files[start:start + BATCH]


def stream(plan: AnalyzePlan, judge: Judge) -> _Merge:
    """Read, judge and index every file on `plan.jobs` processes; merged in file order."""
    global _WORKER
    _WORKER = _Worker(judge, plan.compare.keys(), fleet_cut(judge))
    files = list(plan.files)
    merge = _Merge()
    threshold = gc.get_threshold()
    gc.freeze()  # what exists now (modules, rules) is never garbage: collections skip it, here and in workers
    gc.set_threshold(20_000, 50, 100)  # parsed snapshots are acyclic: collect far less often (~30% CPU)
    try:
        if plan.jobs <= 1 or len(files) <= BATCH:
            for paths in _batches(files):
                merge.add(_WORKER.batch(paths))
            return merge
        pool = multiprocessing.get_context("fork").Pool(plan.jobs, initializer=_worker_signals)
        try:
            for batch in pool.imap(_run_batch, _batches(files)):
                merge.add(batch)
            pool.close()
        except BaseException:
            pool.terminate()  # SIGTERM: workers die at once (default action), whatever they hold
            raise
        finally:
            pool.join()
        return merge
    finally:
        _WORKER = None
        gc.set_threshold(*threshold)
        gc.unfreeze()


def prepare(opts: AnalyzeOptions) -> AnalyzePlan:
    """Rules, waivers, baseline, options, formats, --out and the file list, checked before any file is read."""
    if not 0 <= opts.jobs <= MAX_JOBS:
        raise InputError(f"--jobs must be between 1 and {MAX_JOBS} (0: one per CPU), not {opts.jobs}")
    judge_plan = judge_stage.prepare(opts.judge)
    compare_plan = compare_stage.prepare(opts.compare, frozenset(judge_plan.ruleset.ids()))
    render_plan = render_stage.prepare(opts.render)
    files = snapshot_files(opts.dirs)
    jobs = opts.jobs or min(MAX_JOBS, len(os.sched_getaffinity(0)))
    return AnalyzePlan(tuple(files), jobs, opts.fail_on, judge_plan, compare_plan, render_plan)


def analyze(opts: AnalyzeOptions, env: Env) -> int:
    """The whole analysis; returns its exit code."""
    plan = prepare(opts)
    judge = Judge(plan.judge.ruleset)  # the workers' (forked) and, after them, the fleet rules'
    merge = stream(plan, judge)
    report = Report(hosts=merge.hosts, generated_at=now_iso(), fail_on=plan.fail_on,
                    notes=[f"analyzed {len(plan.files)} saved snapshot files; no host was contacted"])
    findings = merge.findings + judge.judge_fleet(merge.slices)
    labels = {h.name: dict(h.spec.labels) for h in merge.hosts}
    judge_stage.finish(plan.judge, report, findings, labels)
    if plan.compare.active:
        compare_stage.apply_index(plan.compare, report, merge.index())
    report.exit_code = verdict(report)
    term = render_stage.terminal(plan.render, env)  # the summary: stdout, stderr or nowhere (--quiet)
    for host in report.hosts:
        if host.status != "ok":
            term.out_styled(host_line(host))
    render_stage.write(plan.render, report, env)
    render_stage.summarize(report, term)
    return report.exit_code
