"""`history report` and the scan report's per-host history pictures, through the real CLI on a real store:
saved reports recorded by `history import` (six days of a fleet whose b hosts climb) and real `scan local`
runs, opened in headless Chromium. Each picture must carry the values the recorded scans hold (asserted from
the DOM against the reports that went in, not against the code that drew them), read without script,
pass axe-core and fit a 390 px phone."""

from __future__ import annotations

import copy
import io
import json
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.history import charts
from auditor.history.db import open_store
from auditor.history.folder import save_scan
from auditor.render.html_renderer import render
from tests.system.test_browser import DATA, DevTools
from tests.system.test_browser_a11y import AXE_RUN, CLIPPED, PHONE_HEIGHT, PHONE_WIDTH, axe_source
from tests.system.test_browser_a11y import browser as browser  # the module-scoped headless Chromium fixture

DAYS = 6
SEEN = """JSON.stringify((() => {
  const lines = s => [...s.querySelectorAll('g.series, g.others')].map(g => ({kind: g.getAttribute('class'),
    name: g.dataset.name, values: g.dataset.values.split(',').map(v => v === '' ? null : Number(v)),
    dots: g.querySelectorAll('circle').length}));
  const pic = s => s ? {label: s.getAttribute('aria-label'), title: s.querySelector('title')?.textContent,
    role: s.getAttribute('role'), scans: s.dataset.scans, lines: lines(s), text: s.textContent} : null;
  return {
    dying: pic(document.querySelector('svg.pic-dying-memcgs')),
    units: pic(document.querySelector('svg.pic-unit-restarts')),
    severity: pic(document.querySelector('svg.pic-severity')),
    timeline: [...document.querySelectorAll('svg.pic-timeline g.span')].map(g => Object.assign({}, g.dataset)),
    timelineLabel: document.querySelector('svg.pic-timeline')?.getAttribute('aria-label'),
    tables: [...document.querySelectorAll('details.data-table table')].map(t => t.textContent),
    csp: document.querySelector('meta[http-equiv="Content-Security-Policy"]').content,
    hostDying: [...document.querySelectorAll('svg.pic-host-dying')].map(pic),
    hostRestarts: [...document.querySelectorAll('svg.pic-host-restarts')].map(pic),
    hostChains: [...document.querySelectorAll('.host-pics svg.pic-chain')].map(s => ({host: s.dataset.host,
      numbers: [...s.querySelectorAll('g.link')].map(g => g.dataset.numbers)})),
  };
})())"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(out, err))
    return code, out.getvalue(), err.getvalue()


def day(k: int) -> dict[str, Any]:
    """fleet.json on day k: b1..b3 leak memcgs (b3 fastest) and ecs.service restarts; their findings start
    on day 2 (scan 3), the a hosts' two findings are there from the start."""
    doc = copy.deepcopy(json.loads((DATA / "fleet.json").read_text(encoding="utf-8")))
    at = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=DAYS - k, hours=1)
    doc["generated_at"] = at.isoformat().replace("+00:00", "Z")  # the days before the real scans that follow
    for host in doc["hosts"]:
        summary = host.get("facts_summary")
        if summary and host["name"].startswith("b"):
            summary.update(dying_memcgs=100 + k * 900 * int(host["name"][1]), restarts=7 * k,
                           unit_restarts={"ecs.service": 7 * k} if k else {})
    if k < 2:
        doc["findings"] = [f for f in doc["findings"] if not f["host"].startswith("b")]
    return doc


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """Six imported days, then two real scans of this machine (snapshots, real facts) in the same store."""
    folder = tmp_path_factory.mktemp("reports")
    docs = [day(k) for k in range(DAYS)]
    for doc in docs:
        save_scan(folder, doc)
    path = folder / "history.sqlite3"
    code, out, err = cli("history", "import", str(folder / "."), "--store", str(path))
    assert code == 0, err
    for run in range(2):
        code, _, err = cli("scan", "local", "--binary", "sh", "--store", str(path), "--format", "json",
                           "--out", str(folder / f"local{run}"), "--quiet")
        assert code in (0, 1, 3), err  # 3: an area timed out on a loaded machine; the scan is recorded all the same
        docs.append(json.loads((folder / f"local{run}" / "report.json").read_text(encoding="utf-8")))
    return path, docs


def copied(path: Path, folder: Path) -> Path:
    """The module's store copied (SQLite's backup API), for a test that writes to it."""
    out = folder / "copy.sqlite3"
    src, dst = sqlite3.connect(path), sqlite3.connect(out)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return out


def summary(doc: dict[str, Any], host: str, key: str) -> Any:
    return next(((h.get("facts_summary") or {}).get(key) for h in doc["hosts"] if h["name"] == host), None)


