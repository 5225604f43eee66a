"""The HTML report's accessibility and small screens, checked by real consumers: axe-core (npm, injected
over the DevTools protocol into Debian's headless Chromium, offline) on every scenario report, and a 390 px
wide phone viewport where nothing may be clipped (wide content wraps or scrolls inside its own box)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from auditor.render.html_renderer import render
from tests.paths import CONSUMERS
from tests.system.test_browser import DATA, DevTools, chromium_binary

AXE = CONSUMERS / "node_modules" / "axe-core" / "axe.min.js"
SCENARIOS = sorted(p.stem for p in DATA.glob("*.json"))
PHONE_WIDTH, PHONE_HEIGHT = 390, 844

AXE_RUN = """axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(r.violations.map(v => ({
  id: v.id, impact: v.impact, help: v.help,
  nodes: v.nodes.map(n => ({target: n.target.join(' '), summary: n.failureSummary}))}))))"""

# What a phone would not show: the page wider than the screen, content cut off by a box that hides its
# overflow, content spilling out of its box over its neighbours, or an element past the screen's right edge
# that no scrolling box holds. (Wide tables scroll inside their own box; that is allowed and reachable.)
CLIPPED = """JSON.stringify((() => {
  const out = [], doc = document.documentElement;
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (typeof el.className === 'string' && el.className ? '.' + el.className.split(' ').join('.') : '');
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const held = el => { for (let p = el.parentElement; p && p !== document.body; p = p.parentElement)
    if (scrolls(p)) return true; return false; };
  for (const el of [doc, document.body])
    if (el.scrollWidth > el.clientWidth) out.push({el: name(el), why: 'page scrolls sideways',
                                                   scroll: el.scrollWidth, client: el.clientWidth});
  for (const el of document.body.querySelectorAll('*')) {
    if (!el.getClientRects().length || (el.checkVisibility && !el.checkVisibility())) continue;
    const svg = el.ownerSVGElement;
    if (svg) {  // inside a picture CSS boxes mean nothing: what falls outside the SVG's viewport is cut off
      const r = el.getBoundingClientRect(), s = svg.getBoundingClientRect();
      if (r.right > s.right + 1 || r.left < s.left - 1 || r.bottom > s.bottom + 1)
        out.push({el: name(el), why: 'cut off by its picture', right: Math.round(r.right), edge: Math.round(s.right),
                  text: el.textContent.trim().slice(0, 50)});
      continue;
    }
    const style = getComputedStyle(el), r = el.getBoundingClientRect();
    const spills = el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1 && !scrolls(el);
    if (spills && style.display !== 'inline' && el.tagName !== 'TABLE' && el.tagName !== 'TR')
      out.push({el: name(el), why: style.overflowX === 'visible' ? 'content spills out' : 'content cut off',
                scroll: el.scrollWidth, client: el.clientWidth, text: el.textContent.trim().slice(0, 50)});
    else if (r.right > doc.clientWidth + 1 && !held(el))
      out.push({el: name(el), why: 'past the right edge', right: Math.round(r.right),
                text: el.textContent.trim().slice(0, 50)});
  }
  return out.slice(0, 20);
})())"""


def axe_source() -> str:
    if not AXE.is_file():
        pytest.skip("axe-core not installed: bash .ci/setup.d/50-consumers.sh")
    return AXE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    tools = DevTools(chromium_binary(), tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield tools
    finally:
        tools.close()


def report_page(scenario: str, folder: Path) -> Path:
    path = folder / f"{scenario}.html"
    path.write_text(render(json.loads((DATA / f"{scenario}.json").read_text(encoding="utf-8"))), encoding="utf-8")
    return path


def axe_violations(browser: DevTools, page: Path, width: int, height: int) -> list[dict]:
    browser.open(page, width, height)
    browser.call("Runtime.evaluate", expression=axe_source(), returnByValue=True)  # DevTools is not bound by CSP
    result = browser.call("Runtime.evaluate", expression=AXE_RUN, awaitPromise=True, returnByValue=True)
    return json.loads(result["result"]["value"])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_axe_finds_no_serious_or_critical_violation(browser: DevTools, tmp_path: Path, scenario: str) -> None:
    page = report_page(scenario, tmp_path)
    for width, height in ((1400, 900), (PHONE_WIDTH, PHONE_HEIGHT)):
        bad = [v for v in axe_violations(browser, page, width, height) if v["impact"] in ("serious", "critical")]
        assert not bad, json.dumps(bad, indent=1)[:4000]


@pytest.fixture(scope="module")
def shots() -> Path:
    """Screenshots outlive the test run so a person can look at them."""
    return Path(tempfile.mkdtemp(prefix="ami-auditor-screens-390-"))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_readable_at_390_px_nothing_clipped(browser: DevTools, tmp_path: Path, shots: Path, scenario: str) -> None:
    page = report_page(scenario, tmp_path)
    browser.open(page, PHONE_WIDTH, PHONE_HEIGHT, mobile=True)
    clipped = browser.eval(CLIPPED)
    height = browser.eval("document.documentElement.scrollHeight")
    browser.call("Emulation.setDeviceMetricsOverride", width=PHONE_WIDTH, height=min(int(height), 6000),
                 deviceScaleFactor=1, mobile=True)
    shot = browser.screenshot(shots / f"{scenario}-390.png")  # the whole page, 390 px wide
    assert not clipped, f"{shot}: {json.dumps(clipped, indent=1)}"

