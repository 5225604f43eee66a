"""`analyze` over hostile or unlucky snapshot directories: duplicate names, odd file names, unreadable files,
workers that die. Each case is real files read by the real command (workers are real forked processes)."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from auditor.context import Env
from auditor.evaluate import files
from auditor.history import pack
from auditor.options import AnalyzeOptions, CompareOptions, HistoryOptions, RenderOptions
from auditor.run import analyze as analysis_run
from tests.paths import ROOT

REPO = ROOT
FLEET = REPO / "tests" / "data" / "compare" / "fleet"


def _snap(base: str, name: str, **changes: Any) -> dict[str, Any]:
    s = json.loads((FLEET / f"{base}.json").read_text())
    s["name"] = name
    if "release" in changes:
        s["facts"]["kernel"]["release"] = changes["release"]
    return s


def _run(dirs: list[Path], tmp: Path, jobs: int = 1, store: Path | None = None,
         **compare: Any) -> tuple[int, dict[str, Any], str]:
    """The analysis in this process (workers fork from it): exit code, the JSON report, stderr."""
    out, err = io.StringIO(), io.StringIO()
    history = HistoryOptions(store=str(store)) if store is not None else HistoryOptions(no_store=True)
    opts = AnalyzeOptions(dirs=tuple(map(str, dirs)), jobs=jobs, compare=CompareOptions(**compare),
                          render=RenderOptions(formats="json,html,junit,md", out=str(tmp / "out")), history=history)
    code = analysis_run.analyze(opts, Env(out, err))
    return code, json.loads((tmp / "out" / "report.json").read_text()), err.getvalue()


def _write(d: Path, named: dict[str, dict[str, Any]]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for file, snap in named.items():
        (d / file).write_text(json.dumps(snap))
    return d


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_configuration_first_met_on_a_refused_duplicate_is_still_compared(tmp_path: Path, jobs: int,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The view of configuration U arrives with a duplicate (refused); later hosts of U bring only its number."""
    monkeypatch.setattr(files, "BATCH", 2)
    named = {"f00.json": _snap("a1", "first")}
    for i in range(4):  # batches led by a duplicate of `first` in configuration U: each worker meets U there
        named[f"f{2 * i + 1:02d}.json"] = _snap("a1", "first", release="9.9.9-unique")
        named[f"f{2 * i + 2:02d}.json"] = _snap("b1", f"x{i}")
    for i in range(4):  # then hosts of U under their own names, in later batches
        named[f"g{i}.json"] = _snap("a1", f"u{i}", release="9.9.9-unique")
    d = _write(tmp_path / "d", named)
    code, doc, err = _run([d], tmp_path, jobs, group_by="az")
    assert code in (1, 3), err  # findings, or incomplete: the duplicates are error hosts
    status = [(h["name"], h["status"]) for h in doc["hosts"]]
    assert status.count(("first", "ok")) == 1 and status.count(("first", "error")) == 4
    assert all(s == "ok" for n, s in status if n != "first")
    dups = [h["error"] for h in doc["hosts"] if h["status"] == "error"]
    assert all(e.startswith("duplicate host name") for e in dups)
    assert sorted(e.split("this one is ")[1] for e in dups) == [str(d / f"f{2 * i + 1:02d}.json") + ")"
                                                                for i in range(4)]


def test_a_bad_file_whose_name_is_not_utf8_is_its_hosts_error_in_every_report_and_the_store(tmp_path: Path) -> None:
    d = _write(tmp_path / "d", {"good.json": _snap("a1", "good")})
    with open(os.path.join(os.fsencode(d), b"x\xff.json"), "wb") as f:
        f.write(b"{")
    code, doc, err = _run([d], tmp_path, store=tmp_path / "s.sqlite3")
    assert code == 3, err
    bad = [h for h in doc["hosts"] if h["status"] == "error"]
    assert [h["name"] for h in bad] == ["x\\xff"] and bad[0]["target"] == f"{d}/x\\xff.json"
    assert f"{d}/x\\xff.json" in bad[0]["error"]
    with sqlite3.connect(tmp_path / "s.sqlite3") as db:
        rows = sorted(db.execute("SELECT host, status FROM scan_hosts").fetchall())
    assert rows == [("good", "ok"), ("x\\xff", "error")]


