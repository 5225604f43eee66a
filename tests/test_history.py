"""Scan history: saved reports, trends, and dying-memcg growth between real scans."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.history.store import scan_files
from auditor.history.trends import growth_per_hour, summarize
from tests.fleet import memcg


def scan(history: Path, *extra: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "local", "--binary", "sh", "--history", str(history), *extra], Env(out, err))
    return code, out.getvalue() + err.getvalue()


def doc(at: str, dying: int, findings: list[tuple[str, str]]) -> dict:
    return {"generated_at": at, "hosts": [{"name": "h1", "status": "ok", "facts_summary": {"dying_memcgs": dying}}],
            "findings": [{"host": h, "rule": r, "item": None, "waived": False} for h, r in findings], "drift": []}


def test_trends_growth_and_new_or_resolved_findings() -> None:
    a = doc("2026-01-01T00:00:00Z", 100, [("h1", "r.old")])
    b = doc("2026-01-01T02:00:00Z", 700, [("h1", "r.new")])
    assert growth_per_hour(a, b, "h1") == 300.0
    assert growth_per_hour(b, a, "h1") is None  # time ran backwards: no rate
    summary = summarize([a, b])
    assert summary["hosts"][0]["dying_per_hour"] == 300.0
    assert summary["new_findings"] == [("h1", "r.new", "")]
    assert summary["resolved_findings"] == [("h1", "r.old", "")]


def test_history_saves_each_scan_and_reports_trends(tmp_path: Path) -> None:
    history = tmp_path / "hist"
    assert scan(history)[0] in (0, 1)
    assert scan(history)[0] in (0, 1)
    files = scan_files(history)
    assert len(files) == 2 and files[0].name < files[1].name
    assert json.loads(files[1].read_text())["schema"] == "ami-auditor/report/1"
    out = io.StringIO()
    assert main(["history", str(history)], Env(out, io.StringIO())) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("2 scans in")
    assert any(line.split()[:2] == ["local", "2"] for line in lines)


def test_corrupt_history_is_an_input_error_naming_the_file(tmp_path: Path) -> None:
    history = tmp_path / "hist"
    history.mkdir()
    (history / "scan-20260101T000000Z.json").write_text('{"schema": \n')
    code, text = scan(history)
    assert code == 2 and "scan-20260101T000000Z.json:2" in text
    assert len(list(history.iterdir())) == 1  # nothing written


@pytest.mark.kernel
def test_real_dying_memcg_growth_between_scans_is_flagged(tmp_path: Path) -> None:
    reason = memcg.available()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    history = tmp_path / "hist"
    memcg.settle()
    code, _ = scan(history, "--format", "json", "--out", str(tmp_path / "r1"))
    first = json.loads((tmp_path / "r1" / "report.json").read_text())
    assert not [f for f in first["findings"] if f["rule"] == "history.dying-memcg-growth"]
    with memcg.DyingMemcgs() as batch:
        assert batch.make(1500) >= 1450
        scan(history, "--format", "json", "--out", str(tmp_path / "r2"))
    second = json.loads((tmp_path / "r2" / "report.json").read_text())
    growth = [f for f in second["findings"] if f["rule"] == "history.dying-memcg-growth"]
    assert len(growth) == 1 and growth[0]["host"] == "local" and growth[0]["severity"] == "high"
    assert growth[0]["evidence"]["current"] - growth[0]["evidence"]["previous"] >= 1400
    assert second["summary"]["exit_code"] == 1  # a high finding fails the default --fail-on high


def test_two_saves_in_the_same_second_keep_their_order_and_leave_no_temp_files(tmp_path: Path) -> None:
    from auditor.history.store import save_scan

    doc = {"generated_at": "2026-11-30T14:10:00Z", "hosts": []}
    first = save_scan(tmp_path, {**doc, "seq": 1})
    second = save_scan(tmp_path, {**doc, "seq": 2})
    third = save_scan(tmp_path, {**doc, "seq": 3})
    assert scan_files(tmp_path) == [first, second, third]
    assert [json.loads(p.read_text())["seq"] for p in scan_files(tmp_path)] == [1, 2, 3]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (first, second, third))
