"""Control characters and bidi overrides from hosts never reach a terminal, Markdown, HTML or JUnit raw.

Hostile strings (ESC[2J, an OSC title change ending in BEL, \\r, the 8-bit CSI \\x9b, U+202E, NUL, a
newline followed by a fake table row) are put in a saved report's host names, error text, labels, titles,
items, evidence, drift and notes, and in a real unbooted image (hostname, os-release, a unit file name)
scanned end to end. Every output is checked for raw unsafe characters and still parses; the JSON report
keeps the real characters (it is data), written as \\u escapes.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from auditor.cli import main
from auditor.context import Env
from auditor.models import Finding, HostResult, HostSpec, Report
from auditor.render.stage import print_summary, summarize
from auditor.render.terminal import one_line
from auditor.textsafe import UNSAFE
from tests.paths import DATA

FLEET = DATA / "reports" / "fleet.json"
HOSTILE = "evil\x1b[2J\x1b]0;owned\x07\r\x9b31m\u202egnp.exe\x00|`*<b>x</b>\n| fake | row |"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def raw_chars(text: str) -> list[str]:
    """The unsafe characters in `text`, newline and tab apart."""
    return sorted(hex(ord(c)) for c in set(text) if c not in "\n\t" and UNSAFE.match(c))


def _rename(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        return {k: _rename(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, old, new) for v in value]
    return new if value == old else value


def hostile_report() -> dict[str, Any]:
    doc = _rename(json.loads(FLEET.read_text(encoding="utf-8")), "b1", "b1" + HOSTILE)
    for host in doc["hosts"]:
        host["labels"]["owner"] = HOSTILE
        if host["status"] != "ok":
            host["error"] = "ssh: " + HOSTILE
        host["facts_summary"] = {**(host.get("facts_summary") or {}), "os": HOSTILE} if host["status"] == "ok" \
            else host.get("facts_summary")
    for f in doc["findings"]:
        f["title"] += HOSTILE
        f["item"] = (f.get("item") or "unit") + HOSTILE
        f["evidence"]["hostile"] = HOSTILE
    doc["drift"][0]["actual"] = HOSTILE
    doc["notes"].append(HOSTILE)
    return doc


def test_saved_report_with_hostile_text_renders_inert_in_every_format(tmp_path: Path) -> None:
    doc = hostile_report()
    source = tmp_path / "hostile.json"
    source.write_text(json.dumps(doc), encoding="utf-8")
    code, _, err = run("report", str(source), "--format", "html,md,junit,json", "--out", str(tmp_path / "r"))
    assert code == 0, err
    files = {p.suffix: p.read_text(encoding="utf-8") for p in (tmp_path / "r").iterdir()}
    for suffix, text in files.items():
        assert raw_chars(text) == [], suffix
    # JSON: the same data (the real characters), written as escapes
    assert json.loads(files[".json"]) == doc and "\\u202e" in files[".json"] and "\\u009b" in files[".json"]
    # JUnit: well-formed, the host's suite there, its name shown with visible escapes
    suites = [s.get("name") for s in ET.fromstring(files[".xml"]).iter("testsuite")]
    assert "b1evil\\x1b[2J\\x1b]0;owned\\x07\\x0d\\x9b31m\\u202egnp.exe\\x00|`*<b>x</b>\n| fake | row |" in suites
    # HTML: visible escapes, markup still escaped
    assert "evil\\x1b[2J\\x1b]0;owned\\x07\\x0d\\x9b31m\\u202egnp.exe\\x00|`*&lt;b&gt;x&lt;/b&gt;" in files[".html"]
    # Markdown: no row of any table gains a cell (the newline and pipes in host text are inert)
    md = files[".md"]
    for table in re.findall(r"(?:^\|.*\|$\n?)+", md, flags=re.M):
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in table.splitlines()}
        assert len(widths) == 1, table
    assert "| fake | row |" not in md and "\\\\x1b\\[2J" in md


def test_report_to_stdout_and_errors_are_inert(tmp_path: Path) -> None:
    source = tmp_path / "hostile.json"
    source.write_text(json.dumps(hostile_report()), encoding="utf-8")
    for fmt in ("md", "html", "junit", "json"):
        code, out, _ = run("report", str(source), "--format", fmt)
        assert code == 0 and raw_chars(out) == [], fmt
    missing = tmp_path / ("missing" + HOSTILE.replace("\x00", "") + ".json")  # (a NUL in a path: exit 4 today)
    code, _, err = run("report", str(missing), "--format", "md")
    assert code == 2 and raw_chars(err) == [] and "\\x1b[2J" in err


def test_terminal_summary_and_host_lines_stay_one_line_each() -> None:
    spec = HostSpec(name="b1" + HOSTILE, target="ssh://b1")
    snapshot = {"facts": {"os": {"pretty_name": HOSTILE}, "kernel": {"release": HOSTILE},
                          "systemd": {"units": [{"name": HOSTILE, "restarts": 3}], "enabled_units": []},
                          "cgroups": None}, "errors": {HOSTILE: "x"}}
    lines = [one_line(HostResult(spec, "ok", None, snapshot, 1.0)),
             one_line(HostResult(spec, "unreachable", "ssh: " + HOSTILE, None, 1.0))]
    for line in lines:
        assert raw_chars(line) == [] and "\n" not in line and "\\x1b[2J" in line
    finding = Finding(host=spec.name, rule="systemd.unit-crash-looping", severity="high", title=HOSTILE,
                      item=HOSTILE)
    report = Report(hosts=[HostResult(spec, "ok", None, snapshot, 1.0)], generated_at="2026-01-01T00:00:00Z",
                    findings=[finding], notes=[HOSTILE], exit_code=1,
                    comparison={"splits": [{"group_by": HOSTILE, "path": HOSTILE, "score": 1.0}]})
    out = io.StringIO()
    print_summary(summarize(report), report.exit_code, Env(stdout=out, stderr=io.StringIO()))
    text = out.getvalue()
    assert raw_chars(text) == []
    assert [line[:9] for line in text.splitlines()[1:]] == ["1/1 hosts", "  split b", "  [HIGH  ", "  note: e",
                                                             "exit code"]  # headline (splits, chains) first


def _hostile_image(root: Path) -> None:
    (root / "etc/systemd/system/multi-user.target.wants").mkdir(parents=True)
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    (root / "etc/hostname").write_bytes(b"evil\x1b[2J\x07host\xe2\x80\xae\n")
    (root / "etc/os-release").write_bytes(b'ID=debian\nVERSION_ID="12"\n'
                                          b'PRETTY_NAME="Deb\x1b]0;owned\x07ian \xc2\x9b31m \xe2\x80\xae12"\n')
    unit = "ev\x1bil.service"
    (root / "usr/lib/systemd/system" / unit).write_text("[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\n")
    (root / "etc/systemd/system/multi-user.target.wants" / unit).symlink_to(f"/usr/lib/systemd/system/{unit}")


RULE = """\
pack: show
rules:
  - id: show.host
    title: "{{ host.hostname }} runs {{ facts.os.pretty_name }} with {{ facts.systemd.enabled_units | join(', ') }}"
    severity: high
    when: "facts.os.id == 'debian'"
    evidence: {hostname: host.hostname, units: facts.systemd.enabled_units}
"""


def test_scan_of_a_hostile_image_is_inert_on_the_terminal_and_in_every_file(tmp_path: Path) -> None:
    _hostile_image(tmp_path / "root")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "show.yaml").write_text(RULE)
    code, out, err = run("scan", f"image://{tmp_path / 'root'}", "--rules", str(tmp_path / "rules"),
                         "--format", "json,md,html,junit", "--out", str(tmp_path / "out"))
    assert code == 1, err
    assert raw_chars(out) == [] and raw_chars(err) == []
    assert "evil\\x1b[2J\\x07host\\u202e runs Deb\\x1b]0;owned\\x07ian \\x9b31m \\u202e12 with ev\\x1bil.service" in out
    files = {p.suffix: p.read_text(encoding="utf-8") for p in (tmp_path / "out").iterdir()}
    for suffix, text in files.items():
        assert raw_chars(text) == [], suffix
    ET.fromstring(files[".xml"])
    doc = json.loads(files[".json"])
    finding = next(f for f in doc["findings"] if f["rule"] == "show.host")
    assert finding["evidence"]["hostname"] == "evil\x1b[2J\x07host\u202e"  # the data keeps what the host said
