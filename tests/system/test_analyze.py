"""`ami-auditor analyze DIR`: saved snapshots judged, compared and reported, streamed over worker processes.

The merged result must be exactly what the scan pipeline's stages give on the same snapshots in memory
(findings, fleet findings, waivers, chains, drift, AZ comparison, symptom ranking), whatever the number of
workers and batches; a file that is not a valid snapshot is that host's error (exit 3), never the end of
the run; bad input exits 2 before any snapshot is read, with nothing written."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from auditor.compare.normalize import normalize, stable_key
from auditor.context import Env
from auditor.evaluate import files
from auditor.evaluate.core import EvalPlan, evaluate
from auditor.history.feed import Feed
from auditor.models import HostResult, HostSpec
from auditor.options import AnalyzeOptions, CompareOptions, HistoryOptions, JudgeOptions, RenderOptions
from auditor.reportdoc import facts_summary, report_to_dict, validate_report
from auditor.run import analyze as analysis_run
from tests.paths import ROOT

REPO = ROOT
FLEET = REPO / "tests" / "data" / "compare" / "fleet"
WAIVERS = """\
waivers:
  - {rule: provenance.binary-unknown-origin, labels: {az: us-east-1a}, item: ecs-init,
     reason: vendor binary, expires: 2999-01-01}