def test_a_worker_killed_by_sigkill_names_the_hosts_it_held_and_the_rest_is_judged(tmp_path: Path) -> None:
    """As the OOM killer would: the batch the worker held is its hosts' error (exit 3, or 1 for findings),
    the other batches are judged, and the run ends (it waited forever on multiprocessing.Pool)."""
    d = tmp_path / "many"
    d.mkdir()
    bases = [_snap(b, "") for b in ("a1", "b1", "b3")]
    n = files.BATCH * 6
    for i in range(n):
        bases[i % 3]["name"] = f"m{i:05d}"
        (d / f"m{i:05d}.json").write_text(json.dumps(bases[i % 3]))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "auditor.cli", "analyze", str(d), "--jobs", "2", "--no-store",
                             "--format", "json", "--out", str(out), "-q"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    victim = _reading_worker(proc.pid)
    assert victim, "no worker started reading"
    os.kill(victim, signal.SIGKILL)
    try:
        code = proc.wait(timeout=240)  # a bound, not a timing: it used to wait forever
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read() if proc.stderr else ""
    assert code in (1, 3), err
    hosts = json.loads((out / "report.json").read_text())["hosts"]
    assert [h["name"] for h in hosts] == [f"m{i:05d}" for i in range(n)]  # file order, every file once
    lost = [h for h in hosts if h["status"] == "error"]
    assert len(lost) == files.BATCH  # the one batch the worker held
    assert all(h["error"] == "not evaluated: the worker process reading it died (killed by SIGKILL, signal 9)"
               for h in lost)
    assert sum(h["status"] == "ok" for h in hosts) == n - files.BATCH


