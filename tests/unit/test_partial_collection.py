"""A host only partly collected is an incomplete scan (exit 3), never a clean one: a section cut off,
timed out, failed or tampered with lands in `probe.failed_areas`; a facility the host does not have
(no systemd) is an answer, not a failure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from auditor import exitcodes
from auditor.collect.snapshot import build_snapshot
from auditor.models import CommandResult, HostResult, HostSpec, Report
from auditor.reportdoc import report_to_dict, validate_report
from tests.framing_fixtures import FIXTURE_NONCE
from tests.paths import DATA

RAW = (DATA / "probe" / "al2023" / "raw.txt").read_text(encoding="utf-8")
SPEC = HostSpec("h", "ssh://recorded")


def end_of(section: str) -> re.Pattern[str]:
    return re.compile(rf"^@@AMI-AUDITOR-END {FIXTURE_NONCE} {section} rc=\d+@@$", re.M)


def result_for(raw: str, truncated: bool = False) -> HostResult:
    snap = build_snapshot(SPEC, CommandResult(raw, "", 0, 1.0, truncated=truncated), FIXTURE_NONCE)
    return HostResult(SPEC, "ok", None, snap)


def test_the_recorded_run_is_complete() -> None:
    result = result_for(RAW)
    assert result.complete and result.snapshot["probe"]["failed_areas"] == []


@pytest.mark.parametrize(("rc", "failed", "words"), [
    (124, True, "timed out"),
    (1, True, "failed with status 1"),
    (3, False, "not running"),  # the host has no systemd: an answer
])
def test_a_section_status_decides_whether_the_area_failed(rc: int, failed: bool, words: str) -> None:
    raw = end_of("unit_files").sub(f"@@AMI-AUDITOR-END {FIXTURE_NONCE} unit_files rc={rc}@@", RAW)
    result = result_for(raw)
    assert ("systemd" in result.snapshot["probe"]["failed_areas"]) is failed
    assert words in result.snapshot["errors"]["systemd"]
    assert result.complete is not failed


def test_output_cut_mid_section_is_incomplete() -> None:
    cut = RAW[: end_of("packages").search(RAW).start() - 40]
    result = result_for(cut, truncated=True)
    assert not result.complete
    assert "packages" in result.snapshot["probe"]["failed_areas"]
    assert "probe" in result.snapshot["errors"]


def test_a_repeated_section_is_tampering_and_incomplete() -> None:
    os_block = re.search(rf"@@AMI-AUDITOR-SECTION {FIXTURE_NONCE} os@@\n.*?\n@@AMI-AUDITOR-END {FIXTURE_NONCE} os "
                         r"rc=0@@\n", RAW, re.S).group(0)
    result = result_for(RAW.replace(os_block, os_block * 2, 1))
    assert "os" in result.snapshot["probe"]["failed_areas"] and not result.complete


def test_scan_exit_code_and_report_say_partial() -> None:
    from auditor.evaluate.core import verdict

    partial = result_for(end_of("cgroups").sub(f"@@AMI-AUDITOR-END {FIXTURE_NONCE} cgroups rc=124@@", RAW))
    report = Report(hosts=[result_for(RAW), partial], generated_at="2026-11-30T00:00:00Z", fail_on="high")
    code = verdict(report)
    assert code == exitcodes.INCOMPLETE
    report.exit_code = code
    doc = report_to_dict(report)
    validate_report(doc)
    assert [(h["complete"], h["failed_areas"]) for h in doc["hosts"]] == [(True, []), (False, ["cgroups"])]


def test_a_hostile_hosts_long_identity_is_clipped_so_its_snapshot_stays_readable(tmp_path: Path) -> None:
    """A host's name and AZ become labels and report text: the collector clips them to the snapshot schema's
    bound, so `collect -o` then `analyze` (which refuses a longer one) reads this host's snapshot."""
    import json

    from auditor.collect.schema import MAX_HOST_TEXT
    from auditor.compare.sources import load_snapshot_file

    raw = RAW.replace("hostname=ip-172-31-7-9.us-west-2.compute.internal", "hostname=" + "h" * 100_000)
    raw = raw.replace("placement/availability-zone=us-west-2a", "placement/availability-zone=" + "z" * 9_000)
    snap = result_for(raw).snapshot
    assert len(snap["host"]["hostname"]) == MAX_HOST_TEXT and snap["host"]["hostname"].endswith("…")
    assert len(snap["labels"]["az"]) == MAX_HOST_TEXT
    saved = tmp_path / "h.json"
    saved.write_text(json.dumps(snap))
    assert load_snapshot_file(saved)["host"]["hostname"] == snap["host"]["hostname"]
