"""The HTML report's pictures (inline SVG, drawn server-side) in headless Chromium: each picture carries the
values it draws (asserted from the DOM against the report document), has a text alternative, and stays
readable on a phone — a 192-core host wraps its CPU strip into rows instead of spilling past 390 px."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from auditor.render.html_renderer import render
from tests import paths
from tests.system.test_browser import DATA, DevTools, chromium_binary
from tests.system.test_browser_a11y import AXE_RUN, CLIPPED, PHONE_HEIGHT, PHONE_WIDTH, axe_source

PICTURES = """JSON.stringify((() => {
  const data = el => Object.assign({}, el.dataset);
  const box = el => { const r = el.getBoundingClientRect(); return {left: r.left, right: r.right, width: r.width}; };
  return {
    chains: [...document.querySelectorAll('svg.pic-chain')].map(s => ({
      label: s.getAttribute('aria-label'), role: s.getAttribute('role'), title: s.querySelector('title')?.textContent,
      host: s.dataset.host, boxes: [...s.querySelectorAll('g.link')].map(g => {
        const t = g.querySelector('text').getBBox(), r = g.querySelector('rect').getBBox();
        return {...data(g), shown: g.querySelector('text').textContent,
                fits: t.x >= r.x && t.y >= r.y && t.x + t.width <= r.x + r.width && t.y + t.height <= r.y + r.height};
      }),
      arrows: s.querySelectorAll('.arrow').length, text: s.textContent})),
    cpu: [...document.querySelectorAll('svg.pic-cpu')].map(s => ({
      label: s.getAttribute('aria-label'), ...data(s), box: box(s),
      cores: [...s.querySelectorAll('rect.core')].map(data),
      rows: new Set([...s.querySelectorAll('rect.core')].map(r => r.getAttribute('y'))).size,
      hot: [...s.querySelectorAll('.hot')].map(e => e.textContent), text: s.textContent})),
    bars: [...document.querySelectorAll('svg.pic-bars')].map(s => ({
      label: s.getAttribute('aria-label'), ...data(s),
      bars: [...s.querySelectorAll('rect.bar')].map(data), text: s.textContent})),
  };
})())"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    tools = DevTools(chromium_binary(), tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield tools
    finally:
        tools.close()


def fleet() -> dict:
    return json.loads((DATA / "fleet.json").read_text(encoding="utf-8"))


def page(doc: dict, folder: Path, name: str) -> Path:
    path = folder / f"{name}.html"
    path.write_text(render(doc), encoding="utf-8")
    return path


def many_cores(count: int = 192, hot: int = 137) -> dict:
    """fleet.json with b1 on a 192-core host, one core pinned in system time by one thread."""
    doc = copy.deepcopy(fleet())
    b1 = next(h for h in doc["hosts"] if h["name"] == "b1")
    cores = [[i, round(3 + (i * 7) % 11, 1), round(1 + (i * 3) % 5, 1)] for i in range(count)]
    cores[hot] = [hot, 2.0, 97.0]
    b1["facts_summary"]["cpu"] = {"count": count, "window_s": 1.0, "cores": cores, "max_core": hot,
                                  "max_core_system_pct": 97.0,
                                  "hot_thread": {"pid": 4242, "tid": 4250, "comm": "kworker/137:1+memcg",
                                                 "ticks": 97, "system_ticks": 96}}
    return doc


def test_chain_picture_draws_each_link_with_its_numbers(browser: DevTools, tmp_path: Path) -> None:
    doc = fleet()
    browser.open(page(doc, tmp_path, "fleet"))
    seen = browser.eval(PICTURES)
    assert seen["chains"], "no chain picture"
    chain = seen["chains"][0]
    first = next(c for c in doc["chains"] if c["host"] == chain["host"])
    assert chain["role"] == "img" and chain["label"] and first["host"] in chain["title"]
    assert [b["text"] for b in chain["boxes"]] == [link["text"] for link in first["links"]]
    assert [b["rule"] for b in chain["boxes"]] == [link["rule"] for link in first["links"]]
    assert chain["boxes"][1]["numbers"] == "41" and "41" in chain["text"] and "41" in chain["label"]
    assert chain["arrows"] == len(first["links"]) - 1
    assert all(b["fits"] for b in chain["boxes"]), chain["boxes"]


