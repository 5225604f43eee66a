"""The report streams where it grows: a fresh report's document makes its hosts, findings and drift as they
are read (reportdoc.Rows), so the JSON written a slice at a time is the same text the whole document gave,
and making, checking and writing it holds about as much for 4N hosts as for N. The HTML lists the first
hosts of a class and counts the rest (the JSON has every host)."""

from __future__ import annotations

import json
import re
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest

from auditor.compare.stage import prepare as compare_prepare
from auditor.evaluate.core import EvalPlan, evaluate
from auditor.judge.rules import load_rules
from auditor.judge.stage import JudgePlan
from auditor.models import HostResult, HostSpec, Report
from auditor.options import CompareOptions
from auditor.render import html_renderer, json_renderer
from auditor.reportdoc import Rows, report_document, report_to_dict, validate_report
from tests.paths import DATA

FLEET = DATA / "compare" / "fleet"
# the whole document as the code before streaming wrote it (reportdoc.report_to_dict + render_bytes at
# 1b64c33) for small_fleet_report(tmp_path); tool_version is left out of the comparison
BEFORE = DATA / "reports" / "stream-before.json"


def small_fleet_report(tmp: Path) -> Report:
    """Six recorded hosts and one not reached, judged, compared with a baseline captured from the golden host
    and grouped by AZ by the product's evaluation core; one finding and one drift item carry a first-seen time."""
    from auditor.compare.capture import capture, render

    baseline = tmp / "baseline.yaml"
    baseline.write_text(render(*capture(json.loads((FLEET / "golden.json").read_text()))))
    results = []
    for path in sorted(FLEET.glob("[ab][0-9].json")):
        snap = json.loads(path.read_text())
        results.append(HostResult(HostSpec(snap["name"], snap["target"], dict(snap["labels"])), "ok", None, snap,
                                  0.25))
    results.append(HostResult(HostSpec("c1", "ssh://10.0.0.99", {"az": "us-east-1c"}), "timeout", "no answer in 30s"))
    compare = compare_prepare(CompareOptions(baseline=str(baseline), group_by="az"), frozenset())
    report = evaluate(EvalPlan(JudgePlan(load_rules(), ()), compare, "high"), results, "2026-12-05T00:00:00Z")
    assert report.baseline is not None  # where and when it was captured: the same in every run
    report.baseline = dict(report.baseline, path="baseline.yaml", captured_at="2026-12-04T00:00:00Z")
    report.rules = [dict(r, source=Path(r["source"]).name) if r.get("source") else r for r in report.rules]
    report.findings[0] = replace(report.findings[0], first_seen="2026-12-01T00:00:00Z")
    report.drift[0] = replace(report.drift[0], first_seen="2026-12-02T00:00:00Z")
    return report


def _no_version(data: bytes) -> bytes:
    return re.sub(rb'\n  "tool_version": "[^"]*",', b"", data, count=1)


@pytest.mark.parametrize("slice_size", [1, 3, 250])
def test_the_streamed_json_is_the_whole_document_the_code_before_wrote(monkeypatch: pytest.MonkeyPatch,
                                                                        slice_size: int, tmp_path: Path) -> None:
    monkeypatch.setattr(json_renderer, "_SLICE", slice_size)
    report = small_fleet_report(tmp_path)
    doc = report_document(report)
    assert all(isinstance(doc[k], Rows) for k in ("hosts", "findings", "drift"))  # made as read, not held
    assert len(doc["findings"]) > 3 and len(doc["drift"]) > 3  # several slices at the smaller sizes
    validate_report(doc, as_json=True)
    streamed = b"".join(json_renderer.render_chunks(doc))
    assert _no_version(streamed) == _no_version(BEFORE.read_bytes())
    assert json_renderer.render_bytes(doc) == streamed == json_renderer.render_bytes(report_to_dict(report))


