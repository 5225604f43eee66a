"""A big report renders its other formats in a forked process while this one validates and writes the
JSON (render/stage.render_all): the files are byte for byte the ones the one-process path writes, and a
renderer that fails in the child fails the write in the parent, leaving the previous set in place."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from auditor.render import stage
from auditor.render.stage import render_all, write_formats

DATA = Path(__file__).resolve().parent / "data" / "reports"
FORMATS = ("html", "json", "md", "junit", "prom")


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / "fleet.json").read_text())
    return doc


def _pid(doc: dict[str, Any]) -> str:
    return f"rendered by {os.getpid()}\n"


def test_forked_rendering_writes_the_same_bytes_as_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _doc()
    monkeypatch.setattr(stage, "PARALLEL_HOSTS", 10**9)
    alone = render_all(doc, FORMATS, validate=True)
    monkeypatch.setattr(stage, "PARALLEL_HOSTS", 1)
    forked = render_all(doc, FORMATS, validate=True)
    assert forked == alone
    assert stage._DOC is None
    monkeypatch.setitem(stage.RENDERERS, "md", (_pid, "md"))  # which process rendered the other formats
    texts = render_all(doc, ("json", "md"))
    assert texts[1] != _pid(doc) and texts[1].startswith("rendered by ")  # a forked child, not this process


def test_a_renderer_failing_in_the_child_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _doc()
    (tmp_path / "report.json").write_text("previous\n")
    monkeypatch.setattr(stage, "PARALLEL_HOSTS", 1)

    def broken(d: dict[str, Any]) -> str:
        raise RuntimeError("renderer bug")

    monkeypatch.setitem(stage.RENDERERS, "md", (broken, "md"))
    with pytest.raises(RuntimeError, match="renderer bug"):
        write_formats(doc, ("json", "md"), tmp_path, validate=True)
    assert (tmp_path / "report.json").read_text() == "previous\n" and not (tmp_path / "report.md").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
