"""One evaluation core: the same snapshots through `scan` (hosts answered by a transport that replays
recorded real probe output), `analyze` with 1 and 2 workers, and `rules check --snapshot` give the same
findings, drift, comparison, symptom ranking and chains; and `analyze` records history, so a second
analysis sees trend facts and first-seen times.

The replay transport stands in for reaching hosts (the one part not under test here): collect, parse,
judge, compare and render are the real code; the outputs are tests/data/probe's recorded ones, re-framed
with each run's own nonce."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor.cli import main
from auditor.collect import framing
from auditor.context import Env
from auditor.evaluate import files
from auditor.models import CommandResult, HostSpec
from auditor.reportdoc import validate_report
from auditor.run import live_hosts
from tests.framing_fixtures import FIXTURE_NONCE, renonce
from tests.paths import DATA

PROBE = DATA / "probe"
OSES = ("al2", "al2023", "ubuntu2004-dlami")
SECTIONS = ("findings", "drift", "comparison", "symptom", "chains", "rules")
SYMPTOM = "systemd.unit-crash-looping"
HOSTS = 12


class Replay:
    """A host that answers the probe with a recorded real host's output, framed with this run's nonce."""

    name = "replay"

    def __init__(self, raw: str):
        self.raw = raw

    def run(self, request: Any, args: Any = (), deadline_s: float = 0.0, **_: Any) -> CommandResult:
        nonce = getattr(request, "nonce", None) or framing.nonce_of(request)  # a ProbeRequest, or the script
        assert nonce is not None
        return CommandResult(renonce(self.raw, FIXTURE_NONCE, nonce), "", 0, 0.01)

    def close(self) -> None:
        pass


@pytest.fixture
def replayed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An inventory of 12 hosts in two AZs, each answering with one of three recorded OS outputs."""
    raws = {os_: (PROBE / os_ / "raw.txt").read_text() for os_ in OSES}

    def open_transport(spec: HostSpec) -> Replay:
        return Replay(raws[spec.labels["os"]])

    monkeypatch.setattr(live_hosts, "open_transport", open_transport)
    hosts = [{"name": f"h{i:02d}", "target": "local",  # AZ b all Ubuntu, AZ a two Amazon Linux: AZ splits
              "labels": {"az": f"us-east-1{'ab'[i % 2]}", "os": OSES[2] if i % 2 else OSES[(i // 2) % 2]}}
             for i in range(HOSTS)]
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": hosts}))
    return inventory


def _run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    assert code in (0, 1), err.getvalue()
    return code, out.getvalue()


def _report(out: Path) -> dict[str, Any]:
    doc = json.loads((out / "report.json").read_text())
    validate_report(doc)
    return doc


def _sections(doc: dict[str, Any]) -> dict[str, Any]:
    """The evaluated sections, without the store's first-seen times (a store-less run has none)."""
    got = {s: doc[s] for s in SECTIONS}
    for row in (*got["findings"], *got["drift"]):
        row.pop("first_seen", None)
    return got


def test_scan_analyze_and_rules_check_agree_on_the_same_snapshots(replayed: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    snaps = tmp_path / "snaps"
    _run("collect", "-i", str(replayed), "-o", str(snaps))
    assert len(list(snaps.glob("*.json"))) == HOSTS
    baseline = tmp_path / "golden.yaml"
    _run("baseline", "capture", "--snapshot", str(snaps / "h00.json"), "-o", str(baseline))
    compare = ("--baseline", str(baseline), "--group-by", "az", "--symptom", SYMPTOM, "--format", "json")
    _, scan_text = _run("scan", "-i", str(replayed), "--store", str(tmp_path / "scan.sqlite3"), *compare,
                        "--out", str(tmp_path / "scan"))
    scan = _report(tmp_path / "scan")
    monkeypatch.setattr(files, "BATCH", 5)  # two workers over three batches: merged parts out of order
    runs = {jobs: _report_of_analyze(snaps, tmp_path / f"analyze{jobs}", jobs, compare) for jobs in (1, 2)}
    want = _sections(scan)
    assert want["findings"] and want["drift"] and want["comparison"]["splits"] and want["symptom"]["ranked"]
    assert want["chains"], "the recorded crash loop makes a chain"
    for jobs, doc in runs.items():
        assert _sections(doc) == want, f"analyze --jobs {jobs}"
        assert [h["name"] for h in doc["hosts"]] == [h["name"] for h in scan["hosts"]]
        assert [h["facts_summary"] for h in doc["hosts"]] == [h["facts_summary"] for h in scan["hosts"]]
    _, checked = _run("rules", "check", "rules",
                      *[a for i in range(HOSTS) for a in ("--snapshot", str(snaps / f"h{i:02d}.json"))])
    assert _rows(checked) == {(f["severity"].upper(), f["host"], f["rule"], f["item"] or "")
                              for f in scan["findings"]}


def _report_of_analyze(snaps: Path, out: Path, jobs: int, compare: tuple[str, ...]) -> dict[str, Any]:
    _run("analyze", str(snaps), "--jobs", str(jobs), "--no-store", *compare, "--out", str(out))
    return _report(out)


def _rows(text: str) -> set[tuple[str, str, str, str]]:
    """(severity, host, rule, item) of every finding `rules check --snapshot` printed."""
    rows = set()
    host = ""
    for line in text.splitlines():
        if m := re.match(r"^\S+ \((\S+)\): \d+ finding", line):
            host = m.group(1)
        elif m := re.match(r"^  \[(\w+) *\] (?:(h\d\d): )?(\S+?)(?: \[(.*?)\])?: ", line):
            rows.add((m.group(1), m.group(2) or host, m.group(3), m.group(4) or ""))
    return rows


def _later(src: Path, dst: Path, hours: int, more_dying: int) -> Path:
    """The same hosts `hours` later on the same boot, with `more_dying` more dying memcgs each."""
    dst.mkdir()
    for path in sorted(src.glob("*.json")):
        snap = json.loads(path.read_text())
        at = dt.datetime.fromisoformat(snap["collected_at"].replace("Z", "+00:00")) + dt.timedelta(hours=hours)
        snap["collected_at"] = at.isoformat().replace("+00:00", "Z")
        memory = snap["facts"]["cgroups"]["memory"]
        if isinstance(memory.get("dying"), int):
            memory["dying"] += more_dying
        (dst / path.name).write_text(json.dumps(snap))
    return dst


def test_analyze_records_history_trends_and_first_seen_times_follow(replayed: Path, tmp_path: Path) -> None:
    first = tmp_path / "first"
    _run("collect", "-i", str(replayed), "-o", str(first))
    store = tmp_path / "history.sqlite3"
    _run("analyze", str(first), "--jobs", "2", "--store", str(store), "--format", "json", "--out",
         str(tmp_path / "r1"))
    one = _report(tmp_path / "r1")
    assert one["history"]["scan_id"] == 1 and one["history"]["previous_scan_id"] is None
    assert not any(f["rule"] == "trends.dying-memcg-growth" for f in one["findings"])
    second = _later(first, tmp_path / "second", hours=1, more_dying=5000)
    _run("analyze", str(second), "--jobs", "2", "--store", str(store), "--format", "json", "--out",
         str(tmp_path / "r2"))
    two = _report(tmp_path / "r2")
    assert two["history"]["previous_scan_id"] == 1
    growth = {f["host"]: f for f in two["findings"] if f["rule"] == "trends.dying-memcg-growth"}
    assert set(growth) == {h["name"] for h in two["hosts"]}, "every host grew 5,000 dying memcgs in an hour"
    assert all(f["evidence"]["delta"] == 5000 and f["evidence"]["previous_scan"] == 1 for f in growth.values())
    recurring = [f for f in two["findings"] if f["rule"] == SYMPTOM]
    assert recurring and all(f["first_seen"] == one["generated_at"] for f in recurring)
    assert all(f["first_seen"] == two["generated_at"] for f in growth.values())
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT id, state, source, hosts FROM scans ORDER BY id").fetchall() == [
            (1, "complete", "analyze", HOSTS), (2, "complete", "analyze", HOSTS)]
        bodies = conn.execute("SELECT count(*) FROM snapshots").fetchone()[0]
    assert bodies == len(OSES), "stable bodies stored once per distinct content"


def test_a_duplicate_host_is_an_error_and_the_body_it_packed_is_still_stored(replayed: Path, tmp_path: Path) -> None:
    """b.json names h00 again with h01's content, the first of that content this process packed; c.json (h01)
    then needs the body the refused duplicate carried."""
    snaps = tmp_path / "snaps"
    _run("collect", "-i", str(replayed), "-o", str(snaps))
    one, two = (json.loads((snaps / f"{n}.json").read_text()) for n in ("h00", "h01"))
    d = tmp_path / "dup"
    d.mkdir()
    (d / "a.json").write_text(json.dumps(one))
    (d / "b.json").write_text(json.dumps({**two, "name": "h00"}))
    (d / "c.json").write_text(json.dumps(two))
    store = tmp_path / "history.sqlite3"
    out, err = io.StringIO(), io.StringIO()
    code = main(["analyze", str(d), "--jobs", "1", "--store", str(store), "--format", "json", "--out",
                 str(tmp_path / "r")], Env(stdout=out, stderr=err))
    assert code == 1, err.getvalue()  # the recorded hosts' findings fail; they take precedence over incomplete
    doc = _report(tmp_path / "r")
    assert [(h["name"], h["status"]) for h in doc["hosts"]] == [("h00", "ok"), ("h00", "error"), ("h01", "ok")]
    assert doc["hosts"][1]["error"].startswith("duplicate host name")
    with sqlite3.connect(store) as conn:
        rows = conn.execute("SELECT host, snapshot IS NOT NULL FROM scan_hosts ORDER BY rowid").fetchall()
        assert rows == [("h00", 1), ("h01", 1)]  # the duplicate is in the report, not a second row
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 2
