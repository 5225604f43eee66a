"""`--format prom`: a node_exporter textfile that a real exposition-format parser (prometheus_client) reads."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from auditor.cli import main
from auditor.context import Env
from auditor.render.prom_renderer import render
from tests.paths import DATA

DATA = DATA / "reports"


def families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_the_fleet_report_parses_with_prometheus_naming_and_values() -> None:
    doc = json.loads((DATA / "fleet.json").read_text())
    parsed = families(render(doc))
    assert all(name.startswith("ami_auditor_") and not name.endswith("_total") for name in parsed)
    up = {s.labels["host"]: s.value for s in parsed["ami_auditor_host_up"]}
    assert up == {h["name"]: float(h["status"] == "ok") for h in doc["hosts"]}
    findings = parsed["ami_auditor_findings"]
    assert sum(s.value for s in findings) == doc["summary"]["findings"]
    assert {s.labels["severity"] for s in findings} <= {"critical", "high", "medium", "low", "info"}
    loop = {s.labels["host"] for s in findings if s.labels["rule"] == "systemd.unit-crash-looping"}
    assert loop and loop == {s.labels["host"] for s in parsed["ami_auditor_unit_restarts"]}
    dying = {s.labels["host"]: s.value for s in parsed["ami_auditor_dying_memcgs"]}
    assert dying == {h["name"]: h["facts_summary"]["dying_memcgs"] for h in doc["hosts"]
                     if (h.get("facts_summary") or {}).get("dying_memcgs") is not None}
    assert parsed["ami_auditor_scan_exit_code"][0].value == doc["summary"]["exit_code"]


def test_hostile_label_values_stay_inside_their_label() -> None:
    doc = copy.deepcopy(json.loads((DATA / "fleet.json").read_text()))
    evil = 'b1"} 1\nami_auditor_forged 1\n\\'
    for h in doc["hosts"]:
        h["name"] = evil
    for f in doc["findings"]:
        f["host"] = evil
    parsed = families(render(doc))
    assert "ami_auditor_forged" not in parsed
    shown = {s.labels["host"] for s in parsed["ami_auditor_host_up"]}  # one name for all: told apart by #N
    assert shown == {evil} | {f"{evil}#{n}" for n in range(2, len(doc["hosts"]) + 1)}


def test_odd_numbers_in_a_saved_report_become_nan_or_inf_not_a_crash() -> None:
    """Found by the render fuzz: an empty generated_at and a 400-digit duration raised ValueError and
    OverflowError (exit 4); a saved report is untrusted input."""
    import math

    doc = copy.deepcopy(json.loads((DATA / "fleet.json").read_text()))
    doc["generated_at"] = ""
    doc["hosts"][0]["duration_s"] = 10**400
    doc["hosts"][1]["duration_s"] = float("inf")
    parsed = families(render(doc))
    assert math.isnan(parsed["ami_auditor_scan_timestamp_seconds"][0].value)
    durations = [s.value for s in parsed["ami_auditor_host_scan_duration_seconds"]]
    assert math.isnan(durations[0]) and durations[1] == float("inf")


def test_scan_writes_report_prom_atomically(tmp_path: Path) -> None:
    out = tmp_path / "textfile"
    code = main(["scan", "local", "--binary", "sh", "--no-store", "--format", "prom,json", "--out", str(out)],
                Env(io.StringIO(), io.StringIO()))
    assert code in (0, 1)
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.prom"]
    parsed = families((out / "report.prom").read_text())
    assert [s.labels for s in parsed["ami_auditor_host_up"]] == [{"host": "local", "status": "ok"}]