def test_history_report_draws_each_recorded_value(store, browser: DevTools, tmp_path: Path) -> None:
    path, docs = store
    code, _, err = cli("history", "report", "--store", str(path), "--top", "3", "--out", str(tmp_path) + "/")
    assert code == 0, err
    page = tmp_path / "history.html"
    browser.open(page)
    seen = browser.eval(SEEN)
    dying = seen["dying"]
    assert dying["role"] == "img" and dying["title"] and dying["scans"] == ",".join(map(str, range(1, 9)))
    drawn = {line["name"]: line["values"] for line in dying["lines"] if line["kind"] == "series"}
    assert list(drawn) == ["b3", "b2", "b1"]  # --top 3: the largest at their latest scan
    for host, values in drawn.items():
        assert values == [summary(d, host, "dying_memcgs") for d in docs], host
        assert f"{host} " + " → ".join(f"{v:,}" if v is not None else "unknown" for v in values) in dying["label"]
    others = {line["name"]: line["values"] for line in dying["lines"] if line["kind"] == "others"}
    rest = [h for h in {h["name"] for d in docs for h in d["hosts"]} - set(drawn)
            if any(isinstance(summary(d, h, "dying_memcgs"), int) for d in docs)]
    expect_max = [max((v for h in rest if isinstance(v := summary(d, h, "dying_memcgs"), int)), default=None)
                  for d in docs]
    assert others[f"other {len(rest)} hosts max"] == expect_max
    units = {line["name"]: line["values"] for line in seen["units"]["lines"]}
    assert units["ecs.service"][:DAYS] == [sum(7 * k for _ in range(3)) if k else None for k in range(DAYS)]
    severity = {line["name"]: line["values"] for line in seen["severity"]["lines"]}
    for sev in ("critical", "low"):
        assert severity[sev] == [sum(1 for f in d["findings"] if f["severity"] == sev and not f["waived"])
                                 for d in docs], sev
    first = {(s["rule"], s["item"]): int(s["firstScan"]) for s in seen["timeline"]}
    assert first[("systemd.unit-crash-looping", "ecs.service")] == 3 and first[("kernel.thp-mode", "")] == 1
    assert "systemd.unit-crash-looping" in seen["timelineLabel"]
    assert any("13,600" in t and "b3" in t for t in seen["tables"])  # the table fallback has the numbers
    scan_page = tmp_path / "scan.html"
    scan_page.write_text(render(docs[0]), encoding="utf-8")
    assert browser.open(scan_page) and browser.eval(SEEN)["csp"] == seen["csp"]  # the scan report's CSP


