"""The HTML report in a real browser: headless Chromium (Debian's `chromium`), driven over the DevTools
protocol. Screenshot of the first screen, the ranked comparison through the DOM, and hostile host
strings that must show as text and run nothing — with and without the page's CSP.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.render.html_renderer import render
from tests.paths import DATA

DATA = DATA / "reports"
WIDTH, HEIGHT = 1400, 900
IMG = "<img src=x onerror=alert(1)>"
SCRIPT_HOST = "b4</script><script>alert(1)</script>"

# Runs before any page script: records anything that tries to run (dialogs, CSP-blocked attempts).
TRIPWIRE = """
window.__ran = [];
(function () {
  function mark(what) { window.__ran.push(what); }
  window.alert = function () { mark("alert"); };
  window.confirm = function () { mark("confirm"); return false; };
  window.prompt = function () { mark("prompt"); return null; };
  document.addEventListener("securitypolicyviolation", function (e) { mark("csp:" + e.violatedDirective); });
})();
"""

PROBE = """(() => {
  const facts = [...document.querySelectorAll('#heatmap tbody tr')].filter(r => !r.hidden)
    .map(r => r.querySelector('.fact').textContent);
  const box = id => { const el = document.getElementById(id); if (!el) return null;
    const r = el.getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; };
  return JSON.stringify({
    ran: window.__ran, ready: document.documentElement.getAttribute('data-ready'),
    facts, images: document.images.length, scripts: document.scripts.length,
    text: document.body.innerText, evidence: [...document.querySelectorAll('details.evidence pre')]
      .map(p => p.textContent),
    topSplit: box('top-split'), topFinding: box('top-finding'), viewport: window.innerHeight,
  });
})()"""


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    reason = "no chromium (apt-get install -y chromium; .ci/run installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


class DevTools:
    """A headless Chromium and one page, spoken to over the DevTools websocket on 127.0.0.1."""

    def __init__(self, binary: str, profile: Path) -> None:
        websocket = pytest.importorskip("websocket", reason="pip install websocket-client (test extra)")
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--window-size={WIDTH},{HEIGHT}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            page = next(t for t in json.load(resp) if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(method)
            self.events.append(json.loads(self.ws.recv()))

    def open(self, path: Path, width: int = WIDTH, height: int = HEIGHT, mobile: bool = False) -> dict[str, Any]:
        """Load a file with the tripwire armed; return what PROBE sees once the page has loaded."""
        self.events.clear()
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=mobile)
        self.call("Page.addScriptToEvaluateOnNewDocument", source=TRIPWIRE)
        self.call("Page.navigate", url=path.resolve().as_uri())
        self.wait_event("Page.loadEventFired")
        return self.eval(PROBE)

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        value = result["result"].get("value")
        return json.loads(value) if isinstance(value, str) and value[:1] in "{[" else value

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if getattr(self, "ws", None):
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[DevTools]:
    binary = chromium_binary()
    with tempfile.TemporaryDirectory(prefix="ami-auditor-chromium-") as profile:
        tools = DevTools(binary, Path(profile))
        try:
            yield tools
        finally:
            tools.close()


@pytest.fixture(scope="module")
def shots() -> Path:
    """Screenshots outlive the test run so a person can look at them."""
    return Path(tempfile.mkdtemp(prefix="ami-auditor-screens-"))


def fleet_html(tmp_path: Path, strip_csp: bool = False) -> Path:
    html = render(json.loads((DATA / "fleet.json").read_text(encoding="utf-8")))
    if strip_csp:
        start = html.index('<meta http-equiv="Content-Security-Policy"')
        html = html[:start] + html[html.index(">", start) + 1:]
        assert "Content-Security-Policy" not in html
    path = tmp_path / ("fleet-nocsp.html" if strip_csp else "fleet.html")
    path.write_text(html, encoding="utf-8")
    return path


def test_first_screen_names_the_culprit_and_the_table_ranks_it_first(browser: DevTools, shots: Path,
                                                                     tmp_path: Path) -> None:
    seen = browser.open(fleet_html(tmp_path))
    shot = browser.screenshot(shots / "fleet-first-screen.png")
    print(f"\nscreenshot: {shot}")
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert seen["ready"] == "1", "the report's script did not run (CSP hash mismatch?)"
    assert seen["facts"][0] == "facts.systemd.units[ecs.service].unit_file_state"
    assert "kubelet" in seen["facts"][1]
    for box in (seen["topSplit"], seen["topFinding"]):
        assert box is not None and box["top"] >= 0 and box["bottom"] <= seen["viewport"] == HEIGHT  # first screen
    assert "ecs.service is crash-looping" in seen["text"]


@pytest.mark.parametrize("strip_csp", [False, True], ids=["with-csp", "without-csp"])
def test_hostile_host_strings_show_as_text_and_run_nothing(browser: DevTools, tmp_path: Path,
                                                           strip_csp: bool) -> None:
    seen = browser.open(fleet_html(tmp_path, strip_csp))
    assert seen["ran"] == [], f"something ran or tried to: {seen['ran']}"
    assert seen["images"] == 0 and seen["scripts"] == 1
    assert IMG in seen["text"] and SCRIPT_HOST in seen["text"]  # visible, as text
    assert any(IMG in e for e in seen["evidence"])  # the unit description inside finding evidence
    assert seen["ready"] == "1"


def test_tables_filter_sort_and_page_in_the_browser(browser: DevTools, tmp_path: Path) -> None:
    browser.open(fleet_html(tmp_path))
    visible = "[...document.querySelectorAll('#heatmap tbody tr')].filter(r => !r.hidden).length"
    assert browser.eval(visible) == 3
    browser.eval("""(() => { const i = document.querySelector('#heatmap')
        .closest('.scroll').previousElementSibling.querySelector('input');
      i.value = 'kubelet'; i.dispatchEvent(new Event('input')); })()""")
    assert browser.eval(visible) == 1
    browser.eval("""(() => { const i = document.querySelector('#heatmap')
        .closest('.scroll').previousElementSibling.querySelector('input');
      i.value = ''; i.dispatchEvent(new Event('input'));
      document.querySelectorAll('#heatmap thead th')[2].click(); })()""")  # score, ascending
    first = browser.eval("document.querySelector('#heatmap tbody tr:not([hidden]) .fact').textContent")
    assert first == "facts.packages[containerd].version"


@pytest.mark.fleet
def test_fleet_scan_in_four_formats_culprit_first_and_junit_fails_on_az_b(fleet_ready_crashloop, browser: DevTools,
                                                                         shots: Path, tmp_path: Path) -> None:
    """One real scan of the test fleet: json, html, md and junit; the browser sees the culprit first."""
    import io
    import xml.etree.ElementTree as ET

    from auditor.cli import main
    from auditor.context import Env
    from tests.fleet import AZ_B_HOSTS

    fleet = fleet_ready_crashloop
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "-i", str(fleet.inventory_path), "--group-by", "az",
                 "--symptom", "systemd.unit-crash-looping", "--format", "json,html,md,junit",
                 "--out", str(tmp_path / "report")], Env(stdout=out, stderr=err))
    assert code == 1, err.getvalue() + out.getvalue()
    files = {p.suffix for p in (tmp_path / "report").iterdir()}
    assert files == {".json", ".html", ".md", ".xml"}

    failed: dict[str, set[str]] = {}
    for case in ET.parse(tmp_path / "report" / "report.xml").getroot().iter("testcase"):
        if case.find("failure") is not None:
            failed.setdefault(case.get("classname"), set()).add(case.get("name"))
        assert case.find("error") is None, (case.get("classname"), case.get("name"))
    assert set(failed) == set(AZ_B_HOSTS), failed
    assert all("systemd.unit-crash-looping" in rules for rules in failed.values()), failed

    md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# ami-auditor: FAIL (exit 1)") and "ecs.service" in md.split("## Top findings")[0]

    seen = browser.open(tmp_path / "report" / "report.html")
    shot = browser.screenshot(shots / "fleet-scan-first-screen.png")
    print(f"\nfleet report: {tmp_path / 'report'}\nscreenshot: {shot}")
    assert seen["ran"] == [] and seen["ready"] == "1"
    first_two = " ".join(seen["facts"][:2])
    assert "ecs.service" in first_two and "kubelet" in first_two, seen["facts"][:4]
    assert seen["topSplit"] and seen["topSplit"]["bottom"] <= HEIGHT
    assert seen["topFinding"] and seen["topFinding"]["bottom"] <= HEIGHT
