"""HTML: self-contained, escaped, culprit first, ranked heatmap, aggregation for big fleets."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from html.parser import HTMLParser

from auditor.models import is_ref
from auditor.render.html_renderer import MAX_HOST_CLASSES, render
from tests.paths import DATA

DATA = DATA / "reports"


def fleet() -> dict:
    return json.loads((DATA / "fleet.json").read_text(encoding="utf-8"))


class Page(HTMLParser):
    """Elements, attributes, script bodies and the text of table rows, as a browser's parser sees them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if tag == "script":
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)


def test_self_contained_one_script_allowed_by_hash_no_external_fetch() -> None:
    html = render(fleet())
    page = Page(html)
    names = [t for t, _ in page.tags]
    assert names.count("script") == 1 and "link" not in names and "img" not in names and "iframe" not in names
    for tag, attrs in page.tags:
        for key in ("src", "href", "action"):
            value = attrs.get(key)
            if tag == "a" and key == "href" and value and not value.startswith("#"):  # a rule's source: a link
                assert is_ref(value) and attrs.get("rel") == "noopener noreferrer", value  # to follow, not a fetch
                continue
            assert value is None or value.startswith("#"), (key, value)
    assert sum(1 for t, a in page.tags if t == "a" and is_ref(a.get("href"))) >= 5  # the rules' sources
    assert not re.search(r"https?://(?!www\.w3\.org)", html.split("<main>")[0])  # head/header: no URLs
    csp = next(a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    digest = base64.b64encode(hashlib.sha256(page.scripts[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp and "default-src 'none'" in csp


def test_hostile_strings_are_text_not_markup() -> None:
    html = render(fleet())
    page = Page(html)
    text = "".join(page.text)
    assert "<img src=x onerror=alert(1)>" in text  # the unreachable host's error, as text
    assert "b4</script><script>alert(1)</script>" in text
    assert "alert(1)" not in page.scripts[0]
    assert "<img" not in html and "<script>alert" not in html


def test_culprit_first_then_summary_then_ranked_heatmap() -> None:
    html = render(fleet())
    order = [html.index(s) for s in ('id="culprit"', 'id="summary"', 'id="heatmap"', 'id="findings-table"',
                                     'id="drift-table"', 'id="hosts-table"')]
    assert order == sorted(order)
    culprit = html[html.index('id="culprit"'):html.index('id="summary"')]
    assert "facts.systemd.units[ecs.service].unit_file_state" in culprit
    assert "ecs.service is crash-looping" in culprit and "sev-critical" in culprit
    heat = html[html.index('id="heatmap"'):html.index("</table>", html.index('id="heatmap"'))]
    facts = re.findall(r'<span class="fact">([^<]*)</span>', heat)
    assert facts[0] == "facts.systemd.units[ecs.service].unit_file_state"
    assert facts[1].startswith("facts.binaries[kubelet]")
    assert "facts.systemd.units[ecs.service].description" not in facts  # score 0: not a split


def test_heatmap_ranks_by_score_whatever_the_input_order() -> None:
    doc = fleet()
    doc["comparison"]["splits"].reverse()
    heat = render(doc).split('id="heatmap"', 1)[1]
    assert re.findall(r'<span class="fact">([^<]*)</span>', heat)[0].startswith("facts.binaries[kubelet]")
    # ties keep the compare stage's order; the 0.62 split is still last
    assert re.findall(r'<span class="fact">([^<]*)</span>', heat)[1].startswith("facts.systemd.units[ecs.service]")
    assert re.findall(r'<span class="fact">([^<]*)</span>', heat)[2].startswith("facts.packages[containerd]")


def test_identical_hosts_are_one_row_and_big_fleets_are_capped() -> None:
    doc = fleet()
    html = render(doc)
    hosts = html[html.index('id="hosts-table"'):]
    assert "<b>3</b> · b1, b2, b3" in hosts  # same findings and drift: one class
    template = next(h for h in doc["hosts"] if h["name"] == "b1")
    doc["hosts"] = []
    doc["findings"] = [f for f in doc["findings"] if f["host"] == "b1"]
    for i in range(MAX_HOST_CLASSES + 20):
        doc["hosts"].append({**copy.deepcopy(template), "name": f"h{i:04d}"})
        doc["findings"].append({**doc["findings"][0], "host": f"h{i:04d}", "rule": f"rule.{i}"})
    big = render(doc)
    rows = big[big.index('id="hosts-table"'):].split("</table>")[0].count("<tr>")
    assert rows == MAX_HOST_CLASSES + 1  # header row + capped classes
    assert "20 more host classes (20 hosts) are not shown" in big


def test_unreached_and_unknown_are_never_shown_as_passing() -> None:
    html = render(fleet())
    assert "1 host not reached</span> (unknown, not passed)" in html
    assert 'class="unknown">ecs: ecs probe timed out after 5s' in html


def test_unreached_host_row_reads_unknown_not_clean() -> None:
    html = render(json.loads((DATA / "incomplete.json").read_text(encoding="utf-8")))
    row = html[html.index('id="hosts-table"'):].split("auth_failed", 1)[1].split("</tr>", 1)[0]
    assert 'sev-unknown">unknown' in row and "sev-none" not in row
    assert "No group comparison in this scan." in html


def test_clean_report() -> None:
    html = render(json.loads((DATA / "clean.json").read_text(encoding="utf-8")))
    assert 'class="verdict pass"' in html and "Nothing stands out" in html
    assert "No fact splits the groups." in html and "No findings." in html


def test_facts_summary_carries_the_cpu_window_and_restarts_the_pictures_draw() -> None:
    from auditor.reportdoc import facts_summary

    snap = {"facts": {
        "cpu": {"count": 2, "window_s": 1.0, "max_core": 1, "max_core_system_pct": 88.0,
                "cores": [{"cpu": 0, "user_pct": 5.0, "system_pct": 1.0},
                          {"cpu": 1, "user_pct": 2.0, "system_pct": 88.0}],
                "threads": [{"pid": 1, "tid": 1, "cpu": 0, "ticks": 99, "system_ticks": 0, "comm": "busy-user"},
                            {"pid": 7, "tid": 9, "cpu": 1, "ticks": 90, "system_ticks": 88, "comm": "kworker"},
                            {"pid": 8, "tid": 8, "cpu": 1, "ticks": 95, "system_ticks": 3, "comm": "user-on-hot"}]},
        "systemd": {"units": [{"name": "a.service", "restarts": 4}, {"name": "b.service", "restarts": 3},
                              {"name": "c.service"}]}}}
    summary = facts_summary(snap)
    assert summary["restarts"] == 7
    cpu = summary["cpu"]
    assert cpu["cores"] == [[0, 5.0, 1.0], [1, 2.0, 88.0]] and cpu["max_core"] == 1
    assert cpu["hot_thread"] == {"pid": 7, "tid": 9, "comm": "kworker", "ticks": 90, "system_ticks": 88}
    assert facts_summary({"facts": {}})["cpu"] is None and facts_summary({"facts": {}})["restarts"] is None
    html = render(fleet())
    assert 'class="pic pic-chain" role="img"' in html and "<script>alert" not in html.split("<main>")[1]
