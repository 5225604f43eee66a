"""evaluate/forked.py on real forked processes: results in task order whatever the number of workers,
a task's exception raised in the parent, and a worker that dies holding a task is that task's `Lost`."""

from __future__ import annotations

import os
import signal
import time

import pytest

from auditor.evaluate.forked import Forked, Lost


def _square(offset: int, n: int) -> int:
    if n == -1:
        os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would
    if n == -2:
        raise ValueError("a bug in a task")
    if n == -3:
        time.sleep(3600)  # alive, answering nothing: as a worker stuck on a lock copied locked at the fork
    return offset + n * n


def _nothing(offset: int) -> None:
    pass


@pytest.mark.parametrize("jobs, count", [(3, 1), (3, 2), (2, 7), (4, 40)])
def test_every_result_in_task_order_however_many_workers_are_idle(jobs: int, count: int) -> None:
    with Forked(_square, jobs, _nothing, 0) as pool:
        got = list(pool.ordered(list(range(count))))
    assert got == [(n, n * n) for n in range(count)]


def test_each_pool_hands_its_own_state_to_its_workers() -> None:
    """Two pools open at once, each worker given its pool's state as an argument (a module global set before
    the fork would be the last pool's for both)."""
    seen: list[int] = []

    def note(offset: int) -> None:
        seen.append(offset)  # in the worker: the parent's list is untouched

    with Forked(_square, 2, note, 100) as first, Forked(_square, 2, note, 1000) as second:
        a, b = first.ordered([1, 2, 3]), second.ordered([1, 2, 3])
        got = [(next(a), next(b)) for _ in range(3)]
    assert got == [((n, 100 + n * n), (n, 1000 + n * n)) for n in (1, 2, 3)]
    assert seen == []


def test_a_worker_killed_holding_a_task_makes_it_lost_and_the_rest_still_run() -> None:
    tasks = [1, 2, -1, 3, 4, -1, 5]
    with Forked(_square, 2, _nothing, 0) as pool:
        got = list(pool.ordered(tasks))
    lost = Lost("killed by SIGKILL, signal 9")
    assert got == [(1, 1), (2, 4), (-1, lost), (3, 9), (4, 16), (-1, lost), (5, 25)]


def test_a_worker_that_answers_nothing_is_killed_after_the_stall_bound_and_its_task_is_lost() -> None:
    tasks = [1, -3, 2, 3, 4]
    with Forked(_square, 2, _nothing, 0, stall_s=1.0) as pool:
        got = list(pool.ordered(tasks))
    assert got == [(1, 1), (-3, Lost("no answer in 1 s: killed")), (2, 4), (3, 9), (4, 16)]
    assert pool._workers == []


def test_a_tasks_exception_is_raised_in_the_parent_and_no_worker_is_left() -> None:
    pool = Forked(_square, 2, _nothing, 0)
    started: list[int] = []
    start = pool._start

    def start_and_note() -> None:  # only this pool's workers: other tests' children share this process
        start()
        started.append(pool._workers[-1].proc.pid)

    pool._start = start_and_note  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="a bug in a task"), pool:
        list(pool.ordered([1, -2, 3, 4]))
    assert pool._workers == []
    assert len(started) == 2
    assert not [pid for pid in started if _parent_of(pid) == os.getpid()]  # gone and reaped


def _parent_of(pid: int) -> int:
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1