def test_history_report_needs_no_script_and_passes_axe_and_a_phone(store, browser: DevTools, tmp_path: Path) -> None:
    path, _ = store
    page = tmp_path / "h.html"
    assert cli("history", "report", "--store", str(path), "--out", str(page))[0] == 0
    browser.call("Emulation.setScriptExecutionDisabled", value=True)
    try:
        browser.open(page)
        assert browser.eval("document.querySelectorAll('svg.pic[role=img] title').length") >= 4
    finally:
        browser.call("Emulation.setScriptExecutionDisabled", value=False)
    shot = Path("/tmp") / "ami-auditor-history-report.png"
    browser.call("Emulation.setDeviceMetricsOverride", width=1280, height=1500, deviceScaleFactor=1, mobile=False)
    browser.screenshot(shot)
    print(f"\nscreenshot: {shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    browser.open(page, PHONE_WIDTH, PHONE_HEIGHT, mobile=True)
    clipped = browser.eval(CLIPPED)
    assert not clipped, json.dumps(clipped, indent=1)
    width = browser.eval("document.querySelector('svg.pic-dying-memcgs').getBoundingClientRect().width")
    assert width >= 330  # on a phone a chart takes the screen's width, not a thumbnail
    phone = Path("/tmp") / "ami-auditor-history-report-390.png"
    browser.screenshot(phone)
    print(f"screenshot: {phone}")
    for size in ((1400, 900), (PHONE_WIDTH, PHONE_HEIGHT)):
        browser.open(page, *size)
        browser.call("Runtime.evaluate", expression=axe_source(), returnByValue=True)
        result = browser.call("Runtime.evaluate", expression=AXE_RUN, awaitPromise=True, returnByValue=True)
        bad = [v for v in json.loads(result["result"]["value"]) if v["impact"] in ("serious", "critical")]
        assert not bad, json.dumps(bad, indent=1)[:4000]


def test_history_report_prints_its_pictures_inside_the_page(store, browser: DevTools, tmp_path: Path) -> None:
    page = tmp_path / "print.html"
    assert cli("history", "report", "--store", str(store[0]), "--out", str(page))[0] == 0
    browser.open(page, 800, 900)
    browser.call("Emulation.setEmulatedMedia", media="print")
    boxes = browser.eval("""JSON.stringify([...document.querySelectorAll('svg.pic')].map(s => {
      const r = s.getBoundingClientRect();
      return {cls: s.getAttribute('class'), w: r.width, right: r.right, page: document.documentElement.clientWidth};
    }))""")
    tables = browser.eval("[...document.querySelectorAll('details.data-table')].filter(d => d.offsetParent).length")
    browser.call("Emulation.setEmulatedMedia", media="")
    assert len(boxes) == 4 and all(b["w"] > 300 and b["right"] <= b["page"] for b in boxes), boxes
    assert tables == 0  # closed table fallbacks are left out of the print; the pictures carry the numbers


def test_history_report_stdout_json_and_exit_codes(store, tmp_path: Path) -> None:
    path, docs = store
    code, out, _ = cli("history", "report", "--store", str(path))
    assert code == 0 and out.startswith("<!DOCTYPE html>") and "pic-dying-memcgs" in out
    code, out, _ = cli("history", "report", "--store", str(path), "--format", "json", "--last", "2")
    doc = json.loads(out)
    assert code == 0 and [s["id"] for s in doc["scans"]] == [7, 8]
    assert doc["dying_memcgs"]["lines"][0]["values"] == [summary(d, "local", "dying_memcgs") for d in docs[-2:]]
    assert cli("history", "report", "--store", str(tmp_path / "none.sqlite3"))[0] == 2
    (tmp_path / "file").write_text("x")
    code, _, err = cli("history", "report", "--store", str(path), "--out", str(tmp_path / "file" / "h.html"))
    assert code == 2 and "--out" in err
    assert cli("history", "report", "--store", str(path), "--top", "0")[0] == 2


def test_history_report_reads_a_hostile_store_value_as_unknown_or_exit_2(store, tmp_path: Path) -> None:
    copy_path = copied(store[0], tmp_path)
    dst = sqlite3.connect(copy_path)
    dst.execute("""UPDATE scan_hosts SET summary = '{"dying_memcgs": "13600", "unit_restarts": {"x": -1}}'
                   WHERE scan_id = 6 AND host = 'b3'""")
    dst.commit()
    code, out, err = cli("history", "report", "--store", str(copy_path), "--format", "json")
    b3 = next(line for line in json.loads(out)["dying_memcgs"]["lines"] if line["name"] == "b3")
    assert code == 0 and b3["values"][5] is None, err  # text where a count was: unknown, a gap
    dst.execute("UPDATE scan_hosts SET summary = '{\"dying_memcgs\": [[[' WHERE scan_id = 6 AND host = 'b3'")
    dst.commit()
    dst.close()
    code, _, err = cli("history", "report", "--store", str(copy_path))
    assert code == 2 and "damaged value" in err and "scan 6 summary of b3" in err


def test_scan_report_host_detail_draws_its_history_and_its_own_chain(store, browser: DevTools,
                                                                      tmp_path: Path) -> None:
    path, docs = copied(store[0], tmp_path), store[1]
    out = tmp_path / "scan"
    code, _, err = cli("scan", "local", "--binary", "sh", "--store", str(path), "--format", "json,html",
                       "--out", str(out), "--quiet")
    assert code in (0, 1, 3), err
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    series = doc["history"]["series"]
    assert [s["id"] for s in series["scans"]] == list(range(1, 9))
    browser.open(out / "report.html")
    seen = browser.eval(SEEN)
    local = [summary(d, "local", "dying_memcgs") for d in docs] + [summary(doc, "local", "dying_memcgs")]
    assert [line["values"] for line in seen["hostDying"][0]["lines"]] == [local]
    assert seen["hostDying"][0]["scans"] == ",".join(map(str, range(1, 10)))
    # the fleet: its report re-rendered with the series the store gives its hosts (the real query), so each
    # b host's detail shows its own climb and its own chain numbers (41, 39, 44 restarts), not one group's
    fleet = docs[DAYS - 1]
    conn = open_store(path, create=False)
    try:
        fleet["history"] = {"scan_id": DAYS, "series": charts.host_series(conn, path, [h["name"] for h in
                                                                                     fleet["hosts"]], DAYS)}
    finally:
        conn.close()
    page = tmp_path / "fleet.html"
    page.write_text(render(fleet), encoding="utf-8")
    browser.open(page)
    seen = browser.eval(SEEN)
    chains = {c["host"]: c["numbers"] for c in seen["hostChains"]}
    assert {h: chains[h][-1] for h in ("b1", "b2", "b3")} == {"b1": "41", "b2": "39", "b3": "44"}
    dying = {s["title"].split(" on ")[-1]: s["lines"][0]["values"] for s in seen["hostDying"]}
    assert dying["b2"] == [summary(d, "b2", "dying_memcgs") for d in docs[:DAYS]]
    browser.eval("(document.querySelectorAll('details.drill').forEach(d => { d.open = true; }), "
                 "document.querySelector('.host-pics').scrollIntoView(), 1)")
    shot = Path("/tmp") / "ami-auditor-host-detail.png"
    browser.screenshot(shot)
    print(f"\nscreenshot: {shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    browser.open(page, PHONE_WIDTH, PHONE_HEIGHT, mobile=True)
    browser.eval("document.querySelectorAll('details.drill').forEach(d => { d.open = true; }) || 1")
    clipped = browser.eval(CLIPPED)
    assert not clipped, json.dumps(clipped, indent=1)
