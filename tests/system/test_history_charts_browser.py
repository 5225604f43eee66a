"""The history report's line charts as a reader sees them in headless Chromium at 1280 px (issue 35: "Findings by
severity hides one line under another and the charts use a third of the page"). The store: six saved reports
of tests/data/reports/fleet.json imported by the real CLI; the b hosts' critical, high and medium findings
arrive together on day 2, so the three severity lines hold the same counts at every scan. Each of them must be
seen (one of its marks is the topmost thing the browser paints at that spot), each drawn its own way, named
in the legend with its latest value; every chart spans most of the page's content width. The fleet's hostile
host name climbs highest and restarts a unit named like markup: the legends show both as text, nothing runs.
A saved report whose per-host series miss scans re-renders with gaps."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.history.folder import save_scan
from auditor.render.trend_pictures import OFFSET, SPREAD, _apart
from tests.system.test_browser import DATA, IMG, SCRIPT_HOST, DevTools
from tests.system.test_browser import browser as browser  # the module's headless Chromium
from tests.system.test_browser_a11y import CLIPPED, PHONE_HEIGHT, PHONE_WIDTH
from tests.system.test_history_report import DAYS, day

SEEN = """JSON.stringify((() => {
  const main = document.querySelector('main'), pad = getComputedStyle(main);
  const content = main.clientWidth - parseFloat(pad.paddingLeft) - parseFloat(pad.paddingRight);
  const chart = s => ({cls: s.getAttribute('class'), width: s.getBoundingClientRect().width});
  const series = [...document.querySelectorAll('svg.pic-severity g.series')].map(g => {
    const marks = [...g.querySelectorAll('circle, rect')];
    const path = g.querySelector('path'), box = path.getBoundingClientRect();
    return {name: g.dataset.name, values: g.dataset.values, dash: getComputedStyle(path).strokeDasharray,
      geometry: [path.getAttribute('d'), box.top, box.bottom].join(' '), marks: marks.length,
      onTop: marks.filter(m => { const r = m.getBoundingClientRect();
        const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
        return hit === m || (hit && m.contains(hit)); }).length};
  });
  const legend = [...document.querySelectorAll('#severity .pic-legend li')].map(li => li.textContent.trim());
  return {content, charts: [...document.querySelectorAll('svg.pic-trend')].map(chart), series, legend};
})())"""


def cli(*argv: str) -> None:
    err = io.StringIO()
    assert main(list(argv), Env(io.StringIO(), err)) == 0, err.getvalue()


LONG_ITEM = "node-exporter-extra-collectors-with-a-long-name.service"


def days() -> list[dict[str, Any]]:
    """The six days, the hostile host climbing, and a finding whose rule · item is longer than a phone is wide."""
    out = []
    for k in range(DAYS):
        doc = day(k)
        hostile = next(h for h in doc["hosts"] if h["name"] == SCRIPT_HOST)
        hostile["facts_summary"] = {"dying_memcgs": 3000 * k, "restarts": k, "unit_restarts": {IMG: k}}
        found = next(f for f in doc["findings"] if f["severity"] == "low" and not f["waived"])
        doc["findings"].append({**found, "item": LONG_ITEM})
        out.append(doc)
    return out


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("history-charts")
    for doc in days():
        save_scan(folder, doc)
    store = folder / "history.sqlite3"
    cli("history", "import", str(folder / "."), "--store", str(store))
    cli("history", "report", "--store", str(store), "--top", "3", "--out", str(folder / "history.html"))
    return folder / "history.html"


def test_equal_severity_lines_are_each_seen_drawn_apart_and_named(page: Path, browser: DevTools) -> None:
    browser.open(page, 1280, 900)
    browser.eval("document.getElementById('severity').scrollIntoView() || 1")  # elementFromPoint: on screen
    seen = browser.eval(SEEN)
    by = {s["name"]: s for s in seen["series"]}
    same = [by[sev] for sev in ("critical", "high", "medium")]
    assert len({s["values"] for s in same}) == 1, same  # the data: three lines on the same counts
    assert all(s["marks"] == DAYS for s in same), same
    hidden = [s["name"] for s in same if s["onTop"] == 0]
    assert not hidden, f"drawn under another line at every scan: {hidden}; {json.dumps(seen['series'])}"
    assert len({s["dash"] for s in same}) == 3, [s["dash"] for s in same]  # each line its own dash
    assert len({s["geometry"] for s in same}) == 3  # and not one path drawn three times
    latest = {sev: sum(1 for f in days()[-1]["findings"] if f["severity"] == sev and not f["waived"])
              for sev in ("critical", "high", "medium", "low")}
    assert seen["legend"] == [f"{sev} {n}" for sev, n in latest.items()], seen["legend"]


def test_charts_take_the_page_width_and_fit_a_phone(page: Path, browser: DevTools) -> None:
    browser.open(page, 1280, 900)
    seen = browser.eval(SEEN)
    assert len(seen["charts"]) == 3
    narrow = [c for c in seen["charts"] if c["width"] < 0.8 * seen["content"]]
    assert not narrow, f"content {seen['content']} px wide: {narrow}"
    browser.open(page, PHONE_WIDTH, PHONE_HEIGHT, mobile=True)  # the same text size: long names wrap, not cut
    assert LONG_ITEM in "".join(browser.eval("JSON.stringify([...document.querySelectorAll("
                                             "'svg.pic-timeline text')].map(t => t.textContent))"))
    clipped = browser.eval(CLIPPED)
    assert not clipped, json.dumps(clipped, indent=1)


def test_hostile_names_show_as_text_in_the_legends_and_run_nothing(page: Path, browser: DevTools) -> None:
    seen = browser.open(page, 1280, 900)
    assert seen["ran"] == [] and seen["images"] == 0 and seen["scripts"] == 1, seen["ran"]
    legends = browser.eval("JSON.stringify([...document.querySelectorAll('.pic-legend li')].map(li => "
                           "[li.dataset.name, li.textContent.trim()]))")
    assert [SCRIPT_HOST, f"{SCRIPT_HOST} 15,000"] in legends, legends  # the most at the latest scan: drawn
    assert [IMG, f"{IMG} 5"] in legends, legends


def test_a_saved_report_whose_series_miss_scans_draws_gaps(browser: DevTools, tmp_path: Path) -> None:
    """`report` re-renders a saved (untrusted) report: a host's series shorter or longer than the scans it
    names was an internal error (exit 4); what is missing is a gap, what is too much is cut."""
    doc = json.loads((DATA / "fleet.json").read_text(encoding="utf-8"))
    scans = [{"id": 1, "at": "2026-01-01T00:00:00Z"}, {"id": 2, "at": "2026-01-02T00:00:00Z"}]
    doc["history"] = {"scan_id": 3, "series": {"scans": scans, "hosts": {"b1": {
        "dying_memcgs": [5], "restarts": [1, 2, 3, 4], "unit_restarts": {"x.service": [1]}}}}}
    (tmp_path / "saved.json").write_text(json.dumps(doc), encoding="utf-8")
    cli("report", str(tmp_path / "saved.json"), "--format", "html", "--out", str(tmp_path / "out"))
    browser.open(tmp_path / "out" / "report.html")
    drawn = browser.eval("JSON.stringify([...document.querySelectorAll('svg.pic-host-dying g.series, "
                         "svg.pic-host-restarts g.series')].map(g => [g.dataset.name, g.dataset.values]))")
    b1 = next(h["facts_summary"] for h in doc["hosts"] if h["name"] == "b1")
    assert drawn == [["dying", f"5,,{b1['dying_memcgs']}"], ["all units", f"1,2,{b1['restarts']}"],
                     ["x.service", "1,,"]], drawn


def test_lines_on_one_spot_are_moved_apart_keeping_their_order() -> None:
    """Heights in px (smaller is higher): equal ones spread in line order, close ones keep the larger value
    higher, lines already apart and unknowns stay; a crowd is spread SPREAD px at most."""
    moved = _apart([[100.0, 50.0, None], [100.0, 50.5, 10.0], [100.0, 80.0, 10.0]])
    assert [ys[0] for ys in moved] == [100 - OFFSET, 100, 100 + OFFSET]
    assert moved[1][1] > moved[0][1] and moved[1][1] - moved[0][1] == OFFSET and moved[2][1] == 80.0
    assert moved[0][2] is None and moved[1][2] == 10 - OFFSET / 2 and moved[2][2] == 10 + OFFSET / 2
    crowd = [ys[0] for ys in _apart([[0.0]] * 9)]
    assert crowd == sorted(crowd) and max(crowd) - min(crowd) == SPREAD
