"""Scheduled scans on the real fleet: a crash loop judged between two scans, first-seen times that do
not move, a waiver on the trend rule, and a scan SIGKILLed midway that leaves the store intact."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from auditor.reportdoc import validate_report
from tests.fleet import AZ_B_HOSTS, Fleet
from tests.paths import ROOT

REPO = ROOT
# Seconds between the two scans (the "a minute apart"; shorter keeps CI lean — ecs.service
# restarts every ~1-2 s, so even 10 s gives several restarts).
INTERVAL_S = float(os.environ.get("AMI_AUDITOR_TREND_INTERVAL_S", "12"))
BETWEEN = ("trends.unit-crash-loop-between-scans", "trends.unit-flapping")


def cli(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def scan(fleet: Fleet, store: Path, out: Path, *extra: str) -> dict[str, Any]:
    done = cli("scan", "-i", str(fleet.inventory_path), "--store", str(store), "--format", "json",
               "--out", str(out), *extra)
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr
    doc = json.loads((out / "report.json").read_text())
    validate_report(doc)
    return doc


def between(doc: dict[str, Any], waived: bool = False) -> dict[str, dict[str, Any]]:
    return {f["host"]: f for f in doc["findings"]
            if f["rule"] in BETWEEN and f["item"] == "ecs.service" and f["waived"] == waived}


def test_two_real_scans_find_the_crash_loop_between_them(fleet_ready_crashloop: Fleet, tmp_path: Path) -> None:
    fleet, store = fleet_ready_crashloop, tmp_path / "history.sqlite3"
    first = scan(fleet, store, tmp_path / "r1")
    assert between(first) == {}  # one scan alone has no "between"
    time.sleep(INTERVAL_S)
    second = scan(fleet, store, tmp_path / "r2")
    found = between(second)
    assert set(found) == set(AZ_B_HOSTS), sorted(found)  # b1–b3 only: AZ-a hosts do not loop
    for f in found.values():
        assert f["severity"] == "high"
        assert f["evidence"]["restarts_delta"] >= 3
        assert f["evidence"]["restarts_now"] - f["evidence"]["restarts_previous"] == f["evidence"]["restarts_delta"]
        assert f["evidence"]["previous_scan"] == first["history"]["scan_id"]
        assert f["first_seen"] == second["generated_at"]  # new in this scan
    # first-seen times do not move: what the first scan found keeps its time
    before = {(f["host"], f["rule"], f["item"]): f["first_seen"] for f in first["findings"]}
    kept = [f for f in second["findings"] if (f["host"], f["rule"], f["item"]) in before]
    assert any(f["rule"] == "systemd.unit-crash-looping" for f in kept)
    for f in kept:
        assert f["first_seen"] == before[(f["host"], f["rule"], f["item"])] == first["generated_at"]

    waivers = tmp_path / "waivers.yaml"
    waivers.write_text("waivers:\n"
                       "  - {rule: trends.unit-crash-loop-between-scans, labels: {az: us-east-1b}, item: ecs.service,\n"
                       "     reason: disabled in the next image, expires: 2999-01-01}\n"
                       "  - {rule: trends.unit-flapping, labels: {az: us-east-1b}, item: ecs.service,\n"
                       "     reason: disabled in the next image, expires: 2999-01-01}\n")
    time.sleep(INTERVAL_S)  # the waived findings need restarts between scans 2 and 3 as well
    third = scan(fleet, store, tmp_path / "r3", "--waivers", str(waivers))
    assert between(third) == {}
    assert set(between(third, waived=True)) == set(AZ_B_HOSTS)
    listing = json.loads(cli("history", "list", "--store", str(store), "--json").stdout)
    assert [s["state"] for s in listing["scans"]] == ["complete"] * 3
    trend = cli("history", "trend", "facts.trends.units[ecs.service].restarts_delta", "--store", str(store),
                "--group-by", "az", "--json")
    assert trend.returncode == 0, trend.stderr
    series = json.loads(trend.stdout)["series"]
    assert series["us-east-1b"][-1] >= 1  # mean restarts between scans over b1–b3
    assert all(v in (None, 0) for group, values in series.items() if group != "us-east-1b" for v in values)


def test_a_scan_killed_midway_leaves_the_store_intact_and_is_marked(fleet: Fleet, tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite3"
    first = scan(fleet, store, tmp_path / "r1")
    findings_before = len(first["findings"])
    proc = subprocess.Popen([sys.executable, "-m", "auditor.cli", "scan", "-i", str(fleet.inventory_path),
                             "--store", str(store)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:  # its `running` row is committed before the first host is contacted
            with sqlite3.connect(store, timeout=5) as conn:
                if conn.execute("SELECT count(*) FROM scans WHERE id = 2 AND state = 'running'").fetchone()[0]:
                    break
            time.sleep(0.05)
        assert proc.poll() is None, "the scan finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    listing = cli("history", "list", "--store", str(store), "--json")
    assert listing.returncode == 0, listing.stderr
    scans = json.loads(listing.stdout)["scans"]
    assert [(s["id"], s["state"]) for s in scans] == [(1, "complete"), (2, "interrupted")]
    assert scans[0]["findings"] == first["summary"]["findings"]
    with sqlite3.connect(store) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM findings WHERE scan_id = 1").fetchone()[0] == findings_before
        assert conn.execute("SELECT count(*) FROM scan_hosts WHERE scan_id = 2").fetchone()[0] == 0
    third = scan(fleet, store, tmp_path / "r3")  # the next scan works and compares with the last complete one
    assert third["history"]["scan_id"] == 3 and third["history"]["previous_scan_id"] == 1