def _reading_worker(parent: int, read: int = 2_000_000) -> int | None:
    """A worker of `parent` that has read `read` bytes: inside its batch (it has read a few snapshot files)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            children = [int(c) for c in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
            for child in children:
                rchar = Path(f"/proc/{child}/io").read_text().split("rchar:")[1].split()[0]
                if int(rchar) >= read:
                    return child
        except (OSError, IndexError):  # a process gone between the listing and the read
            pass
        time.sleep(0.01)
    return None


def test_an_unreadable_file_named_like_a_good_host_is_named_by_its_file(tmp_path: Path) -> None:
    """d1/h01.json is cut off, d2/h01.json is host h01's snapshot: h01 is judged from d2, the error is
    d1/h01.json's, and the store records each under its own name (it recorded h01 as `error` with d2's data)."""
    d1, d2 = tmp_path / "d1", _write(tmp_path / "d2", {"h01.json": _snap("a1", "h01"), "h00.json": _snap("b1", "h00")})
    d1.mkdir()
    (d1 / "h01.json").write_text('{"trunc')
    (d1 / "h02.json").write_text('{"trunc')  # collides with nothing: keeps its stem
    (d2 / "h02.json").write_text("[]")  # an unreadable file again named h02: by its file
    code, doc, err = _run([d1, d2], tmp_path, store=tmp_path / "s.sqlite3")
    assert code in (1, 3), err
    names = [(h["name"], h["status"]) for h in doc["hosts"]]
    assert names == [(f"{d1}/h01.json", "error"), ("h02", "error"), ("h00", "ok"), ("h01", "ok"),
                     (f"{d2}/h02.json", "error")]
    assert f"{d1}/h01.json" in doc["hosts"][0]["error"]
    with sqlite3.connect(tmp_path / "s.sqlite3") as db:
        rows = sorted(db.execute("SELECT host, status, snapshot IS NOT NULL FROM scan_hosts").fetchall())
        found = {h for (h,) in db.execute("SELECT DISTINCT host FROM findings")}
    assert rows == sorted([(f"{d1}/h01.json", "error", 0), ("h02", "error", 0), ("h00", "ok", 1), ("h01", "ok", 1),
                           (f"{d2}/h02.json", "error", 0)])
    assert found <= {"h00", "h01"}


def test_a_password_in_a_saved_snapshots_target_is_never_echoed(tmp_path: Path) -> None:
    snap = _snap("a1", "a1")
    snap["target"] = "ssh://root:hunter2@10.0.0.1"
    d = _write(tmp_path / "d", {"a1.json": snap})
    _, doc, err = _run([d], tmp_path, store=tmp_path / "s.sqlite3")
    assert doc["hosts"][0]["target"] == "ssh://root:***@10.0.0.1"
    written = [p for p in (tmp_path / "out").iterdir() if b"hunter2" in p.read_bytes()]
    assert written == [] and "hunter2" not in err
    with sqlite3.connect(tmp_path / "s.sqlite3") as db:
        assert db.execute("SELECT target FROM scan_hosts").fetchall() == [("ssh://root:***@10.0.0.1",)]
        (blob, volatile), = db.execute("SELECT body, volatile FROM snapshots JOIN scan_hosts ON hash = snapshot")
    stored = pack.join(pack.decompress(blob), pack.decompress(volatile))  # the store's copy of the snapshot
    assert "hunter2" not in json.dumps(stored) and stored["target"] == "ssh://root:***@10.0.0.1"


def test_a_fifo_or_device_named_json_is_refused_without_being_opened(tmp_path: Path) -> None:
    """Opening a device can act (a watchdog starts, a tape rewinds): refused by its type before any open.
    A FIFO shows an open: a writer blocked in open(2) is let through by the first reader."""
    d = _write(tmp_path / "d", {"good.json": _snap("a1", "good")})
    os.mkfifo(d / "fifo.json")
    (d / "zero.json").symlink_to("/dev/zero")
    opened = threading.Event()

    def writer() -> None:
        with open(d / "fifo.json", "wb"):  # returns once some process opens the FIFO to read
            opened.set()

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        code, doc, err = _run([d], tmp_path)
        time.sleep(0.2)  # not a timing assert: a writer let through by the run has had time to say so
        during = opened.is_set()
    finally:
        os.close(os.open(d / "fifo.json", os.O_RDONLY | os.O_NONBLOCK))  # let the writer go
        t.join(30)
    assert code in (1, 3), err
    status = {h["name"]: (h["status"], h.get("error") or "") for h in doc["hosts"]}
    assert status["fifo"][0] == "error" and "not a regular file (a FIFO)" in status["fifo"][1]
    assert status["zero"][0] == "error" and "not a regular file (a device or socket)" in status["zero"][1]
    assert status["good"] == ("ok", "")
    assert not during, "the analysis opened the FIFO"
    assert opened.is_set() and not t.is_alive()  # the probe works: our own open let the writer through


def test_an_oversize_name_target_or_label_is_that_files_error_not_copied_into_every_report(tmp_path: Path) -> None:
    """A name is copied into every finding, report and store row: a 20 MB one made 1.3 GB of reports."""
    long_name, long_target, long_label = _snap("a1", "N" * 1_000_000), _snap("a1", "t"), _snap("a1", "l")
    long_target["target"] = "ssh://" + "h" * 8200
    long_label["labels"]["note"] = "v" * 4097
    edge = _snap("b1", "E" * 4096)  # as long as an image root's path can be: still a host
    edge["errors"]["cpu"] = "e" * 4096  # as long as the collector lets a reason be
    # a reason is copied into each finding a rule could not evaluate; a host string into labels and reports
    reason, skipped, hostname = _snap("a1", "r"), _snap("a1", "n"), _snap("a1", "h")
    reason["errors"]["systemd"] = "x" * 2_000_000
    skipped["not_applicable"] = {"x" * 200: "not here"}
    hostname["host"]["hostname"] = "h" * 4097
    d = _write(tmp_path / "d", {"long.json": long_name, "t.json": long_target, "l.json": long_label,
                                "edge.json": edge, "r.json": reason, "n.json": skipped, "h.json": hostname})
    code, doc, err = _run([d], tmp_path)
    assert code in (1, 3), err
    status = {h["name"]: (h["status"], h.get("error") or "") for h in doc["hosts"]}
    assert status["E" * 4096][0] == "ok"
    for stem, pointer in (("long", "/name"), ("t", "/target"), ("l", "/labels/note"), ("r", "/errors/systemd"),
                          ("n", "/not_applicable"), ("h", "/host/hostname")):
        assert status[stem][0] == "error" and f"{d}/{stem}.json" in status[stem][1], status[stem]
        assert pointer in status[stem][1] and len(status[stem][1]) < 1000, status[stem][1][:1000]
    assert sum(p.stat().st_size for p in (tmp_path / "out").iterdir()) < 5_000_000
