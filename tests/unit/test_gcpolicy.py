"""The garbage-collection policy of a fleet run (evaluate/gcpolicy.py): relaxed while a scan or analysis
holds its hosts' results, the process's own settings back afterwards, also when the run fails."""

from __future__ import annotations

import gc
import io
import json
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.evaluate import gcpolicy
from auditor.evaluate.gcpolicy import fleet_gc
from tests.unit.test_rules_builtin import recorded


def test_relaxed_inside_restored_after_even_on_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fleet_gc():
        assert gc.get_threshold()[0] >= 20 * before[0] and gc.get_freeze_count() > 0
        raise RuntimeError("a run that fails")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_analyze_runs_its_report_steps_under_the_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleet rules and the report are made inside the relaxed span (they were not: the policy ended
    with the file reading, and at 100,000 hosts the report steps re-walked every object again and again)."""
    seen: list[tuple[int, int]] = []
    from auditor.render import stage

    real = stage.write

    def write(*args: object, **kwargs: object) -> object:
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(stage, "write", write)
    for name in ("fleet-a1", "fleet-b1"):
        (tmp_path / f"{name}.json").write_text(json.dumps(recorded(name)))
    out = io.StringIO()
    code = main(["analyze", str(tmp_path), "--no-store", "--format", "json", "--out", str(tmp_path / "out")],
                Env(stdout=out, stderr=io.StringIO()))
    assert code in (0, 1) and (tmp_path / "out" / "report.json").exists()
    assert seen and seen[0][0] == 20_000 and seen[0][1] > 0
    assert gc.get_threshold()[0] != 20_000 and gcpolicy.gc.get_freeze_count() == 0
