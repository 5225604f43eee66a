"""The history store as hostile input: crafted store files (built with sqlite3) through the real CLI.

Each case is a real store file: a store one real `scan local` wrote, then altered with sqlite3 the way
an attacker or a damaged disk could. Through `scan` and `history list/show/trend`: exit 2 naming the
file, no traceback, within a wall-clock bound (the hang cases run in a subprocess so that a regression
hangs only that process), and a legit store still works.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.errors import InputError
from auditor.history import conn as store_conn
from auditor.history import db
from auditor.history.folder import save_scan
from tests.paths import DATA, ROOT

REPORT = DATA / "reports" / "clean.json"
RECURSIVE = "(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c)"
DEEP = 100_000


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(out, err))
    return code, out.getvalue() + err.getvalue()


def cli_process(*argv: str, timeout: float = 20) -> tuple[int, str, float]:
    """The CLI in its own process (a hang stays there, killed at `timeout`): (exit code, output, seconds)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "auditor.cli", *argv], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return -1, f"hung: killed after {timeout} s", time.monotonic() - started
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


@pytest.fixture(scope="module")
def legit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store one real `scan local` wrote (copied per test)."""
    store = tmp_path_factory.mktemp("legit") / "h.sqlite3"
    code, text = cli("scan", "local", "--binary", "sh", "--store", str(store))
    assert code in (0, 1), text
    return store


@pytest.fixture()
def store(legit: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "h.sqlite3"
    shutil.copyfile(legit, copy)
    return copy


def alter(store: Path, sql: str) -> None:
    conn = sqlite3.connect(store, isolation_level=None)
    try:
        conn.executescript(sql)
    finally:
        conn.close()


def dead_running_row(store: Path, pid: object = 2**22 + 1) -> None:
    """A `running` scan of this machine (a pid above Linux's pid_max: no such process)."""
    conn = sqlite3.connect(store, isolation_level=None)
    try:
        conn.execute("INSERT INTO scans (started_at, state, pid, node) VALUES ('2026-01-01T00:00:00Z', 'running', "
                     "?, ?)", (pid, socket.gethostname()))
    finally:
        conn.close()


def scan_argv(store: Path, out: Path) -> tuple[str, ...]:
    return ("scan", "local", "--binary", "sh", "--store", str(store), "--format", "json", "--out", str(out))


SCHEMA_CASES: dict[str, str] = {
    "trigger-recursive-cte": f"CREATE TRIGGER slow AFTER INSERT ON scans BEGIN SELECT {RECURSIVE}; END;"
                             f"CREATE TRIGGER slow2 AFTER UPDATE ON scans BEGIN SELECT {RECURSIVE}; END;",
    "view-recursive": "DROP TABLE scans; CREATE VIEW scans(id, started_at, finished_at, generated_at, state, pid, "
                      "node, exit_code, hosts, findings, drift, source) AS WITH RECURSIVE c(x) AS "
                      "(SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x, '', '', '', 'complete', 1, '', 0, 0, 0, "
                      "0, '' FROM c;",
    "trigger-raise": "CREATE TRIGGER no BEFORE INSERT ON scans BEGIN SELECT RAISE(ABORT, 'refused'); END;",
    "trigger-deletes-earlier-scans": "CREATE TRIGGER gone AFTER INSERT ON scans BEGIN "
                                     "DELETE FROM scan_hosts WHERE scan_id < new.id; "
                                     "DELETE FROM findings WHERE scan_id < new.id; "
                                     "DELETE FROM scans WHERE id < new.id; END;",
    "missing-issues": "DROP TABLE issues;",
    "missing-scan_hosts": "DROP TABLE scan_hosts;",
    "extra-table": "CREATE TABLE notes (x);",
    "extra-index": "CREATE INDEX scans_by_state ON scans(state);",
    "changed-column": "ALTER TABLE scans ADD COLUMN extra TEXT;",
}
HANGS = ("trigger-recursive-cte", "view-recursive")


@pytest.mark.parametrize("case", sorted(SCHEMA_CASES))
def test_a_store_whose_schema_is_not_its_own_is_bad_input_naming_the_file(store: Path, tmp_path: Path,
                                                                          case: str) -> None:
    dead_running_row(store)  # `history list` marks it interrupted: an UPDATE a trigger could hang on
    alter(store, SCHEMA_CASES[case])
    before = store.read_bytes()
    argvs = [scan_argv(store, tmp_path / "out"), ("history", "list", "--store", str(store)),
             ("history", "show", "latest", "--store", str(store)),
             ("history", "trend", "facts.kernel.mem_total_kb", "--store", str(store))]
    for argv in argvs[:2] if case in HANGS else ():  # the hangs of the issue, each in its own process
        code, text, seconds = cli_process(*argv)
        assert code == 2, text
        assert str(store) in text and "schema" in text and "Traceback" not in text
        assert seconds < 10, f"{argv[0]} took {seconds:.1f} s"
    for argv in argvs:
        code, text = cli(*argv)
        assert code == 2, text
        assert str(store) in text and "schema" in text and "Traceback" not in text
    assert not (tmp_path / "out").exists()  # refused before any host: nothing written
    assert store.read_bytes() == before  # and nothing changed in the file (no trigger ran)


def test_a_query_past_its_time_bound_is_stopped_and_names_the_store(store: Path) -> None:
    """The schema check refuses every crafted hang above; this is the bound behind it (a query the
    store's own schema could still make slow, here a recursive CTE on the real connection)."""
    conn = db.open_store(store, create=False)
    try:
        conn.query_seconds = 0.5
        started = time.monotonic()
        with pytest.raises(InputError) as caught:
            conn.execute(f"SELECT {RECURSIVE}")
        assert time.monotonic() - started < 3
        assert str(store) in str(caught.value) and "took longer than" in str(caught.value)
    finally:
        conn.close()


def test_sigterm_during_a_store_query_ends_the_process_at_once(store: Path) -> None:
    """A real process in a query that would run for hours; SIGTERM ends it with 143 within 2 s."""
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from auditor import interrupt
from auditor.errors import InputError
from auditor.history import conn as store_conn
from auditor.history import db
store = Path({str(store)!r})
with interrupt.handlers():
    conn = db.open_store(store, create=False)
    print("querying", flush=True)
    try:
        conn.execute("SELECT {RECURSIVE}")
    except interrupt.Terminated:
        sys.exit(143)
sys.exit(1)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "querying\n"
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert proc.wait(timeout=10) == 143
        assert time.monotonic() - started < 2
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# (alteration, whether `history list` reads the value too; `history show` reads every one)
VALUE_CASES: dict[str, tuple[Callable[[Path], None], bool]] = {
    "pid-not-a-number": (lambda s: dead_running_row(s, "abc"), True),
    "pid-2**63-1": (lambda s: dead_running_row(s, 2**63 - 1), True),
    "pid-negative": (lambda s: dead_running_row(s, -1), True),
    "evidence-deeply-nested": (lambda s: alter(s, f"UPDATE findings SET evidence = '{nested(DEEP)}';"), False),
    "evidence-nan": (lambda s: alter(s, "UPDATE findings SET evidence = '{\"x\": NaN}';"), False),
    "labels-not-json": (lambda s: alter(s, "UPDATE scan_hosts SET labels = x'00ff';"), False),
    "state-unknown": (lambda s: alter(s, "PRAGMA ignore_check_constraints = ON; UPDATE scans SET state = 'odd';"),
                      True),
    "hosts-a-blob": (lambda s: alter(s, "UPDATE scans SET hosts = x'00';"), True),
    "severity-a-number": (lambda s: alter(s, "UPDATE findings SET severity = 7;"), False),
}


@pytest.mark.parametrize("case", sorted(VALUE_CASES))
def test_a_stored_value_of_the_wrong_kind_is_bad_input_naming_the_store(store: Path, case: str) -> None:
    damage, listed = VALUE_CASES[case]
    damage(store)
    for argv, refused in ((("history", "list", "--store", str(store), "--json"), listed),
                          (("history", "show", "latest", "--store", str(store), "--json"), True),
                          (("history", "show", "latest", "--store", str(store)), True)):
        code, text = cli(*argv)
        if not refused:
            assert code == 0, f"{argv}: {text}"
            json.loads(text, parse_constant=pytest.fail)  # strict JSON out: no NaN
            continue
        assert code == 2, f"{argv}: {text}"
        assert str(store) in text and "Traceback" not in text and "internal error" not in text


def _blob(text: bytes) -> bytes:
    import zlib

    return zlib.compress(text)


@pytest.mark.parametrize("body", [b'{"facts": ' + b"[" * DEEP + b"]" * DEEP + b"}", b'{"facts": NaN}',
                                  b'{"facts": [1, 2]}', b'{"host": "x", "facts": {"os": 5}}', b"\xff\xfe"],
                         ids=["deep", "nan", "facts-a-list", "os-a-number", "not-utf8"])
def test_a_stored_snapshot_body_that_is_not_a_snapshot_is_bad_input_for_scan_and_trend(store: Path, tmp_path: Path,
                                                                                       body: bytes) -> None:
    conn = sqlite3.connect(store, isolation_level=None)
    conn.execute("UPDATE snapshots SET body = ?", (_blob(body),))
    conn.close()
    for argv in (scan_argv(store, tmp_path / "out"),
                 ("history", "trend", "facts.kernel.mem_total_kb", "--store", str(store))):
        code, text = cli(*argv)
        assert code == 2, f"{argv}: {text}"
        assert str(store) in text and "Traceback" not in text


def test_a_legit_store_still_opens_after_the_checks(store: Path) -> None:
    code, text = cli("history", "list", "--store", str(store), "--json")
    assert code == 0, text
    assert [s["state"] for s in json.loads(text)["scans"]] == ["complete"]
    code, text = cli("history", "show", "latest", "--store", str(store), "--json")
    assert code == 0 and json.loads(text)["findings_detail"], text


def test_history_import_of_a_report_listing_a_host_twice_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    doc = json.loads(REPORT.read_text())
    save_scan(folder, {**doc, "generated_at": "2026-11-01T00:00:00Z"})
    twice = {**doc, "generated_at": "2026-11-02T00:00:00Z", "hosts": doc["hosts"] + doc["hosts"][:1]}
    bad = save_scan(folder, twice)
    store = tmp_path / "h.sqlite3"
    code, text = cli("history", "import", str(folder), "--store", str(store))
    assert code == 2, text
    assert str(bad) in text and "twice" in text
    assert not store.exists() or cli("history", "list", "--store", str(store), "--json")[1].count('"id"') == 0


# Waits until the scan under test has committed its `running` row (it is collecting now), then does
# ACTION to the store and touches READY. A real second process, as a user's other scan or a backup is.
WHEN_RUNNING = """
import os, sqlite3, sys, time
store, action, ready = sys.argv[1], sys.argv[2], sys.argv[3]
conn = sqlite3.connect(store, isolation_level=None, timeout=0)
while not conn.execute("SELECT 1 FROM scans WHERE state = 'running'").fetchone():
    time.sleep(0.005)
if action == "lock":
    conn.execute("BEGIN EXCLUSIVE")
elif action == "fill":
    with open(os.path.join(os.path.dirname(store), "filler"), "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"x" * 4096)
        except OSError:  # ENOSPC: the file system is full
            pass
open(ready, "w").close()
time.sleep(60)
"""


def test_a_store_locked_by_another_process_keeps_the_scan_results_and_exits_3(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_conn, "LOCK_WAIT_SECONDS", 1.0)
    ready = tmp_path / "ready"
    locker = subprocess.Popen([sys.executable, "-c", WHEN_RUNNING, str(store), "lock", str(ready)])
    try:
        code, text = cli(*scan_argv(store, tmp_path / "out"))
        assert ready.exists(), "the locker did not take the lock while the scan collected"
    finally:
        locker.kill()
        locker.wait()
    assert code == 3, text
    assert "Traceback" not in text and "internal error" not in text
    lines = [line for line in text.splitlines() if str(store) in line and "locked" in line]
    assert len(lines) == 1, text  # one clear message naming the store
    report = json.loads((tmp_path / "out" / "report.json").read_text())  # the results are kept
    assert report["hosts"][0]["name"] == "local" and report["findings"]
    assert "waited 1 s" in lines[0]
    code, text = cli("history", "list", "--store", str(store), "--json")  # the store is intact
    assert code == 0 and json.loads(text)["scans"][0]["state"] == "complete", text


def _in_mount_namespace(script: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.strip()}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["unshare", "-m", "sh", "-euc", script], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)


