"""Saved snapshot files into the evaluation core, on every core: each worker process reads a batch of
files, judges and indexes them with its own core (the pool's worker state, with the file list; its Judge
caches last across its batches), and hands its batch to the parent, which merges them in file order. A file
that cannot be read or is not a valid snapshot is that host's status (`error`, naming the file and line),
never the end of the run."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..compare.sources import load_snapshot_file
from ..errors import InputError
from ..inputfile import read_ahead
from ..interrupt import forked_child_signals
from ..models import HostResult, HostSpec
from ..snapshotdoc import Snapshot
from ..targets.inventory import redact_urls
from .core import Evaluation, WorkerBatch
from .forked import Forked, Lost

BATCH = 500  # files per task: big enough to amortize a task, small enough to stream
READ_AHEAD = 32  # files the kernel is asked to read ahead of the one being parsed (~2.5 MB of snapshots)


@dataclass(frozen=True)
class _Batches:
    """A worker's state, made in the parent and inherited at the fork: its own core, and the files (a task
    names a batch by its positions)."""

    core: Evaluation
    files: Sequence[str]


def read_host(path: str) -> HostResult:
    """One snapshot file as a host result: `ok` with the snapshot, or `error` saying why not."""
    try:
        snap = load_snapshot_file(path)
    except (InputError, OSError) as exc:
        shown = text_of(path)
        return HostResult(HostSpec(Path(shown).stem, shown, {}), "error", text_of(_why(exc)))
    return as_result(snap, path)


def as_result(snap: Snapshot, path: str) -> HostResult:
    """A saved snapshot as its host's result: named by the snapshot (else by its file), labels from it. A
    password in its target (`ssh://user:pw@host`, as some tool wrote it) is `***` before anything (the
    reports, the store's copy of the snapshot) can echo it."""
    shown = text_of(path)
    name = str(snap.get("name") or Path(shown).stem)
    if isinstance(snap.get("target"), str):
        snap["target"] = redact_urls(snap["target"])
    return HostResult(HostSpec(name, str(snap.get("target") or shown), dict(snap.get("labels") or {})), "ok",
                      None, snap)


def text_of(text: str) -> str:
    """`text` as it can be written (a report, the store): a file name's bytes that are not UTF-8 (Python's
    surrogate escapes, which no encoder takes) shown as `\\xff`."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _why(exc: BaseException) -> str:
    if isinstance(exc, InputError):
        return str(exc)
    return f"cannot read: {exc.strerror or exc}" if isinstance(exc, OSError) else str(exc)


def _read_ahead(paths: Sequence[str]) -> Iterator[str]:
    """`paths` in order, each file's disk read started READ_AHEAD files before it is read: a snapshot
    directory that is not in the page cache is read while the files before are parsed, not in between."""
    for path in paths[:READ_AHEAD]:
        read_ahead(path)
    for index, path in enumerate(paths):
        if index + READ_AHEAD < len(paths):
            read_ahead(paths[index + READ_AHEAD])
        yield path


def _batches(files: Sequence[str], size: int) -> list[tuple[int, int]]:
    """(start, stop) of each batch: a task is a few bytes on a worker's pipe, its file list inherited."""
    return [(start, min(start + size, len(files))) for start in range(0, len(files), size)]


def _start_worker(state: _Batches) -> None:
    forked_child_signals()


def _run_batch(state: _Batches, batch: tuple[int, int]) -> WorkerBatch:
    start, stop = batch
    for offset, path in enumerate(_read_ahead(state.files[start:stop])):
        state.core.add(read_host(path), start + offset, text_of(path))
    return state.core.hand_over()


def evaluate_files(core: Evaluation, files: Sequence[str], jobs: int, batch: int | None = None) -> None:
    """Every file through `core`: in this process (one job, or few files), else on `jobs` forked workers
    running the same core, merged here in file order."""
    size = batch or BATCH
    if jobs <= 1 or len(files) <= size:
        for path in _read_ahead(files):
            core.add(read_host(path), source=text_of(path))
        return
    state = _Batches(Evaluation(core.plan, core.judge, worker=True, hook=core.hook), files)
    with Forked(_run_batch, jobs, _start_worker, state) as pool:
        for (start, stop), part in pool.ordered(_batches(files, size)):
            if isinstance(part, Lost):
                _not_evaluated(core, start, files[start:stop], part.how)
            else:
                core.merge(part)


def _not_evaluated(core: Evaluation, start: int, paths: Sequence[str], how: str) -> None:
    """The files of a batch whose worker died (the OOM killer): each its host's error, the run incomplete."""
    for offset, path in enumerate(paths):
        shown = text_of(path)
        why = f"not evaluated: the worker process reading it died ({how})"
        core.add(HostResult(HostSpec(Path(shown).stem, shown, {}), "error", why), start + offset, shown)