def test_chain_picture_wraps_long_host_text_inside_its_boxes_as_text(browser: DevTools, tmp_path: Path) -> None:
    doc = fleet()
    long = "unit <script>alert(1)</script>-" + "x" * 90 + ".service restarted 7 times\u202e"
    for chain in doc["chains"]:
        chain["links"][1]["text"] = long
    seen = browser.open(page(doc, tmp_path, "long"))
    assert seen["ran"] == []
    chain = browser.eval(PICTURES)["chains"][0]
    box = chain["boxes"][1]
    assert box["fits"], box
    assert box["text"] == long.replace("\u202e", "\\u202e") and box["numbers"] == "1 7"
    assert "<script>" in box["shown"] and "\\u202e" in box["shown"]  # wrapped lines, shown as text


def test_cpu_strip_carries_each_core_and_marks_the_hot_one(browser: DevTools, tmp_path: Path) -> None:
    doc = fleet()
    browser.open(page(doc, tmp_path, "fleet"))
    seen = browser.eval(PICTURES)
    drawn = {s["host"]: s for s in seen["cpu"]}
    with_cpu = {h["name"]: h["facts_summary"]["cpu"] for h in doc["hosts"] if (h.get("facts_summary") or {}).get("cpu")}
    assert with_cpu and set(drawn) == set(with_cpu)
    for host, cpu in with_cpu.items():
        strip = drawn[host]
        assert [(int(c["cpu"]), float(c["user"]), float(c["system"])) for c in strip["cores"]] == \
            [tuple(c) for c in cpu["cores"]]
        assert int(strip["hotCore"]) == cpu["max_core"] and strip["hot"]
        thread = cpu["hot_thread"]
        if thread:
            assert thread["comm"] in " ".join(strip["hot"]) and str(thread["tid"]) in strip["label"]
        assert f"{cpu['max_core_system_pct']:g}" in strip["label"]


def test_bars_per_group_carry_dying_memcgs_and_restarts_and_mark_outliers(browser: DevTools, tmp_path: Path) -> None:
    doc = fleet()
    browser.open(page(doc, tmp_path, "fleet"))
    seen = browser.eval(PICTURES)
    by_group = {(s["group"], s["measure"]): s for s in seen["bars"]}
    assert {m for _, m in by_group} == {"dying_memcgs", "restarts"}
    for host in doc["hosts"]:
        fs = host.get("facts_summary") or {}
        if fs.get("dying_memcgs") is None:
            continue
        chart = by_group[(host["labels"]["az"], "dying_memcgs")]
        bar = next(b for b in chart["bars"] if b["host"] == host["name"])
        assert int(bar["value"]) == fs["dying_memcgs"] and host["name"] in chart["text"]
        assert (bar["outlier"] == "1") == (fs["dying_memcgs"] > 1000), host["name"]  # b1..b3 climb, a* do not
        chart = by_group[(host["labels"]["az"], "restarts")]
        bar = next(b for b in chart["bars"] if b["host"] == host["name"])
        assert int(bar["value"]) == fs["restarts"]


def test_192_cores_wrap_into_rows_readable_at_390_px_and_axe_clean(browser: DevTools, tmp_path: Path) -> None:
    path = page(many_cores(), tmp_path, "cores192")
    browser.open(path, PHONE_WIDTH, PHONE_HEIGHT, mobile=True)
    strip = next(s for s in browser.eval(PICTURES)["cpu"] if s["host"] == "b1")
    assert len(strip["cores"]) == 192 and strip["rows"] >= 4
    assert strip["hotCore"] == "137" and any("kworker/137:1+memcg" in h for h in strip["hot"])
    assert strip["box"]["right"] <= PHONE_WIDTH and strip["box"]["width"] >= 300  # fits, and is not a thumbnail
    clipped = browser.eval(CLIPPED)
    assert not clipped, json.dumps(clipped, indent=1)
    for width, height in ((1400, 900), (PHONE_WIDTH, PHONE_HEIGHT)):
        browser.open(path, width, height)
        browser.call("Runtime.evaluate", expression=axe_source(), returnByValue=True)
        result = browser.call("Runtime.evaluate", expression=AXE_RUN, awaitPromise=True, returnByValue=True)
        bad = [v for v in json.loads(result["result"]["value"]) if v["impact"] in ("serious", "critical")]
        assert not bad, json.dumps(bad, indent=1)[:4000]


