"""Markdown for tickets and pull requests: verdict, top findings and splits first, from reports/report.md.j2.

Every value the template prints is escaped for Markdown (pipes, backticks, emphasis, links, HTML; control
and bidi characters as visible \\xNN) by the environment's `finalize`, the way autoescape works for HTML;
only the `code`/`hosts`/`cell` filters build spans, and they escape what goes inside. GFM's autolink
extension would still make host text like `https://evil.example/login`, `www.evil.example` or
`user@evil.example` a live link: the `:` of `://` and the `.` after `www` are backslash-escaped (which
stops the match), and every `@` becomes a code span (the e-mail autolink sees through escapes and entities).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..models import cited, is_ref
from ..notread import fleet_not_read
from ..reporttypes import ReportDoc
from ..resources import report_templates_dir
from ..textsafe import escape_controls
from . import view
from .outliers import outlier_hosts

if TYPE_CHECKING:
    from jinja2 import Environment

TEMPLATE = "report.md.j2"
TOP = 10  # rows per table; the rest are counted and left to the HTML/JSON report
HOSTS_SHOWN = 5

_SPECIAL = re.compile(r"([\\`*_\[\]#~|])")
_BACKTICKS = re.compile(r"`+")
_AUTOLINK = re.compile(r"(?i)(?<=www)\.|:(?=//)|@")  # what GFM's autolink extension starts a link from
_UNLINK = {".": "\\.", ":": "\\:", "@": "`@`"}


class Raw(str):
    """Text already safe for Markdown."""


def escape(value: Any) -> str:
    """Host or rule text as inert Markdown: one line, HTML as entities, Markdown syntax backslashed."""
    if isinstance(value, Raw):
        return value
    text = "" if value is None else str(value)
    text = escape_controls(" ".join(text.split()))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _AUTOLINK.sub(lambda m: _UNLINK[m.group()], _SPECIAL.sub(r"\\\1", text))


def code(value: Any) -> Raw:
    """A code span that no backtick or pipe inside can end early (GFM tables need `\\|` even in code)."""
    text = escape_controls(" ".join(view.show(value).split()))
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return Raw(f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}")


def hosts(names: Iterable[str], count: bool = True) -> Raw:
    """`3: b1, b2, b3` (the first few names, escaped); without the count for prose."""
    names = list(names)
    shown = ", ".join(escape(n) for n in names[:HOSTS_SHOWN])
    more = f" +{len(names) - HOSTS_SHOWN} more" if len(names) > HOSTS_SHOWN else ""
    return Raw(f"{len(names)}: {shown}{more}" if count else f"{shown}{more}")


def link(url: Any) -> Raw:
    """A rule's source as an autolink `<https://…>`; only a URL is_ref passes (no space, `<`, `>` or control
    character can end it early), anything else as escaped text."""
    return Raw(f"<{url}>") if is_ref(url) else Raw(escape(url))


def sources(groups: Iterable[view.FindingGroup], refs: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """(rule id, its sources) for each rule of the finding groups shown, in their order, once each."""
    rules = dict.fromkeys(g.rule for g in groups if g.rule in refs)
    return [(rule, refs[rule]) for rule in rules]


def cell(c: view.Cell) -> Raw:
    """A heatmap cell as text: values most common first; bold when it differs from the fleet."""
    if not c.values:
        return Raw("no data")
    text = ", ".join(f"{escape(view.short(v))} ×{n}" for v, n in c.values)
    return Raw(f"**{text}**" if c.heat > 0 else text)


@lru_cache(maxsize=1)
def environment() -> Environment:
    from jinja2 import ChainableUndefined, Environment, FileSystemLoader  # on first render, not at start-up

    env = Environment(loader=FileSystemLoader(str(report_templates_dir())), autoescape=False,
                      finalize=escape, undefined=ChainableUndefined, keep_trailing_newline=True)
    env.filters.update(code=code, hosts=hosts, cell=cell, link=link, show=view.show, pvalue=view.p_value,
                       score=view.score, short=lambda v, width=24: view.short(view.show(v), width))
    return env


def render(doc: ReportDoc) -> str:
    summary = doc["summary"]
    fsev = ", ".join(f"{n} {s}" for s, n in view.findings_by_severity(doc) if n) or "none"
    findings = view.finding_groups(doc)
    text = environment().get_template(TEMPLATE).render(
        doc=doc, summary=summary, comparison=doc.get("comparison") or {}, culprit=view.culprit(doc, findings),
        symptom_top=view.symptom_top(doc),
        by_status=", ".join(f"{n} {s}" for s, n in summary["by_status"].items()), fsev=fsev,
        findings=findings, heat=view.heatmap(doc), heat_groups=view.heatmap_groups(doc),
        drift=view.drift_groups(doc), unreached=[h for h in doc["hosts"] if h["status"] != "ok"], top=TOP,
        since_text=view.since_text, sources=lambda shown: sources(shown, cited(doc.get("rules"))),
        not_read=fleet_not_read(doc), outlier_hosts=outlier_hosts(doc),
    )
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