def test_a_full_disk_under_the_store_is_one_line_and_exit_3_with_the_reports_written(legit: Path,
                                                                                     tmp_path: Path) -> None:
    """ENOSPC for real: the store on a small tmpfs (in a private mount namespace) filled while the scan collects.
    The filler is ended by its pid (`sh` has no job control, so `kill %1` left it to sleep its 60 s out)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    store = disk / "h.sqlite3"
    out = tmp_path / "out"
    (tmp_path / "filler.py").write_text(WHEN_RUNNING)
    done = _in_mount_namespace(f"""
mount -t tmpfs -o size=2m tmpfs {disk}
cp {legit} {store}
{sys.executable} {tmp_path}/filler.py {store} fill {tmp_path}/ready &
filler=$!
set +e
{sys.executable} -m auditor.cli {' '.join(scan_argv(store, out))}
echo "exit=$?"
kill $filler
""")
    text = done.stdout + done.stderr
    assert (tmp_path / "ready").exists(), text
    assert "exit=3" in text, text
    assert "Traceback" not in text and "internal error" not in text
    assert len([line for line in text.splitlines() if str(store) in line and "full" in line]) == 1, text
    assert json.loads((out / "report.json").read_text())["hosts"][0]["name"] == "local"


def test_a_store_on_a_read_only_file_system_is_refused_before_any_host(legit: Path, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    shutil.copyfile(legit, ro / "h.sqlite3")
    out = tmp_path / "out"
    done = _in_mount_namespace(f"""