def test_screenshot_of_the_scan_report_pictures(browser: DevTools, tmp_path: Path) -> None:
    """A screenshot of the pictures section for a person to look at; the test checks it is a real picture."""
    path = page(many_cores(), tmp_path, "fleet-pictures")
    browser.open(path)
    top = browser.eval("Math.round(document.getElementById('pictures').getBoundingClientRect().top + window.scrollY)")
    browser.eval(f"window.scrollTo(0, {top})")
    shot = Path("/tmp") / "ami-auditor-pictures.png"
    browser.screenshot(shot)
    print(f"\nscreenshot: {shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_analyze_through_the_cli_draws_a_strip_per_host_from_its_snapshot(browser: DevTools, tmp_path: Path) -> None:
    """The real path: snapshots → analyze → report.json's facts_summary → the HTML's pictures."""
    import io

    from auditor.cli import main
    from auditor.context import Env

    snaps = paths.DATA / "snapshots"
    out, err = io.StringIO(), io.StringIO()
    main(["analyze", "--jobs", "1", "--group-by", "az", "--format", "json,html", "--out", str(tmp_path / "r"),
          str(snaps)], Env(stdout=out, stderr=err))
    doc = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    browser.open(tmp_path / "r" / "report.html")
    seen = browser.eval(PICTURES)
    for snap_file in sorted(snaps.glob("*.json")):
        snap = json.loads(snap_file.read_text(encoding="utf-8"))
        host = next(h for h in doc["hosts"] if h["target"] == str(snap.get("target")) or
                    h["name"] == (snap.get("host") or {}).get("hostname"))
        strip = next(s for s in seen["cpu"] if s["host"] == host["name"])
        cores = snap["facts"]["cpu"]["cores"]
        assert [(int(c["cpu"]), float(c["system"])) for c in strip["cores"]] == \
            [(c["cpu"], c["system_pct"]) for c in cores]
        assert int(strip["hotCore"]) == snap["facts"]["cpu"]["max_core"]
    restarts = {b["host"]: int(b["value"]) for s in seen["bars"] if s["measure"] == "restarts" for b in s["bars"]}
    assert restarts == {h["name"]: h["facts_summary"]["restarts"] for h in doc["hosts"]} and max(restarts.values()) > 0


def test_pictures_print_inside_the_page(browser: DevTools, tmp_path: Path) -> None:
    browser.open(page(many_cores(), tmp_path, "print"), 800, 900)
    browser.eval("document.querySelectorAll('details.drill').forEach(d => { d.open = true; }) || 1")
    browser.call("Emulation.setEmulatedMedia", media="print")
    # the host detail's own pictures (in a drill-down, opened) print inside their table cell; the others
    # inside the page
    boxes = browser.eval("""JSON.stringify([...document.querySelectorAll('svg.pic')].map(s => {
      const r = s.getBoundingClientRect(), cell = s.closest('td');
      return {w: r.width, right: r.right, shown: getComputedStyle(s).display !== 'none', detail: !!cell,
              page: cell ? cell.getBoundingClientRect().right : document.documentElement.clientWidth}; }))""")
    browser.call("Emulation.setEmulatedMedia", media="")
    assert boxes and all(b["shown"] and b["w"] > 100 and b["right"] <= b["page"] for b in boxes), boxes
    assert any(b["detail"] for b in boxes) and any(not b["detail"] for b in boxes), boxes
