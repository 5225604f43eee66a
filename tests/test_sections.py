"""Splitting raw probe output, and how cut-off or failing sections become explicit errors."""

from __future__ import annotations

from auditor.collect.sections import split_sections
from auditor.collect.snapshot import build_snapshot
from auditor.models import CommandResult, HostSpec


def test_split_sections_keeps_status_and_marks_cut_off_section() -> None:
    raw = ("@@AMI-AUDITOR-SECTION os@@\nID=debian\n@@AMI-AUDITOR-END os rc=0@@\n"
           "@@AMI-AUDITOR-SECTION units@@\nId=a.service\n")
    sections, done = split_sections(raw)
    assert not done
    assert sections["os"].body == "ID=debian" and sections["os"].rc == 0
    assert sections["units"].rc is None and not sections["units"].complete


def test_truncated_output_becomes_errors_never_silence() -> None:
    raw = ("@@AMI-AUDITOR-SECTION os@@\nID=debian\n@@AMI-AUDITOR-END os rc=0@@\n"
           "@@AMI-AUDITOR-SECTION systemd_version@@\nsystemd 252\n@@AMI-AUDITOR-END systemd_version rc=0@@\n"
           "@@AMI-AUDITOR-SECTION unit_files@@\nssh.service enabled enabled\n")
    snap = build_snapshot(HostSpec("h", "local"), CommandResult(raw, "boom", 0, truncated=True))
    assert snap["facts"]["os"]["id"] == "debian"
    assert snap["facts"]["systemd"] is None
    assert "cut off" in snap["errors"]["systemd"]
    assert "truncated" in snap["errors"]["probe"]
    assert snap["facts"]["cgroups"] is None and "missing" in snap["errors"]["cgroups"]


def test_unavailable_facility_and_failed_section_are_named() -> None:
    raw = ("@@AMI-AUDITOR-SECTION systemd_version@@\n@@AMI-AUDITOR-END systemd_version rc=3@@\n"
           "@@AMI-AUDITOR-SECTION unit_files@@\n@@AMI-AUDITOR-END unit_files rc=3@@\n"
           "@@AMI-AUDITOR-SECTION units@@\n@@AMI-AUDITOR-END units rc=3@@\n"
           "@@AMI-AUDITOR-SECTION packages@@\n@@AMI-AUDITOR-END packages rc=1@@\n@@AMI-AUDITOR-DONE@@\n")
    snap = build_snapshot(HostSpec("h", "local"), CommandResult(raw, "", 0))
    assert "systemd is not running" in snap["errors"]["systemd"]
    assert snap["errors"]["packages"] == "probe section 'packages' failed with status 1"
    assert "probe" not in snap["errors"]


def test_a_parser_crash_becomes_an_error_entry(monkeypatch) -> None:
    from auditor.collect import collectors

    def broken(_text: str) -> dict:
        raise ValueError("unexpected format")

    monkeypatch.setitem(collectors.COLLECTORS, "os",
                        collectors.Collector("os", ("os",), (), broken))
    raw = "@@AMI-AUDITOR-SECTION os@@\nID=x\n@@AMI-AUDITOR-END os rc=0@@\n@@AMI-AUDITOR-DONE@@\n"
    snap = build_snapshot(HostSpec("h", "local"), CommandResult(raw, "", 0))
    assert snap["facts"]["os"] is None
    assert snap["errors"]["os"] == "parser error: ValueError: unexpected format"
