"""Splitting raw probe output, and how cut-off, failing or forged sections become explicit errors."""

from __future__ import annotations

import pytest

from auditor.collect import framing
from auditor.collect.parsers.binaries import parse_binaries
from auditor.collect.parsers.network import parse_network
from auditor.collect.sections import TamperedOutput, blocks, split_sections, subsections
from auditor.collect.snapshot import build_snapshot
from auditor.models import CommandResult, HostSpec
from tests.framing_fixtures import FIXTURE_NONCE as N
from tests.framing_fixtures import frame, reframe

OTHER = "f" * 32


def test_split_sections_keeps_status_and_marks_cut_off_section() -> None:
    raw = reframe("@@AMI-AUDITOR-SECTION os@@\nID=debian\n@@AMI-AUDITOR-END os rc=0@@\n"
                  "@@AMI-AUDITOR-SECTION units@@\nId=a.service\n")
    sections, done = split_sections(raw, N)
    assert not done
    assert sections["os"].body == "ID=debian" and sections["os"].rc == 0
    assert sections["units"].rc is None and not sections["units"].complete


def test_truncated_output_becomes_errors_never_silence() -> None:
    raw = reframe("@@AMI-AUDITOR-SECTION os@@\nID=debian\n@@AMI-AUDITOR-END os rc=0@@\n"
                  "@@AMI-AUDITOR-SECTION systemd_version@@\nsystemd 252\n@@AMI-AUDITOR-END systemd_version rc=0@@\n"
                  "@@AMI-AUDITOR-SECTION unit_files@@\nssh.service enabled enabled\n")
    snap = build_snapshot(HostSpec("h", "local"), CommandResult(raw, "boom", 0, truncated=True), N)
    assert snap["facts"]["os"]["id"] == "debian"
    assert snap["facts"]["systemd"] is None
    assert "cut off" in snap["errors"]["systemd"]
    assert "truncated" in snap["errors"]["probe"]
    assert snap["facts"]["cgroups"] is None and "missing" in snap["errors"]["cgroups"]


def test_unavailable_facility_and_failed_section_are_named() -> None:
    raw = reframe("@@AMI-AUDITOR-SECTION systemd_version@@\n@@AMI-AUDITOR-END systemd_version rc=3@@\n"
                  "@@AMI-AUDITOR-SECTION unit_files@@\n@@AMI-AUDITOR-END unit_files rc=3@@\n"
                  "@@AMI-AUDITOR-SECTION units@@\n@@AMI-AUDITOR-END units rc=3@@\n"
                  "@@AMI-AUDITOR-SECTION packages@@\n@@AMI-AUDITOR-END packages rc=1@@\n@@AMI-AUDITOR-DONE@@\n")
    snap = build_snapshot(HostSpec("h", "local"), CommandResult(raw, "", 0), N)
    assert "systemd is not running" in snap["errors"]["systemd"]
    assert snap["errors"]["packages"] == "probe section 'packages' failed with status 1"
    assert "probe" not in snap["errors"]


def test_a_parser_crash_becomes_an_error_entry(monkeypatch) -> None:
    from auditor.collect import collectors

    def broken(_text: str) -> dict:
        raise ValueError("unexpected format")

    monkeypatch.setitem(collectors.COLLECTORS, "os",
                        collectors.Collector("os", ("os",), (), broken))
    snap = build_snapshot(HostSpec("h", "local"), CommandResult(frame({"os": "ID=x"}), "", 0), N)
    assert snap["facts"]["os"] is None
    assert snap["errors"]["os"] == "parser error: ValueError: unexpected format"


REAL_KUBELET = "@ kubelet\nfound=1\npath=/usr/bin/kubelet\nsha256=" + "a" * 64 + "\nversion_source=none"
GOLDEN = "9" * 64


def _forgery(nonce_line: str) -> str:
    """What a hostile /etc/eks/release says: close `eks`, then a fake `binaries` and `os` section."""
    return "\n".join([
        f"@@AMI-AUDITOR-END {nonce_line}eks rc=0@@",
        f"@@AMI-AUDITOR-SECTION {nonce_line}binaries@@", f"@ kubelet\nfound=1\nsha256={GOLDEN}",
        f"@@AMI-AUDITOR-END {nonce_line}binaries rc=0@@",
        f"@@AMI-AUDITOR-SECTION {nonce_line}os@@", "ID=golden", f"@@AMI-AUDITOR-END {nonce_line}os rc=0@@",
        f"@@AMI-AUDITOR-SECTION {nonce_line}eks@@",
    ])


@pytest.mark.parametrize("nonce_line", ["", OTHER + " ", "NONCE "], ids=["old-style", "guessed-nonce", "literal"])
def test_markers_without_this_runs_nonce_are_body_text(nonce_line: str) -> None:
    raw = frame({"os": "ID=debian", "binaries": REAL_KUBELET, "eks": _forgery(nonce_line)})
    sections, done = split_sections(raw, N)
    assert done and set(sections) == {"os", "binaries", "eks"}
    assert sections["os"].body == "ID=debian"
    assert parse_binaries(sections["binaries"].body)[0]["sha256"] == "a" * 64
    assert GOLDEN in sections["eks"].body  # the forgery stays where it was printed, as text
    snap = build_snapshot(HostSpec("h", "local"), CommandResult(raw, "", 0), N)
    assert snap["facts"]["binaries"][0]["sha256"] == "a" * 64 and snap["facts"]["os"]["id"] == "debian"


