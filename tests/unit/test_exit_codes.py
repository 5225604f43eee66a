"""Exit code precedence, end to end: 2 (bad input) > 1 (findings at --fail-on) > 3 (incomplete) > 0."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

from auditor.cli import main
from auditor.context import Env


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scan(tmp_path: Path, *args: str) -> tuple[int, dict | None, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "--binary", "sh", "--format", "json", "--out", str(tmp_path / "out"), *args], Env(out, err))
    report = tmp_path / "out" / "report.json"
    return code, json.loads(report.read_text()) if report.exists() else None, out.getvalue() + err.getvalue()


def test_findings_beat_incomplete_and_the_report_lists_both(tmp_path: Path) -> None:
    unreachable = f"ssh://root@127.0.0.1:{closed_port()}"
    # a custom rule that always fires on a reached host: a finding at the fail-on level
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "always.yaml").write_text(
        "pack: t\nrules:\n  - id: t.kernel-known\n    title: kernel {{ facts.kernel.release }}\n"
        "    severity: medium\n    when: \"facts.kernel.release != `null`\"\n")
    code, report, _ = scan(tmp_path, "local", unreachable, "--rules", str(rules), "--fail-on", "medium")
    assert code == 1
    statuses = {h["name"]: h["status"] for h in report["hosts"]}
    assert statuses["local"] == "ok" and list(statuses.values()).count("unreachable") == 1
    assert any(f["rule"] == "t.kernel-known" for f in report["findings"])
    assert report["summary"]["exit_code"] == 1

    code, report, _ = scan(tmp_path, "local", unreachable, "--rules", str(rules), "--fail-on", "critical")
    assert code == 3 and report["summary"]["exit_code"] == 3


def test_bad_input_beats_everything_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("pack: t\nrules:\n  - id: t.x\n    severity: urgent\n    title: x\n")
    code, report, text = scan(tmp_path, "local", f"ssh://root@127.0.0.1:{closed_port()}", "--rules", str(bad))
    assert code == 2 and report is None
    assert f"{bad}:4" in text