mount --bind {ro} {ro}
mount -o remount,bind,ro {ro}
set +e
{sys.executable} -m auditor.cli {' '.join(scan_argv(ro / "h.sqlite3", out))}
echo "exit=$?"
""")
    text = done.stdout + done.stderr
    assert "exit=2" in text and str(ro / "h.sqlite3") in text and "Traceback" not in text, text
    assert not out.exists()


# Takes the store's write lock and holds it for the run under test (a user's other scan, a backup).
HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=0)
conn.execute("BEGIN EXCLUSIVE")
open(sys.argv[2], "w").close()
time.sleep(60)
"""


def _analyze_argv(snapshots: Path, store: Path, out: Path) -> tuple[str, ...]:
    return ("analyze", str(snapshots), "--jobs", "1", "--store", str(store), "--format", "json", "--out", str(out))


@pytest.fixture()
def snapshots(tmp_path: Path) -> Path:
    folder = tmp_path / "snapshots"
    folder.mkdir()
    shutil.copyfile(ROOT / "tests" / "data" / "snapshots" / "fleet-a1.json", folder / "a1.json")
    return folder


@pytest.mark.parametrize("command", ["scan", "analyze"])
def test_a_store_locked_before_the_run_begins_still_gives_the_reports(
        store: Path, tmp_path: Path, snapshots: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """The lock is held before the run opens the store: the run goes on without history, writes its
    reports and says once that it is not recorded; findings still give 1, else 3 (never 2 or 4)."""
    out, bare = tmp_path / "out", tmp_path / "bare"
    argv = scan_argv(store, out) if command == "scan" else _analyze_argv(snapshots, store, out)
    unlocked = [a if a != str(store) else "--no-store" for a in argv if a != "--store"]
    unlocked = [a if a != str(out) else str(bare) for a in unlocked]
    free_code, free_text = cli(*unlocked)
    assert free_code in (0, 1), free_text
    monkeypatch.setattr(store_conn, "LOCK_WAIT_SECONDS", 1.0)
    ready = tmp_path / "ready"
    locker = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(store), str(ready)])
    try:
        while not ready.exists():
            assert locker.poll() is None, "the locker ended before it held the lock"
            time.sleep(0.01)
        code, text = cli(*argv)
    finally:
        locker.kill()
        locker.wait()
    assert code == (1 if free_code == 1 else 3), text
    assert "Traceback" not in text and "internal error" not in text
    lines = [line for line in text.splitlines() if str(store) in line and "locked" in line]
    assert len(lines) == 1 and "not recorded" in lines[0], text
    assert "recorded as scan" not in text
    report = json.loads((out / "report.json").read_text())
    assert [h["name"] for h in report["hosts"]] == [h["name"] for h in json.loads(
        (bare / "report.json").read_text())["hosts"]]