"""


def _fleet(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """n snapshots from the real fleet captures: a few configurations, per-host volatile noise, shared keys."""
    rng = random.Random(seed)
    bases = [json.loads((FLEET / f"{name}.json").read_text()) for name in ("a1", "a2", "b1", "b3", "golden")]
    out = []
    for i in range(n):
        s = copy.deepcopy(rng.choice(bases))
        s["name"] = f"h{i:04d}"
        s["host"]["hostname"] = f"ip-10-0-0-{i % 7}"  # shared by several hosts: a fleet rule's finding
        for u in s["facts"]["systemd"]["units"]:
            u["main_pid"] = rng.randrange(1, 1 << 22)
            u["restarts"] = rng.choice([0, 0, 0, 1, 4])
        for b in s["facts"]["binaries"]:
            b["mtime"] = rng.randrange(1 << 31)
        s["facts"]["cgroups"]["memory"]["dying"] = rng.randrange(5000)
        if i % 9 == 0:
            s["facts"]["kernel"]["sysctls"]["vm.swappiness"] = "10"  # a second configuration per base
        if i % 11 == 0:
            s["facts"]["systemd"]["units"].reverse()  # another stable key, the same normalized view
        if i % 13 == 0:
            s["facts"]["systemd"]["units"][0].pop("unit_file_state", None)  # a row lacking a field
        out.append(s)
    return out


def _write(snaps: list[dict[str, Any]], d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for s in snaps:
        (d / f"{s['name']}.json").write_text(json.dumps(s))
    return d


def _options(dirs: list[Path], tmp: Path, jobs: int, **compare: Any) -> AnalyzeOptions:
    waivers = tmp / "waivers.yaml"
    waivers.write_text(WAIVERS)
    return AnalyzeOptions(dirs=tuple(map(str, dirs)), jobs=jobs, judge=JudgeOptions(waivers=(str(waivers),)),
                          compare=CompareOptions(**compare), render=RenderOptions(formats="json", out=str(tmp / "out")),
                          history=HistoryOptions(no_store=True))  # compared with a store-less evaluation


def _analyzed(opts: AnalyzeOptions) -> dict[str, Any]:
    """Run the analysis in this process (workers fork from it) and read the JSON report it wrote."""
    code = analysis_run.analyze(opts, Env(io.StringIO(), io.StringIO()))
    assert opts.render.out is not None
    doc = json.loads((Path(opts.render.out) / "report.json").read_text())
    validate_report(doc)
    assert code in (0, 1)
    return doc


def _in_memory(snaps: list[dict[str, Any]], opts: AnalyzeOptions) -> dict[str, Any]:
    """The same snapshots held in memory through one core in this process, in order (no workers, no files)."""
    plan = analysis_run.prepare(opts)
    hosts = [HostResult(HostSpec(s["name"], s["target"], dict(s["labels"])), "ok", None, copy.deepcopy(s), 0.0)
             for s in snaps]
    report = evaluate(EvalPlan(plan.judge, plan.compare, "high"), hosts, "x", hook=Feed(None))
    return json.loads(json.dumps(report_to_dict(report)))


SECTIONS = ("findings", "drift", "comparison", "symptom", "chains", "rules", "summary")


@pytest.mark.parametrize("jobs, batch", [(1, 500), (2, 37)])
def test_analyze_gives_what_the_scan_stages_give_on_the_same_snapshots(tmp_path: Path, jobs: int,
                                                                        batch: int, monkeypatch) -> None:
    monkeypatch.setattr(files, "BATCH", batch)
    snaps = _fleet(180)
    d = _write(snaps, tmp_path / "snaps")
    baseline = tmp_path / "golden.yaml"
    done = subprocess.run([sys.executable, "-m", "auditor.cli", "baseline", "capture", "--snapshot",
                           str(FLEET / "golden.json"), "-o", str(baseline)], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    opts = _options([d], tmp_path, jobs, baseline=str(baseline), group_by="az", symptom="systemd.unit-crash-looping")
    got = _analyzed(opts)
    want = _in_memory(snaps, opts)
    for section in SECTIONS:
        if section == "summary":
            got[section].pop("duration_s", None), want[section].pop("duration_s", None)
        assert got[section] == want[section], section
    assert [h["name"] for h in got["hosts"]] == [s["name"] for s in snaps]  # file order
    assert [h["facts_summary"] for h in got["hosts"]] == [facts_summary(s) for s in snaps]
    # the run found what the fleet holds: crash loops, a fleet rule over shared hostnames, a waiver, drift, splits
    rules = {f["rule"] for f in got["findings"]}
    assert {"systemd.unit-crash-looping", "fleet.duplicate-hostname"} <= rules
    assert any(f["waived"] for f in got["findings"]) and got["drift"] and got["comparison"]["splits"]


def test_a_file_that_is_not_a_snapshot_is_that_hosts_error_and_the_rest_is_judged(tmp_path: Path) -> None:
    d = _write(_fleet(6), tmp_path / "snaps")
    (d / "cut.json").write_text('{"schema": "ami-auditor/snapshot/1",\n "name": "cut", "facts": {')
    (d / "other.json").write_text('{"hello": 1}')
    (d / "nan.json").write_text('{"schema": "ami-auditor/snapshot/1", "x": NaN}')
    os.mkfifo(d / "fifo.json")  # would block a reader that does not check the file type
    (d / "zero.json").symlink_to("/dev/zero")
    second = copy.deepcopy(json.loads((d / "h0001.json").read_text()))
    (d / "zz-dup.json").write_text(json.dumps(second))  # names host h0001 again
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "auditor.cli", "analyze", str(d), "--format", "json,html",
                           "--out", str(out), "--jobs", "2", "--fail-on", "critical"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr  # incomplete (findings below --fail-on)
    doc = json.loads((out / "report.json").read_text())
    status = {h["name"]: (h["status"], h["error"]) for h in doc["hosts"]}
    assert status["cut"][0] == "error" and "cut.json:2:" in status["cut"][1]
    assert status["other"][0] == "error" and "not a snapshot" in status["other"][1]
    assert status["nan"][0] == "error" and "NaN" in status["nan"][1]
    assert status["fifo"][0] == "error" and status["zero"][0] == "error"
    assert [h for h in doc["hosts"] if h["name"] == "h0001"][1]["error"].startswith("duplicate host name")
    assert sum(1 for h in doc["hosts"] if h["status"] == "ok") == 6
    assert {f["host"] for f in doc["findings"]} <= {f"h{i:04d}" for i in range(6)}
    once = [(f["rule"], f["item"]) for f in doc["findings"] if f["host"] == "h0001"]
    assert once and len(once) == len(set(once)), "the duplicate file's findings were added too"
    assert (out / "report.html").is_file()


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "999"], "--jobs"),
    (["--rules", "/nonexistent-rules"], "nonexistent-rules"),
    (["--baseline", "/nonexistent.yaml"], "nonexistent.yaml"),
    (["--group-by", "facts.nope"], "--group-by"),
])
def test_bad_input_exits_2_before_reading_any_snapshot_and_writes_nothing(tmp_path: Path, argv: list[str],
                                                                          message: str) -> None:
    d = _write(_fleet(2), tmp_path / "snaps")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "auditor.cli", "analyze", str(d), "--out", str(out), *argv],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert not out.exists() or not any(out.iterdir())


def test_a_directory_with_no_snapshots_or_none_at_all_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "empty", tmp_path / "missing"):
        done = subprocess.run([sys.executable, "-m", "auditor.cli", "analyze", str(target)], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and str(target) in done.stderr, done.stderr


def test_the_stable_key_follows_exactly_what_normalize_reads() -> None:
    base = json.loads((FLEET / "b1.json").read_text())
    twin = copy.deepcopy(base)
    for u in twin["facts"]["systemd"]["units"]:
        u["main_pid"], u["restarts"], u["active_state"] = 1, 99, "failed"  # volatile: normalize ignores them
    twin["host"]["hostname"] = "elsewhere"
    assert stable_key(twin) == stable_key(base) and normalize(twin).identity() == normalize(base).identity()
    changed = copy.deepcopy(base)
    changed["facts"]["systemd"]["units"][0]["unit_file_state"] = "masked"
    assert stable_key(changed) != stable_key(base) and normalize(changed).identity() != normalize(base).identity()
    gone = copy.deepcopy(base)
    gone["facts"]["kernel"] = None  # unknown area
    assert stable_key(gone) != stable_key(base)
    assert stable_key({**base, "not_applicable": [["not", "hashable"]]}) is None


def _many(d: Path, n: int) -> Path:
    """n snapshot files (hard links of a few real ones, renamed hosts are not needed: names come from files)."""
    d.mkdir(parents=True, exist_ok=True)
    sources = [_write([s], d / "src") / f"{s['name']}.json" for s in _fleet(4)]
    for i in range(n):
        snap = json.loads(sources[i % 4].read_text())
        snap["name"] = f"m{i:05d}"
        (d / f"m{i:05d}.json").write_text(json.dumps(snap))
    return d


def test_workers_over_several_batches_finish_and_are_reaped(tmp_path: Path) -> None:
    """A real pool (more files than one batch) as the CLI runs it, with its signal handlers installed."""
    d = _many(tmp_path / "many", files.BATCH * 2 + 37)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "auditor.cli", "analyze", str(d), "--jobs", "2", "--format", "json",
                           "--out", str(out), "--fail-on", "critical"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((out / "report.json").read_text())
    assert len(doc["hosts"]) == files.BATCH * 2 + 37 and all(h["status"] == "ok" for h in doc["hosts"])


def _both_workers(parent: int) -> set[int]:
    """The pids of `parent`'s two workers, once both exist."""
    children: set[int] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(children) < 2:
        try:
            children = {int(c) for c in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()}
        except OSError:
            break
        time.sleep(0.05)
    assert len(children) == 2, "the workers never started"
    return children