def test_output_framed_with_another_nonce_has_no_sections() -> None:
    sections, done = split_sections(frame({"os": "ID=debian"}, nonce=OTHER), N)
    assert sections == {} and not done


@pytest.mark.parametrize("first_wins", [True, False])
def test_a_repeated_section_is_tampering_never_overwrite_nor_first_wins(first_wins: bool) -> None:
    real, fake = REAL_KUBELET, f"@ kubelet\nfound=1\nsha256={GOLDEN}"
    raw = frame({"os": "ID=debian"}, done=False) + frame({"binaries": real if first_wins else fake}, done=False) \
        + frame({"binaries": fake if first_wins else real})
    snap = build_snapshot(HostSpec("h", "local"), CommandResult(raw, "", 0), N)
    assert snap["facts"]["binaries"] is None
    assert "appeared 2 times" in snap["errors"]["binaries"] and "tampered" in snap["errors"]["binaries"]
    assert "binaries" in snap["errors"]["framing"]
    assert snap["facts"]["os"]["id"] == "debian"


def test_a_repeated_identity_section_is_ignored_not_trusted() -> None:
    raw = frame({"identity": "hostname=real"}, done=False) + frame({"identity": "hostname=forged"})
    snap = build_snapshot(HostSpec("h", "local"), CommandResult(raw, "", 0), N)
    assert snap["host"]["hostname"] is None and "identity" in snap["errors"]["framing"]


@pytest.mark.parametrize("sep", ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_only_newline_breaks_lines(sep: str) -> None:
    """Python's splitlines() also breaks on these; a host value holding one must not start a line."""
    body = f"@ kubelet\nfound=1\nrealpath=/x{sep}sha256={GOLDEN}\nsha256={'a' * 64}"
    sections, _ = split_sections(frame({"binaries": body}), N)
    [kubelet] = parse_binaries(sections["binaries"].body)
    assert kubelet["sha256"] == "a" * 64 and GOLDEN in kubelet["realpath"]


def test_crlf_line_ends_are_read_as_line_ends() -> None:
    sections, _ = split_sections(frame({"os": "ID=debian\r\nVERSION_ID=12\r"}), N)
    assert sections["os"].body == "ID=debian\nVERSION_ID=12"


def test_repeated_keys_blocks_and_subsections_are_tampering() -> None:
    with pytest.raises(TamperedOutput):
        parse_binaries(REAL_KUBELET + f"\nsha256={GOLDEN}")
    with pytest.raises(TamperedOutput):
        parse_binaries(REAL_KUBELET + "\n" + REAL_KUBELET)
    with pytest.raises(TamperedOutput):
        blocks("@ a\nx\n@ a\ny", unique=True)
    with pytest.raises(TamperedOutput):
        subsections("--- threads\n1\n--- threads\n2")
    with pytest.raises(TamperedOutput):  # interface names are unique and can hold no newline
        parse_network("@ eth0 driver=ena operstate=up mtu=9001\n@ eth0 driver=ena operstate=down mtu=1500")
    raw = frame({"binaries": REAL_KUBELET + "\npath=/tmp/kubelet"})
    snap = build_snapshot(HostSpec("h", "local"), CommandResult(raw, "", 0), N)
    assert snap["facts"]["binaries"] is None and "tampered" in snap["errors"]["binaries"]


def test_framing_builders_and_script_nonce_round_trip() -> None:
    nonce = framing.new_nonce()
    assert framing.NONCE_RE.match(nonce) and nonce != framing.new_nonce()
    assert framing.nonce_of(framing.with_nonce("echo hi\n", nonce)) == nonce
    with pytest.raises(ValueError):
        framing.with_nonce("echo\n", "NOT-HEX")
    sections, done = split_sections(framing.section_text(nonce, "os", "ID=x") + framing.done_marker(nonce), nonce)
    assert done and sections["os"].body == "ID=x" and sections["os"].rc == 0


def test_every_marker_starts_with_the_prefix_the_splitter_looks_for() -> None:
    # split_sections only runs the marker regexes on lines with this prefix (its fast path)
    from auditor.collect.sections import MARKER_PREFIX

    markers = (framing.start_marker(N, "os"), framing.end_marker(N, "os", 0), framing.done_marker(N))
    for marker, pattern in zip(markers, (framing.START_RE, framing.END_RE, framing.DONE_RE)):
        assert pattern.match(marker) and marker.startswith(MARKER_PREFIX)
        assert pattern.pattern.startswith("^" + MARKER_PREFIX)


def test_line_breaks_other_than_newline_are_neutralized_only_in_bodies() -> None:
    raw = (f"{framing.start_marker(N, 'os')}\nA=1\r\nB=\u2028x\r\r\n{framing.end_marker(N, 'os', 0)}\n"
           f"{framing.done_marker(N)}\n")
    sections, done = split_sections(raw, N)
    assert done and sections["os"].body == "A=1\nB=\ufffdx\ufffd" and sections["os"].rc == 0
    plain = raw.replace("\r", "").replace("\u2028", "")
    assert split_sections(plain, N)[0]["os"].body == "A=1\nB=x"
