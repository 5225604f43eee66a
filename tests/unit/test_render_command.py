"""`ami-auditor report SCAN.json`: re-render a saved report through the real CLI."""

from __future__ import annotations

import io
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from auditor.cli import main
from auditor.context import Env
from auditor.render import RENDERERS
from tests.paths import DATA

FLEET = DATA / "reports" / "fleet.json"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def test_all_formats_to_a_directory(tmp_path: Path) -> None:
    code, out, err = run("report", str(FLEET), "--format", "html,md,junit,json", "--out", str(tmp_path / "r"))
    assert code == 0, err
    names = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert names == ["report.html", "report.json", "report.md", "report.xml"]
    doc = json.loads(FLEET.read_text(encoding="utf-8"))
    assert (tmp_path / "r" / "report.html").read_text(encoding="utf-8") == RENDERERS["html"][0](doc)
    assert json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8")) == doc
    ET.parse(tmp_path / "r" / "report.xml")
    assert out.splitlines() == [str(tmp_path / "r" / n) for n in ("report.html", "report.md", "report.xml",
                                                                   "report.json")]


def test_one_format_to_stdout() -> None:
    code, out, _ = run("report", str(FLEET), "--format", "md")
    assert code == 0 and out.startswith("# ami-auditor: FAIL (exit 1)")


def test_broken_json_names_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "scan.json"
    bad.write_text('{\n  "schema": "ami-auditor/report/1",\n  "hosts": [,]\n}\n', encoding="utf-8")
    code, _, err = run("report", str(bad), "--format", "html", "--out", str(tmp_path / "out"))
    assert code == 2 and f"{bad}:3:" in err
    assert not (tmp_path / "out").exists()


def test_a_document_that_is_not_a_report_is_rejected(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"schema": "ami-auditor/snapshot/1", "facts": {}}), encoding="utf-8")
    code, _, err = run("report", str(snap), "--format", "md", "--out", str(tmp_path / "out"))
    assert code == 2 and str(snap) in err and "ami-auditor/report/1" in err
    assert not (tmp_path / "out").exists()


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run("report", str(FLEET), "--format", "pdf")[0] == 2
    assert run("report", str(FLEET), "--format", "html,md")[0] == 2  # several formats need --out
    assert run("report", str(tmp_path / "missing.json"))[0] == 2


def test_refuses_to_overwrite_its_own_input(tmp_path: Path) -> None:
    saved = tmp_path / "report.json"
    shutil.copy(FLEET, saved)
    before = saved.read_bytes()
    code, _, err = run("report", str(saved), "--format", "json,html", "--out", str(tmp_path))
    assert code == 2 and "overwrite" in err
    assert saved.read_bytes() == before and not (tmp_path / "report.html").exists()