def test_sigterm_stops_the_analysis_and_its_workers(tmp_path: Path) -> None:
    d = _many(tmp_path / "many", files.BATCH * 6)
    proc = subprocess.Popen([sys.executable, "-m", "auditor.cli", "analyze", str(d), "--jobs", "2", "--out",
                             str(tmp_path / "out")], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    children = _both_workers(proc.pid)
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 143, proc.stderr.read() if proc.stderr else ""
    time.sleep(0.5)
    alive = [c for c in children if Path(f"/proc/{c}").exists()
             and Path(f"/proc/{c}/stat").read_text().split()[2] != "Z"]
    assert alive == [], "workers left running"
    assert not (tmp_path / "out" / "report.json").exists()


def test_kill_9_of_analyze_takes_its_workers_with_it(tmp_path: Path) -> None:
    """Issue 37 item 7: SIGKILL leaves no handler to stop the pool; the workers (busy in their batches) lived on
    for many minutes. They ask for SIGKILL at their parent's death (PR_SET_PDEATHSIG)."""
    d = _many(tmp_path / "many", files.BATCH * 6)
    proc = subprocess.Popen([sys.executable, "-m", "auditor.cli", "analyze", str(d), "--jobs", "2", "--no-store",
                             "--out", str(tmp_path / "out")], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    children = _both_workers(proc.pid)
    proc.kill()
    proc.wait(timeout=30)

    def alive() -> list[int]:
        return [c for c in children if Path(f"/proc/{c}").exists() and _state(c) not in ("Z", "X")]

    deadline = time.monotonic() + 10  # a bound, not a timing: they used to live on for minutes
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    left = alive()
    for pid in left:  # do not leave them behind this test either
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], "workers outlived their parent"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def test_while_the_reports_are_written_each_finding_is_held_once(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The document's finding and drift rows are made from the report's own objects as they are written
    (reportdoc.Rows): when writing starts each host's Finding and DriftItem is held once and no row of them
    is (nothing let go, nothing held twice), and the terminal summary, told before, still counts them all."""
    import gc

    from auditor.models import DriftItem, Finding
    from auditor.render import stage as render_stage

    snaps = _fleet(12)
    d = _write(snaps, tmp_path / "snaps")
    baseline = tmp_path / "golden.yaml"
    subprocess.run([sys.executable, "-m", "auditor.cli", "baseline", "capture", "--snapshot",
                    str(FLEET / "golden.json"), "-o", str(baseline)], cwd=REPO, capture_output=True, text=True,
                   check=True)
    opts = _options([d], tmp_path, jobs=1, group_by="az", baseline=str(baseline))
    names = {s["name"] for s in snaps}
    alive: list[tuple[int, int]] = []
    write = render_stage.write

    def counting(plan: Any, doc: dict[str, Any], env: Any = None) -> Any:
        assert doc["findings"] and doc["drift"]
        objects = sum(1 for o in gc.get_objects() if isinstance(o, (Finding, DriftItem)) and o.host in names)
        rows = sum(1 for o in gc.get_objects() if type(o) is dict and isinstance(o.get("host"), str)
                   and o["host"] in names and ("rule" in o or "expected" in o))  # a finding or drift row
        alive.append((objects, rows))
        return write(plan, doc, env)

    monkeypatch.setattr(render_stage, "write", counting)
    out = io.StringIO()
    code = analysis_run.analyze(opts, Env(out, io.StringIO()))
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert alive == [(len(doc["findings"]) + len(doc["drift"]), 0)]
    summary = out.getvalue()
    for severity in ("critical", "high", "medium", "low", "info"):
        count = sum(1 for f in doc["findings"] if not f["waived"] and f["severity"] == severity)
        assert f"{count} {severity}" in summary
    assert f"drift: {len(doc['drift'])}" in summary and f"exit code {code}" in summary
    assert f"waived: {sum(f['waived'] for f in doc['findings'])}" in summary
