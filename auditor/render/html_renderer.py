"""HTML: one self-contained file (inline CSS and JS, no external assets), from reports/report.html.j2.

Autoescape is on for every value, and control and bidi characters in text are shown as \\xNN (textsafe).
The page carries a Content-Security-Policy that allows no network fetches and only the report's own
script (by hash), so even a missed escape could not run host text.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from ..models import SEVERITIES, cited, severity_rank
from ..notread import host_not_read, not_read_words
from ..reporttypes import HostDoc, ReportDoc
from ..resources import report_templates_dir
from ..textsafe import block
from . import pictures as pics
from . import view
from .outliers import outlier_hosts

if TYPE_CHECKING:
    from jinja2 import Environment

TEMPLATE = "report.html.j2"
MAX_HOST_CLASSES = 500  # beyond this the page lists the worst classes and points at the JSON


def _shown(value: Any) -> Any:
    """finalize: host text with its control and bidi characters visible; markup built by the template as is."""
    return block(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str)


@lru_cache(maxsize=1)
def environment() -> Environment:
    """Templates from reports/, autoescape on; absent optional keys render empty (ChainableUndefined)."""
    from jinja2 import ChainableUndefined, Environment, FileSystemLoader  # on first render, not at start-up

    env = Environment(loader=FileSystemLoader(str(report_templates_dir())), autoescape=True,
                      undefined=ChainableUndefined, finalize=_shown)
    env.filters.update(show=view.show, short=lambda v, width=24: view.short(view.show(v), width), pretty=_pretty,
                       pvalue=view.p_value, score=view.score)
    return env


@lru_cache(maxsize=1)
def _assets() -> tuple[Markup, Markup, str]:
    """Inline CSS, inline JS and the CSP that allows exactly that script."""
    folder = report_templates_dir()
    css = (folder / "report.css").read_text(encoding="utf-8")
    js = (folder / "report.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    csp = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return Markup(css), Markup(js), csp


HOSTS_DRAWN = view.HOSTS_KEPT  # per host class: the first hosts' own chain and trend pictures; the JSON has every host
MAX_HOST_PICTURES = 120  # hosts with pictures in the whole page


def host_pictures(doc: ReportDoc) -> Any:
    """For the host detail: (host, its own chain picture or None, its trend pictures) of a class's first hosts."""
    from .history_html import host_trends  # the trend pictures import this module's environment

    chains = {str(c.get("host", "")): c for c in doc.get("chains") or [] if isinstance(c, dict)}
    left = [MAX_HOST_PICTURES]  # over the whole page (worst classes first), so 500 classes stay a page, not 20 MB

    def drawn(hosts: list[HostDoc]) -> list[tuple[str, Markup | None, list[tuple[str, Markup]]]]:
        out = []
        for host in hosts[:min(HOSTS_DRAWN, left[0])]:
            chain = chains.get(str(host.get("name")))
            picture = pics.chain_svg(chain) if chain and chain.get("links") else None
            trends = host_trends(doc, host)
            if picture or trends:
                out.append((str(host.get("name")), picture, trends))
                left[0] -= 1
        return out

    return drawn


def render(doc: ReportDoc) -> str:
    css, js, csp = _assets()
    classes = view.host_classes(doc)
    shown = classes[:MAX_HOST_CLASSES]
    chains = view.chain_groups(doc)
    strips, strips_hidden = pics.cpu_strips(doc)
    pictures = {"chains": pics.chain_pictures(doc, chains), "cpu": strips, "cpu_hidden": strips_hidden,
                "bars": pics.bar_charts(doc)}
    findings = view.finding_groups(doc)
    return environment().get_template(TEMPLATE).render(
        doc=doc, summary=doc["summary"], comparison=doc.get("comparison") or {},
        culprit=view.culprit(doc, findings), pictures=pictures,
        symptom_top=view.symptom_top(doc), fsev=view.findings_by_severity(doc), by_group=view.hosts_by_group(doc),
        heat=view.heatmap(doc), heat_groups=view.heatmap_groups(doc), findings=findings,
        drift=view.drift_groups(doc), classes=shown, hidden_classes=len(classes) - len(shown),
        hidden_hosts=sum(c.count for c in classes[len(shown):]), names_listed=view.NAMES_LISTED,
        rank={s: severity_rank(s) for s in SEVERITIES}, css=css, js=js, csp=csp,
        since_text=view.since_text, host_pictures=host_pictures(doc), hosts_drawn=HOSTS_DRAWN,
        max_host_pictures=MAX_HOST_PICTURES, sources=cited(doc.get("rules")), not_read=host_not_read,
        not_read_words=not_read_words, outlier_hosts=outlier_hosts(doc),
    ) + "\n"
