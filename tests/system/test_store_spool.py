"""A run's store rows wait on disk until it is recorded (history/feed.Spool), not in memory: the same rows
are recorded either way. A spool that cannot be written (a full disk, for real) keeps the rows in memory;
one that cannot be read back leaves the run unrecorded with one line and exit 3, the reports written."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from auditor.context import Env
from auditor.evaluate.core import EvalPlan, Evaluation
from auditor.evaluate.files import as_result
from auditor.history import stage as history_stage
from auditor.history.db import open_store
from auditor.history.feed import Feed, Spooled
from auditor.options import HistoryOptions
from auditor.run import analyze as analysis_run
from tests.system.test_analyze import _fleet, _options, _write
from tests.system.test_output_failures import fill, tmpfs


def _analyze(tmp: Path, store: Path, snaps: Path, fail_on: str | None = "high") -> tuple[int, str]:
    opts = replace(_options([snaps], tmp, 1), history=HistoryOptions(store=str(store)), fail_on=fail_on)
    err = io.StringIO()
    code = analysis_run.analyze(opts, Env(io.StringIO(), err))
    return code, err.getvalue()


def _rows(store: Path) -> dict[str, tuple[bytes, str]]:
    with sqlite3.connect(store) as db:
        return {h: (v, s) for h, v, s in db.execute("SELECT host, volatile, snapshot FROM scan_hosts")}


def test_the_core_keeps_each_hosts_row_spooled_and_reads_it_back_as_packed(tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite3"
    open_store(store).close()
    feed = Feed(store)
    core = Evaluation(EvalPlan(*_plans(tmp_path)), hook=feed)
    snaps = _fleet(6)
    for snap in snaps:
        core.add(as_result(snap, f"{snap['name']}.json"))
    kept = [row for _, row in core.rows()]
    assert len(kept) == 6 and all(isinstance(row, Spooled) for row in kept)  # no volatile bytes in memory
    packed = [Feed(store).before_judge(snap) for snap in _fleet(6)]  # the same rows packed straight from the snapshots
    assert [feed.spool.volatile(row) for row in kept] == [p.volatile for p in packed if p is not None]
    feed.spool.close()


def _plans(tmp: Path):
    plan = analysis_run.prepare(_options([_write(_fleet(1), tmp / "one")], tmp, 1))
    return plan.judge, plan.compare, "high"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a tmpfs needs root")
def test_a_spool_on_a_full_disk_keeps_the_rows_in_memory_and_records_the_same_rows(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    snaps = _write(_fleet(12), tmp_path / "snaps")
    code, err = _analyze(tmp_path, tmp_path / "spooled.sqlite3", snaps)
    assert code in (0, 1), err
    with tmpfs(tmp_path / "full") as full:
        (full / "tmp").mkdir()
        fill(full / "tmp", 0)  # ENOSPC for the spool's first write
        monkeypatch.setattr(tempfile, "tempdir", str(full / "tmp"))
        code2, err2 = _analyze(tmp_path, tmp_path / "in-memory.sqlite3", snaps)
        assert not list((full / "tmp").iterdir())  # the spool file was unlinked at once, nothing left
    assert code2 == code and "Traceback" not in err2, err2
    spooled, in_memory = _rows(tmp_path / "spooled.sqlite3"), _rows(tmp_path / "in-memory.sqlite3")
    assert len(spooled) == 12 and spooled == in_memory
    assert all(volatile for volatile, _ in spooled.values())


def test_a_spool_that_cannot_be_read_back_leaves_the_run_unrecorded_exit_3(tmp_path: Path, monkeypatch) -> None:
    snaps = _write(_fleet(5), tmp_path / "snaps")
    real = history_stage.finish

    def truncated(session, doc, rows, finished_at):  # the spool file loses its bytes before the run is recorded
        os.ftruncate(rows.spool._file.fileno(), 0)
        return real(session, doc, rows, finished_at)

    monkeypatch.setattr(history_stage, "finish", truncated)
    code, err = _analyze(tmp_path, tmp_path / "h.sqlite3", snaps, fail_on=None)
    assert code == 3, err  # incomplete (with findings failing the run it would be 1: exitcodes.decide)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and ("could not be read back" in lines[0] or "came back short" in lines[0]), err
    assert "not recorded" in lines[0] and "Traceback" not in err
    report = json.loads((tmp_path / "out" / "report.json").read_text())  # the results are kept
    assert len(report["hosts"]) == 5
    assert _rows(tmp_path / "h.sqlite3") == {}  # nothing half-recorded


def test_a_spooled_row_asked_for_after_the_spool_is_closed_is_a_named_failure() -> None:
    from auditor.history.feed import Packed, Spool, SpoolLost

    spool = Spool()
    row = spool.hold(Packed("d", None, b"volatile", None))
    assert isinstance(row, Spooled) and spool.volatile(row) == b"volatile"
    spool.close()
    with pytest.raises(SpoolLost, match="let go"):
        spool.volatile(row)