def test_analyze_whose_reports_cannot_be_written_still_records_its_results(legit: Path, tmp_path: Path,
                                                                          snapshots: Path) -> None:
    """ENOSPC for real under --out (a full 64 KiB tmpfs in a private mount namespace): exit 3, and the
    analysis recorded in the store as scan records its results."""
    out = tmp_path / "out"
    out.mkdir()
    store = tmp_path / "h.sqlite3"
    shutil.copyfile(legit, store)
    done = _in_mount_namespace(f"""
mount -t tmpfs -o size=64k tmpfs {out}
set +e
dd if=/dev/zero of={out}/filler bs=4k 2>/dev/null
{sys.executable} -m auditor.cli {' '.join(_analyze_argv(snapshots, store, out))} --format json,html
echo "exit=$?"
""")
    text = done.stdout + done.stderr
    assert "exit=3" in text, text
    assert "Traceback" not in text and "internal error" not in text
    code, listing = cli("history", "list", "--store", str(store), "--json")
    last = max(json.loads(listing)["scans"], key=lambda scan: scan["id"])
    assert code == 0 and last["source"] == "analyze" and last["state"] == "complete", listing
    assert last["hosts"] == 1


def test_a_store_on_a_read_only_file_system_is_read_by_every_history_command(legit: Path, tmp_path: Path) -> None:
    """A mounted backup: nothing can write it, so the readers read it as it is (list, show, trend, report)."""
    ro = tmp_path / "ro & #1?"  # characters a SQLite URI must have quoted
    ro.mkdir()
    store = ro / "h.sqlite3"
    shutil.copyfile(legit, store)
    before = store.read_bytes()
    commands = [["list", "--json"], ["show", "latest", "--json"], ["trend", "facts.kernel.mem_total_kb", "--json"],
                ["report", "--format", "json"]]
    runs = "\n".join(f"{sys.executable} -m auditor.cli history {' '.join(c)} --store '{store}' > '{tmp_path}/{i}.out'"
                     f"; echo \"exit{i}=$?\"" for i, c in enumerate(commands))
    done = _in_mount_namespace(f"""
mount --bind '{ro}' '{ro}'
mount -o remount,bind,ro '{ro}'
set +e
{runs}
""")
    text = done.stdout + done.stderr
    for i, command in enumerate(commands):
        assert f"exit{i}=0" in text, (command, text)
        json.loads((tmp_path / f"{i}.out").read_text())
    assert json.loads((tmp_path / "1.out").read_text())["hosts_detail"][0]["name"] == "local"
    assert store.read_bytes() == before and not list(ro.glob("*-wal")) and not list(ro.glob("*-shm"))
