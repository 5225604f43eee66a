"""`report.prom` read by its real consumers: promtool, prometheus_client's parser and node_exporter.

Every golden scenario and a report whose host names carry `\\r`, `\\n`, quotes, backslashes, non-ASCII,
NUL, a bidi override, a lone surrogate, and duplicates (one name twice, and two names that show alike
once escaped) must pass `promtool check metrics` (parse + lint), parse with one sample per label set,
and be served by node_exporter's textfile collector (run as its own user, on loopback) with
`node_textfile_scrape_error 0` and every sample present.
"""

from __future__ import annotations

import copy
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from auditor.atomicio import write_files
from auditor.render.prom_renderer import render
from tests.paths import DATA

DATA = DATA / "reports"
SCENARIOS = ("fleet", "fleet-scan", "clean", "incomplete")
HOSTILE_NAMES = ("cr\rhost", "new\nline", 'quo"te} 1\nami_auditor_forged 1', "back\\slash\\", "ünïcödé-日本",
                 "dup", "dup", "cr\\x0dhost", "nul\x00bel\x07", "bidi\u202eevil", "lone\udcff", "tab\tdel\x7f")


def tool(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    reason = f"no {name} (.ci/apt.d/prometheus.txt installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def hostile() -> dict:
    """The fleet report with its hosts renamed (findings and drift follow), one host list entry per name."""
    doc = copy.deepcopy(json.loads((DATA / "fleet.json").read_text(encoding="utf-8")))
    hosts = doc["hosts"]
    while len(hosts) < len(HOSTILE_NAMES):
        hosts.append(copy.deepcopy(hosts[len(hosts) % 8]))
    renamed = {}
    for host, name in zip(hosts, HOSTILE_NAMES, strict=True):
        renamed.setdefault(host["name"], name)
        host["name"] = name
    for item in doc["findings"] + doc["drift"]:
        item["host"] = renamed.get(item["host"], item["host"])
    return doc


def reports() -> dict[str, dict]:
    docs = {s: json.loads((DATA / f"{s}.json").read_text(encoding="utf-8")) for s in SCENARIOS}
    docs["hostile"] = hostile()
    return docs


def samples(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def assert_one_sample_per_label_set(parsed: dict[str, list]) -> None:
    for name, found in parsed.items():
        keys = [tuple(sorted(s.labels.items())) for s in found]
        assert len(keys) == len(set(keys)), f"{name}: duplicate label sets"


@pytest.mark.parametrize("scenario", [*SCENARIOS, "hostile"])
def test_promtool_and_prometheus_client_accept_every_report(scenario: str) -> None:
    """Before: the hostile report failed promtool (`\\r` in a label) and had duplicate series."""
    doc = reports()[scenario]
    text = render(doc)
    checked = subprocess.run([tool("promtool"), "check", "metrics"], input=text.encode("utf-8"),
                             capture_output=True, timeout=30)
    assert checked.returncode == 0 and not checked.stdout.strip() and not checked.stderr.strip(), checked
    parsed = samples(text)
    assert "ami_auditor_forged" not in parsed
    assert_one_sample_per_label_set(parsed)
    assert len(parsed["ami_auditor_host_up"]) == len(doc["hosts"])
    assert sum(s.value for s in parsed["ami_auditor_findings"]) == sum(not f["waived"] for f in doc["findings"])


def test_hostile_host_names_read_back_as_visible_text() -> None:
    shown = {s.labels["host"] for s in samples(render(hostile()))["ami_auditor_host_up"]}
    assert "new\nline" in shown  # the format's own escape: the value is the name itself
    assert "cr\\x0dhost" in shown and "cr\\x0dhost#2" in shown  # \r shown as \x0d; alike names told apart
    assert {"dup", "dup#2", "back\\slash\\", "ünïcödé-日本", "lone\\udcff", "bidi\\u202eevil"} <= shown


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def node_exporter() -> Iterator[tuple[Path, str]]:
    """node_exporter with only the textfile collector, as the `prometheus` user, on a loopback port."""
    binary = tool("prometheus-node-exporter")
    directory = Path(tempfile.mkdtemp(prefix="ami-auditor-textfile-"))
    directory.chmod(0o755)
    user = "prometheus" if _has_user("prometheus") else "nobody"
    port = free_port()
    proc = subprocess.Popen(["setpriv", f"--reuid={user}", f"--regid={pwd.getpwnam(user).pw_gid}", "--clear-groups",
                             binary, "--collector.disable-defaults", "--collector.textfile",
                             f"--collector.textfile.directory={directory}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.1)
        yield directory, url
    finally:
        proc.terminate()  # by pid: only the process this fixture started
        proc.wait(timeout=10)
        shutil.rmtree(directory)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def test_node_exporter_serves_every_report_without_a_scrape_error(node_exporter: tuple[Path, str]) -> None:
    """Before: the hostile report made node_exporter's textfile collector fail (scrape error 1, no samples)."""
    directory, url = node_exporter
    for scenario, doc in reports().items():
        text = render(doc)
        write_files([(directory / "report.prom", text)])
        scraped = samples(urllib.request.urlopen(url, timeout=10).read().decode("utf-8"))
        assert [s.value for s in scraped["node_textfile_scrape_error"]] == [0.0], scenario
        for name, expected in samples(text).items():
            got = sorted((sorted(s.labels.items()), s.value) for s in scraped.get(name, []))
            want = sorted((sorted(s.labels.items()), s.value) for s in expected)
            assert got == want or _nan_equal(got, want), f"{scenario}: {name}"


def _nan_equal(got: list, want: list) -> bool:
    return len(got) == len(want) and all(g[0] == w[0] and (g[1] == w[1] or (g[1] != g[1] and w[1] != w[1]))
                                         for g, w in zip(got, want, strict=True))
