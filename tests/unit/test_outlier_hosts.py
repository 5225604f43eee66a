"""Comparison that scales to odd hosts: outliers summarised per host (count, main kinds), at most --top hosts,
with the drill-down in HTML and JSON; a --group-by key no host has is said in one line.

The fleet is the recorded compare fleet (tests/data/compare/fleet) plus one host of another OS (the recorded
AL2023 probe output) in us-east-1b: hundreds of its facts differ from its group."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.compare.groups import compare_groups
from auditor.compare.index import index_snapshots
from auditor.context import Env
from tests.unit.test_compare_groups import FLEET, HOSTS, fleet
from tests.unit.test_render_junit import recorded_host


def odd_snapshot() -> dict:
    snap = recorded_host("odd").snapshot
    snap["labels"] = {"az": "us-east-1b"}
    return snap


def test_outliers_are_summarised_per_host_most_first_and_bounded_by_top() -> None:
    index = index_snapshots([*fleet(), odd_snapshot()], ["az"])
    comparison = compare_groups(index, "az", top=1)
    per_host = {}
    for o in comparison["outliers"]:  # the drill-down: every outlier, as before
        per_host[o["host"]] = per_host.get(o["host"], 0) + 1
    assert per_host["odd"] > 100 and per_host["a2"] >= 1, per_host
    assert comparison["outlier_hosts_total"] == len(per_host)
    [odd] = comparison["outlier_hosts"]  # --top 1: one host, the one with most
    assert (odd["host"], odd["group"], odd["outliers"]) == ("odd", "us-east-1b", per_host["odd"])
    kinds = list(odd["kinds"].values())
    assert 1 <= len(kinds) <= 3 and kinds == sorted(kinds, reverse=True) and sum(kinds) <= odd["outliers"]
    assert all(k.startswith("facts.") and "[" not in k for k in odd["kinds"]), odd["kinds"]
    both = compare_groups(index, "az", top=10)["outlier_hosts"]
    assert [h["host"] for h in both] == ["odd", "a2"]


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("odd-fleet")
    for host in HOSTS:
        shutil.copy(FLEET / f"{host}.json", folder / f"{host}.json")
    (folder / "odd.json").write_text(json.dumps(odd_snapshot()), encoding="utf-8")
    return folder


def analyze(snapshots: Path, out: Path, *extra: str) -> tuple[int, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["analyze", str(snapshots), "--no-store", "--jobs", "1", "--color", "never", "--format",
                 "json,html,md", "--out", str(out), *extra], Env(stdout=stdout, stderr=stderr))
    assert code in (0, 1), stderr.getvalue()
    return code, stdout.getvalue()


def test_one_odd_host_is_one_line_not_a_flood(snapshots: Path, tmp_path: Path) -> None:
    _, text = analyze(snapshots, tmp_path, "--group-by", "az", "--top", "1")
    lines = text.splitlines()
    doc = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    count = sum(o["host"] == "odd" for o in doc["comparison"]["outliers"])
    [odd] = [ln for ln in lines if "unlike its group" in ln]
    assert re.fullmatch(rf"  odd \(us-east-1b\) is unlike its group in {count} facts: facts\.\S+ ×\d+.*", odd), odd
    assert "  … 1 more host unlike their group in the report" in lines
    assert len(lines) < 40, text  # the summary stays a screen
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    section = md.split("## Hosts unlike their group", 1)[1].split("\n## ", 1)[0]
    assert f"- odd (us-east-1b): {count} facts unlike its group — `facts." in section
    assert section.count("\n  - `facts.") == 3 and f"… {count - 3} more in the HTML/JSON report" in section
    assert "… 1 more hosts with outliers in the JSON report." in section
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    table = html.split('id="outliers"', 1)[1].split("</table>", 1)[0]
    assert table.count("<details class=\"drill\">") == 1 and f"<summary>{count} facts</summary>" in table
    assert table.count("<li>") == 50 and f"the first 50 of {count}" in table  # the drill-down, bounded


def test_a_group_by_key_no_host_has_is_said_in_one_line(snapshots: Path, tmp_path: Path) -> None:
    _, text = analyze(snapshots, tmp_path, "--group-by", "ssm_ping")
    said = [ln for ln in text.splitlines() if "--group-by" in ln]
    assert said == ["  note: --group-by ssm_ping: no host has it, so nothing was compared"], text
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "--group-by ssm_ping: no host has it" in md.replace("\\", "")
