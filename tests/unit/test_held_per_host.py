"""What a scan holds per host until its report is made: labels once (the stub shares its spec's dict,
the report row shares the stub's), and no summary line when nothing will print it (--quiet). A fleet of
100,000 hosts holds each of these 100,000 times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditor.evaluate.retained import stub
from auditor.models import HostResult, HostSpec
from auditor.reportdoc import _host
from auditor.run import scan as scan_run
from tests.unit.test_one_core import _report, _run, replayed  # noqa: F401 - the fixture

SNAP: dict[str, Any] = {"labels": {"az": "us-east-1a"}, "facts": {}, "probe": {"complete": True}}


def test_the_stub_keeps_one_labels_dict_and_the_report_row_shares_it() -> None:
    spec = HostSpec("h", "local", {"az": "us-east-1a"})
    kept = stub(HostResult(spec, "ok", None, {**SNAP, "labels": {"az": "us-east-1a"}}))
    assert kept.snapshot is not None and kept.snapshot["labels"] is spec.labels
    assert _host(kept)["labels"] is spec.labels
    other = stub(HostResult(spec, "ok", None, {**SNAP, "labels": {"az": "us-east-1b", "os": "al2"}}))
    assert other.snapshot is not None and other.snapshot["labels"] == {"az": "us-east-1b", "os": "al2"}
    assert _host(other)["labels"] == {"az": "us-east-1b", "os": "al2"}  # the snapshot's own, when they differ


def test_a_stub_is_no_whole_snapshot_and_holds_only_what_the_report_reads() -> None:
    spec = HostSpec("h", "local", {"az": "us-east-1a"})
    whole = HostResult(spec, "ok", None, {**SNAP, "errors": {"gpu": "timed out"}, "host": {"az": "x"}})
    assert whole.whole is whole.snapshot
    kept = stub(whole)
    assert kept.whole is None and kept.snapshot is not None  # code needing facts cannot take a stub for them
    assert set(kept.snapshot) == {"labels", "errors", "probe"} and kept.complete


@pytest.mark.parametrize("quiet", [True, False])
def test_a_quiet_scan_keeps_no_summary_lines(replayed: Path, tmp_path: Path,  # noqa: F811
                                             monkeypatch: pytest.MonkeyPatch, quiet: bool) -> None:
    kept: list[int] = []
    real = scan_run.LiveHosts.lines

    def counting(self: scan_run.LiveHosts, report: Any) -> Any:
        kept.append(len(self._lines))  # what the source held until the report was made
        return real(self, report)

    monkeypatch.setattr(scan_run.LiveHosts, "lines", counting)
    _, text = _run("scan", "-i", str(replayed), "--no-store", "--format", "json", "--out", str(tmp_path / "out"),
                   *(["--quiet"] if quiet else []))
    doc = _report(tmp_path / "out")
    assert len(doc["hosts"]) == 12 and all(h["status"] == "ok" for h in doc["hosts"])
    assert kept == [0 if quiet else 12]
    assert (text == "") == quiet
    if not quiet:
        assert [line.split()[0] for line in text.splitlines()[:12]] == [f"h{i:02d}" for i in range(12)]


def test_a_drift_row_is_one_small_object() -> None:
    """One DriftItem per host per difference: a heterogeneous fleet holds millions until the report."""
    import sys

    from auditor.models import DriftItem

    item = DriftItem("h", "facts.kernel.release", "changed", "6.1", "6.8", "high")
    assert not hasattr(item, "__dict__") and sys.getsizeof(item) <= 96


def test_finish_lets_go_of_what_only_it_reads_and_runs_once() -> None:
    """Fleet slices and reads, views, group keys and the entries' finding lists are dead once the report
    exists; a run holds them no longer (they were ~2.5 KB per host through the whole report phase)."""
    from auditor.evaluate.core import EvalPlan, Evaluation
    from auditor.evaluate.files import as_result
    from auditor.judge.rules import load_rules
    from auditor.judge.stage import JudgePlan
    from tests.system.test_fleet_rules import _no_compare, host

    core = Evaluation(EvalPlan(JudgePlan(load_rules(), ()), _no_compare(), None))
    for i in range(4):
        core.add(as_result(host(f"h{i}"), f"h{i}.json"))
    held = core._records
    assert all(e.slice is not None and e.fleet and e.findings for e in held)
    report = core.finish("2026-12-03T00:00:00Z")
    assert {f.host for f in report.findings} == {f"h{i}" for i in range(4)}
    assert all(e.slice is None and e.fleet == () and e.findings == [] and e.view is None for e in held)
    with pytest.raises(RuntimeError, match="once"):
        core.finish("2026-12-03T00:00:01Z")
