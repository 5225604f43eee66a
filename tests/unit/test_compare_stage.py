"""The compare stage as `scan` runs it: real judge rules over the recorded fleet snapshots, then
baseline drift, AZ comparison and symptom ranking into a report that validates against its schema."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from auditor.cli import build_parser, main
from auditor.collect.schema import is_volatile
from auditor.commands.scan import scan_options
from auditor.compare import stage as compare_stage
from auditor.context import Env
from auditor.errors import InputError
from auditor.evaluate.core import EvalPlan, evaluate, failing
from auditor.history.feed import Feed
from auditor.judge import stage as judge_stage
from auditor.models import HostResult, HostSpec, Report
from auditor.options import ScanOptions
from auditor.reportdoc import report_to_dict, validate_report
from tests.paths import DATA

FLEET = DATA / "compare" / "fleet"
HOSTS = ("golden", "a1", "a2", "a3", "b1", "b2", "b3")
CRASH_LOOP = "systemd.unit-crash-looping"


def parse(*argv: str) -> ScanOptions:
    """The typed options the real `scan` command line builds (the target is never contacted here)."""
    return scan_options(build_parser().parse_args(["scan", "local", *argv]))


def capture_golden(tmp_path: Path) -> Path:
    out = tmp_path / "golden.yaml"
    err = io.StringIO()
    code = main(["baseline", "capture", "--snapshot", str(FLEET / "golden.json"), "-o", str(out)],
                Env(stdout=io.StringIO(), stderr=err))
    assert code == 0, err.getvalue()
    return out


def run(*argv: str) -> Report:
    opts = parse(*argv)
    plans = judge_stage.prepare(opts.judge), compare_stage.prepare(opts.compare)
    snaps = [json.loads((FLEET / f"{h}.json").read_text()) for h in HOSTS]
    hosts = [HostResult(HostSpec(s["name"], s["target"], s["labels"]), "ok", None, s) for s in snaps]
    return evaluate(EvalPlan(*plans, fail_on="high"), hosts, "2026-11-29T00:00:00Z", hook=Feed(None))


def test_scan_sections_baseline_drift_az_comparison_and_crash_loop_symptom(tmp_path: Path) -> None:
    golden = capture_golden(tmp_path)
    report = run("--baseline", str(golden), "--group-by", "az", "--symptom", CRASH_LOOP, "--top", "5")
    doc = report_to_dict(report)
    validate_report(doc)
    assert doc["baseline"]["source_host"] == "golden" and doc["baseline"]["path"] == str(golden)
    assert {d["host"] for d in doc["drift"]} == {"a2", "b1", "b2", "b3"}
    assert failing(report)  # high drift trips --fail-on high
    assert [s["subject"] for s in doc["comparison"]["splits"][:2]] == ["binaries:kubelet", "systemd:ecs.service"]
    symptom = doc["symptom"]
    assert symptom["hosts_with"] == ["b1", "b2", "b3"]  # the real rule fired on the crash-looping AZ-b hosts
    top = [(r["path"], r["value"]) for r in symptom["ranked"][:3]]
    assert ("facts.binaries[kubelet].source_host", "dl.k8s.io") in top
    for section in (doc["comparison"]["splits"], doc["comparison"]["outliers"], symptom["ranked"]):
        for item in section:
            assert not is_volatile(item["path"])


def test_a_symptom_nobody_has_is_a_note_not_a_crash() -> None:
    report = run("--symptom", "role=canary", "--group-by", "instance_type")
    assert report.symptom["hosts_with"] == [] and report.symptom["ranked"] == []
    assert any("no host shows the symptom role=canary" in n for n in report.notes)
    assert report.comparison["groups"] == {"p4d.24xlarge": 7} and report.comparison["splits"] == []
    validate_report(report_to_dict(report))


@pytest.mark.parametrize(("argv", "words"), [
    (("--group-by", "facts.systemd.units[x].restarts"), "volatile"),
    (("--group-by", "facts.nope"), "unknown fact path"),
    (("--symptom", "az="), "needs a value"),
    (("--top", "0"), "--top"),
])
def test_bad_compare_options_are_input_errors(argv: tuple[str, ...], words: str) -> None:
    with pytest.raises(InputError, match=words):
        compare_stage.prepare(parse(*argv).compare)


def test_baseline_capture_command_writes_a_loadable_file_and_refuses_bad_sources(tmp_path: Path) -> None:
    path = capture_golden(tmp_path)
    text = path.read_text()
    assert text.startswith("# ami-auditor baseline")
    assert "  facts.systemd.unit_files[ecs.service].state: disabled\n" in text
    assert "host: golden" in text and "ami_id: ami-0c7217cdde317cfec" in text
    err = io.StringIO()
    out = tmp_path / "other.yaml"
    code = main(["baseline", "capture", "-i", str(tmp_path / "missing.yaml"), "-o", str(out)],
                Env(stdout=io.StringIO(), stderr=err))
    assert code == 2 and not out.exists()
    code = main(["baseline", "capture", "local", "--snapshot", str(FLEET / "a1.json"), "-o", str(out)],
                Env(stdout=io.StringIO(), stderr=err))
    assert code == 2 and not out.exists()
