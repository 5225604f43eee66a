"""Markdown: concise, top findings and splits first, host text inert (pipes, backticks, HTML, links)."""

from __future__ import annotations

import json
import re

from auditor.render.markdown_renderer import TOP, code, escape, render
from tests.paths import DATA

DATA = DATA / "reports"


def fleet() -> dict:
    return json.loads((DATA / "fleet.json").read_text(encoding="utf-8"))


def table_rows(md: str, heading: str) -> list[str]:
    section = md.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|")]


def cells(row: str) -> list[str]:
    """Split a GFM table row on pipes that are not backslash-escaped."""
    return re.split(r"(?<!\\)\|", row.strip())[1:-1]


def test_verdict_then_culprit_then_findings_then_splits() -> None:
    md = render(fleet())
    assert md.startswith("# ami-auditor: FAIL (exit 1)\n")
    order = [md.index(s) for s in ("**Top split by az:**", "**Worst finding:** CRITICAL", "## Top findings",
                                   "## Facts that split the groups", "## Drift from the baseline")]
    assert order == sorted(order)
    top = cells(table_rows(md, "Facts that split the groups")[2])
    assert "ecs.service" in top[1] and "**enabled ×3**" in top[4]
    first_finding = cells(table_rows(md, "Top findings")[2])
    assert first_finding[0].strip() == "CRITICAL ✗" and "b1, b2, b3" in first_finding[3]


def test_hostile_host_text_is_escaped_and_tables_keep_their_columns() -> None:
    doc = fleet()
    doc["findings"][0]["title"] = "pipe | and `tick` and [link](javascript:alert(1)) <b>x</b>"
    md = render(doc)
    assert "<img" not in md and "<script" not in md and "<b>" not in md
    assert "&lt;img src=x onerror=alert(1)&gt;" in md
    assert "[link](" not in md
    for heading in ("Top findings", "Facts that split the groups", "Drift from the baseline"):
        rows = table_rows(md, heading)
        assert len({len(cells(r)) for r in rows}) == 1, heading


def test_escape_and_code_spans() -> None:
    assert escape("a|b") == "a\\|b"
    assert escape("*x* _y_ `z`") == "\\*x\\* \\_y\\_ \\`z\\`"
    assert escape("line\nbreak") == "line break"
    assert code("has ` tick") == "``has ` tick``"
    assert code("a|b") == "`a\\|b`"


def test_long_lists_are_cut_with_a_count() -> None:
    doc = fleet()
    base = doc["findings"][0]
    doc["findings"] += [{**base, "rule": f"extra.rule-{i}", "severity": "critical"} for i in range(TOP + 3)]
    md = render(doc)
    assert len(table_rows(md, "Top findings")) == TOP + 2
    assert f"… {TOP + 3 + 5 - TOP} more finding groups" in md


def test_clean_scan_says_so_in_one_line() -> None:
    md = render(json.loads((DATA / "clean.json").read_text(encoding="utf-8")))
    assert "# ami-auditor: PASS (exit 0)" in md
    assert "no findings, no drift, no fact splits the groups" in md
    assert "##" not in md


AUTOLINK_BAIT = ("https://evil.example/login", "www.evil.example", "user@evil.example", "WWW.EVIL.EXAMPLE",
                 "xmpp:u@evil.example", "mailto:u@evil.example", "ftp://evil.example/x", "(www.evil.example)",
                 "*www.evil.example*", "_user@evil.example_", "user@_evil.example", "HTTP://EVIL.EXAMPLE")


def gfm(md: str) -> str:
    """GitHub's own cmark-gfm (pip cmarkgfm) with its GFM extensions: autolink, table, strikethrough, tagfilter."""
    import cmarkgfm

    return cmarkgfm.github_flavored_markdown_to_html(md)


def bait_report() -> dict:
    """Link-looking host text everywhere the Markdown shows it: host names, titles, items, drift, errors."""
    doc = fleet()
    names = {h["name"]: AUTOLINK_BAIT[i % len(AUTOLINK_BAIT)] for i, h in enumerate(doc["hosts"])}
    for h in doc["hosts"]:
        h["name"] = names[h["name"]]
        if h.get("error"):
            h["error"] = "connect to https://evil.example/phish failed, mail admin@evil.example"
    for i, f in enumerate(doc["findings"]):
        f["host"] = names.get(f["host"], f["host"])
        f["title"] = f"{f['title']} see {AUTOLINK_BAIT[i % len(AUTOLINK_BAIT)]} now"
    for i, d in enumerate(doc["drift"]):
        d["host"] = names.get(d["host"], d["host"])
        d["actual"] = AUTOLINK_BAIT[i % len(AUTOLINK_BAIT)]
    return doc


def test_link_looking_host_text_never_becomes_a_link_under_gfm() -> None:
    """Before: GFM autolinked https://…, www.… and user@… host text (step summaries, GitHub comments)."""
    doc = bait_report()
    html = gfm(render(doc))
    sources = {u for r in doc["rules"] for u in r.get("refs") or ()}
    links = re.findall(r'<a href="([^"]*)">', html)
    assert links and set(links) <= sources, set(links) - sources  # the rules' own sources are the only links
    assert html.count("<a ") == html.count("href") == len(links), re.findall(r"<a [^>]*>[^<]*", html)[:5]
    text = re.sub(r"<[^>]+>", "", html).replace("&amp;", "&")
    for bait in ("https://evil.example/login", "www.evil.example", "user@evil.example", "xmpp:u@evil.example"):
        assert bait in text  # still shown as the text it is
    assert "<table>" in html and "<strong>" in html and "<code>" in html  # the report's own Markdown still renders


def test_escape_defeats_every_gfm_autolink_form() -> None:
    for bait in (*AUTOLINK_BAIT, "a.b+c@d-e.f", "see www.x.y.", "x https://a.b?c=d#e"):
        html = gfm(escape(bait))
        assert "<a " not in html, (bait, escape(bait), html)
        assert re.sub(r"<[^>]+>", "", html).strip() == bait  # shown as the same text