def test_a_document_read_twice_reads_the_same_and_the_report_is_not_changed(tmp_path: Path) -> None:
    report = small_fleet_report(tmp_path)
    findings, drift = list(report.findings), list(report.drift)
    doc = report_document(report)
    first = json.loads(b"".join(json_renderer.render_chunks(doc)))
    html_renderer.render(doc)  # another reader of the same rows
    assert json.loads(b"".join(json_renderer.render_chunks(doc))) == first
    assert report.findings == findings and report.drift == drift  # nothing let go: the rows are made from them


def fleet_of(report: Report, n: int) -> Report:
    """The small fleet's hosts, findings and drift repeated under new host names up to n hosts: a big
    finished report made of the product's own objects."""
    hosts, findings, drift = [], [], []
    by_host = {h.name: h for h in report.hosts}
    for i in range(n):
        host = report.hosts[i % len(report.hosts)]
        name = f"{host.name}-{i:05d}"
        hosts.append(HostResult(replace(host.spec, name=name), host.status, host.error, host.snapshot,
                                host.duration_s, host.summary))
        findings += [replace(f, host=name) for f in report.findings if f.host == host.name]
        drift += [replace(d, host=name) for d in report.drift if d.host == host.name]
    assert set(by_host) >= {f.host for f in report.findings}
    return Report(hosts=hosts, generated_at=report.generated_at, fail_on=report.fail_on, findings=findings,
                  drift=drift, comparison=report.comparison, baseline=report.baseline, rules=report.rules,
                  exit_code=report.exit_code)


def _held_to_write(report: Report, out: Path) -> int:
    """Peak bytes Python allocated to make the report's document, check it against the schema and write its
    JSON (beyond what the finished report holds)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        doc = report_document(report)
        validate_report(doc, as_json=True)
        with out.open("wb") as f:
            for piece in json_renderer.render_chunks(doc):
                f.write(piece)
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def test_writing_the_report_holds_no_more_for_4n_hosts_than_for_n(tmp_path: Path) -> None:
    small = small_fleet_report(tmp_path)
    n = 700  # more rows than a schema chunk (500) and a JSON slice (250) in every growing section
    peaks = {}
    for size in (n, 4 * n):
        report = fleet_of(small, size)
        peaks[size] = _held_to_write(report, tmp_path / f"report-{size}.json")
        doc = json.loads((tmp_path / f"report-{size}.json").read_text())
        assert len(doc["hosts"]) == size and len(doc["findings"]) == len(report.findings)
    # a whole document held grows with the hosts (4x); rows made a slice at a time do not
    assert peaks[4 * n] < 1.3 * peaks[n] + 256 * 1024, peaks


def test_the_html_lists_a_classes_first_hosts_and_counts_the_rest(tmp_path: Path) -> None:
    small = small_fleet_report(tmp_path)
    same = Report(hosts=[], generated_at=small.generated_at, fail_on="high", rules=small.rules)
    sizes = {}
    for size in (300, 1200):  # one class of identical clean hosts
        spec, host = small.hosts[0].spec, small.hosts[0]
        same.hosts = [HostResult(replace(spec, name=f"h{i:05d}"), "ok", None, host.snapshot, 0.1, host.summary)
                      for i in range(size)]
        html = html_renderer.render(report_document(same))
        assert f"<b>{size}</b> · h00000, h00001" in html
        assert f"… and {size - 200} more in the JSON report" in html and "h00199" in html and "h00200" not in html
        sizes[size] = len(html)
    assert sizes[1200] - sizes[300] < 100, sizes  # only the counts' digits differ


def test_rows_are_a_read_only_sequence() -> None:
    rows = Rows([1, 2, 3], lambda n: {"n": n})
    assert len(rows) == 3 and rows[1] == {"n": 2} and rows[-1] == {"n": 3} and rows[1:] == [{"n": 2}, {"n": 3}]
    assert list(rows) == [{"n": 1}, {"n": 2}, {"n": 3}] and rows[0] is not rows[0]  # made on each read
