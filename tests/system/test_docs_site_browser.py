"""The documentation site's first page in headless Chromium (tests/system/test_browser.py's DevTools): on a laptop
screen the header, the navigation's sections and README's Quick start command are on the first screen; on a 390 px
phone nothing is wider than the screen; the page fetches nothing from the network. The screenshots are kept
(their paths printed) so a person can look at them."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from tests.system.test_browser import DevTools, browser  # noqa: F401  (browser: the shared headless Chromium)
from tests.system.test_docs_site import ROOT, site  # noqa: F401  (site: the strict build, once per module)

FIRST_SCREEN = """(() => {
  const box = el => { if (!el) return null; const r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  const code = [...document.querySelectorAll('pre code')].find(c => c.textContent.includes('scan local'));
  return JSON.stringify({
    title: document.title, h1: document.querySelector('h1') && document.querySelector('h1').textContent,
    header: box(document.querySelector('header')), quickstart: box(code), command: code && code.textContent,
    nav: [...document.querySelectorAll('nav.md-nav--primary > ul > li > label, nav.md-nav--primary > ul > li > a')]
      .map(e => e.textContent.trim()).filter(Boolean),
    width: document.scrollingElement.scrollWidth, viewport: [window.innerWidth, window.innerHeight],
    fetched: performance.getEntriesByType('resource').map(e => e.name).filter(n => !n.startsWith('file:')),
  });
})()"""


def test_the_first_page_shows_what_it_is_and_the_quick_start_on_the_first_screen(site: Path,  # noqa: F811
                                                                                  browser: DevTools,  # noqa: F811
                                                                                  ) -> None:
    shots = Path(tempfile.mkdtemp(prefix="ami-auditor-docs-screens-"))
    browser.open(site / "index.html", width=1280, height=800)
    seen = browser.eval(FIRST_SCREEN)  # DevTools.eval parses the JSON
    shot = browser.screenshot(shots / "docs-first-page.png")
    print(f"\nscreenshot: {shot}")
    assert seen["title"].startswith("ami-auditor") and seen["h1"].strip().startswith("ami-auditor")
    def one_line(command: str) -> str:
        return " ".join(command.replace("\\\n", " ").split())

    quick_start = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[0]
    assert one_line(seen["command"]) == one_line(quick_start)  # the same Quick start as README's
    assert seen["quickstart"]["top"] >= 0 and seen["quickstart"]["bottom"] <= 800, seen["quickstart"]
    assert {"User guide", "Deploy", "Reference"} <= set(seen["nav"]), seen["nav"]
    assert seen["fetched"] == [], "the site fetches from the network"
    browser.open(site / "index.html", width=390, height=844, mobile=True)
    phone = browser.eval(FIRST_SCREEN)
    shot = browser.screenshot(shots / "docs-first-page-phone.png")
    print(f"screenshot: {shot}")
    assert phone["width"] <= 390, phone["width"]
