"""The history pictures on the real fleet: two real scans of the crash-looping fleet into one store, then
`history report` and the second scan's own report. The restarts drawn per unit are the restarts systemd
reported (summed over the AZ-b hosts), and the second report carries each host's first-scan numbers."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.fleet import AZ_B_HOSTS, Fleet
from tests.system.test_history_fleet import INTERVAL_S, cli, scan


def test_history_report_draws_what_two_real_scans_recorded(fleet_ready_crashloop: Fleet, tmp_path: Path) -> None:
    fleet, store = fleet_ready_crashloop, tmp_path / "history.sqlite3"
    first = scan(fleet, store, tmp_path / "r1")
    time.sleep(INTERVAL_S)
    second = scan(fleet, store, tmp_path / "r2", "--format", "json,html")
    series = second["history"]["series"]
    assert [s["id"] for s in series["scans"]] == [first["history"]["scan_id"]]
    for host in first["hosts"]:
        if host["status"] == "ok":
            past = series["hosts"][host["name"]]
            assert past["dying_memcgs"] == [host["facts_summary"]["dying_memcgs"]]
            assert past["restarts"] == [host["facts_summary"]["restarts"]]
    assert "pic-host-restarts" in (tmp_path / "r2" / "report.html").read_text(encoding="utf-8")
    done = cli("history", "report", "--store", str(store), "--format", "json")
    assert done.returncode == 0, done.stderr
    trends = json.loads(done.stdout)
    ecs = next(line for line in trends["unit_restarts"]["lines"] if line["name"] == "ecs.service")
    recorded = [sum((h.get("facts_summary") or {}).get("unit_restarts", {}).get("ecs.service", 0)
                    for h in doc["hosts"]) for doc in (first, second)]
    assert ecs["values"] == recorded and recorded[1] > recorded[0] > 0  # the loop keeps restarting
    looping = {h["name"] for h in second["hosts"] if (h.get("facts_summary") or {}).get("unit_restarts")}
    assert set(AZ_B_HOSTS) <= looping
    page = tmp_path / "history.html"
    done = cli("history", "report", "--store", str(store), "--out", str(page))
    assert done.returncode == 0 and "ecs.service" in page.read_text(encoding="utf-8"), done.stderr
