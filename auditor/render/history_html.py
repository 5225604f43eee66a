"""HTML for the history: `history report --format html` (one self-contained page of the fleet's trends) and
the trend pictures in the scan report's host detail.

Both see documents only: the history report's (history/charts.fleet_trends) and the scan report's
`history.series`. The page is the scan report's kind: same CSS, same script (tables sort and filter), same
Content-Security-Policy; every picture is followed by a data table of the values it draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ..models import SEVERITIES
from . import trend_pictures as tp
from .html_renderer import _assets, environment

TEMPLATE = "history.html.j2"


@dataclass
class Chart:
    """A picture (its legend under it) and the table behind it: one row per scan, one column per line."""

    id: str
    heading: str
    svg: Markup | None
    columns: list[str]
    rows: list[tuple[Mapping[str, Any], list[str]]]
    empty: str


def _table(points: Sequence[Mapping[str, Any]], lines: Sequence[tuple[str, Sequence[Any]]]
           ) -> tuple[list[str], list[tuple[Mapping[str, Any], list[str]]]]:
    columns = [name for name, _ in lines]
    rows = [(p, [tp._fmt(tp.number(vals[j]) if j < len(vals) else None) for _, vals in lines])
            for j, p in enumerate(points)]
    return columns, rows


def _top_chart(doc: Mapping[str, Any], key: str, heading: str, words: str, who: str, empty: str) -> Chart:
    points = doc["scans"]
    part = doc.get(key) or {}
    lines = [(str(s.get("name")), s.get("values") or []) for s in part.get("lines") or [] if isinstance(s, dict)]
    rest = part.get("rest") or None
    if rest:
        lines += [(f"other {rest.get('count')} {who}: max", rest.get("max") or []),
                  (f"other {rest.get('count')} {who}: median", rest.get("median") or [])]
    svg = tp.top_lines(heading, f"pic-{key.replace('_', '-')}", points, part, words, who)
    return Chart(key.replace("_", "-"), heading, svg, *_table(points, lines), empty)


def _severity_chart(doc: Mapping[str, Any]) -> Chart:
    points = doc["scans"]
    by = doc.get("severity") or {}
    lines = [tp.Line(sev, tp.numbers(by.get(sev)), tp.SEVERITY_COLOURS[sev], tp.DASHES[k],  # each severity
                     mark=tp.MARKS[k % len(tp.MARKS)])  # drawn the same way in every report
             for k, sev in enumerate(SEVERITIES) if any(by.get(sev) or [])]
    svg = tp.line_chart("pic-severity", "Unwaived findings by severity", points, lines, "findings") \
        if lines and points else None
    return Chart("severity", "Findings by severity", svg, *_table(points, [(sev, by.get(sev) or []) for sev in
                                                                            SEVERITIES]),
                 "No findings in these scans.")


def headlines(doc: Mapping[str, Any]) -> list[str]:
    """What a reader should see first: the climbing host, the restarting unit, the findings now."""
    out = []
    points = doc["scans"]
    for key, words in (("dying_memcgs", "dying memcgs"), ("unit_restarts", "restarts")):
        lines = (doc.get(key) or {}).get("lines") or []
        if lines:
            known = [v for v in tp.numbers(lines[0].get("values")) if v is not None]
            if known:
                out.append(f"{lines[0].get('name')}: {words} {tp._fmt(known[0])} → {tp._fmt(known[-1])} over "
                           f"{len(points)} scans (the most at the latest scan)")
    if points:
        latest = {sev: (doc.get("severity") or {}).get(sev, [0])[-1] for sev in SEVERITIES}
        shown = ", ".join(f"{n} {sev}" for sev, n in latest.items() if n)
        out.append(f"latest scan {points[-1].get('id')}: " + (f"{shown} unwaived findings" if shown else
                                                              "no unwaived findings"))
    return out


def render(doc: dict[str, Any]) -> str:
    """The history report page."""
    css, js, csp = _assets()
    points = doc["scans"]
    charts = [
        _top_chart(doc, "dying_memcgs", "Dying memory cgroups per host", "dying memcgs", "hosts",
                   "No host reported dying memcgs in these scans."),
        _top_chart(doc, "unit_restarts", "Restarts per unit, summed over hosts", "restarts", "units",
                   "No unit restarted in these scans (scans recorded before this version keep no per-unit "
                   "counts)."),
        _severity_chart(doc),
    ]
    spans = doc.get("first_seen") or {}
    return environment().get_template(TEMPLATE).render(
        doc=doc, points=points, charts=charts, headlines=headlines(doc), css=css, js=js, csp=csp,
        timeline=tp.timeline(points, spans.get("rows") or []), spans=spans.get("rows") or [],
        spans_more=spans.get("more") or 0) + "\n"


def _int(value: Any) -> float:
    return tp.number(value) or 0.0


def host_trends(doc: Mapping[str, Any], host: Mapping[str, Any]) -> list[tuple[str, Markup]]:
    """The host's dying memcgs and restarts (total and its busiest units) over the earlier scans the report
    carries (`history.series`) and this one; none without an earlier scan of the host."""
    history = doc.get("history") or {}
    series = history.get("series") or {}
    past = (series.get("hosts") or {}).get(str(host.get("name")))
    scans = [s for s in series.get("scans") or [] if isinstance(s, dict)]
    if not isinstance(past, dict) or not scans:
        return []
    points = [*scans, {"id": history.get("scan_id"), "at": doc.get("generated_at")}]
    now = host.get("facts_summary") or {}
    name = str(host.get("name"))

    def values(past_values: Any, current: Any) -> list[float | None]:
        """One value per earlier scan (a saved report's list may be short or long: unknown, cut), then this scan's."""
        past = past_values[:len(scans)] if isinstance(past_values, list) else []
        return tp.numbers([*past, *[None] * (len(scans) - len(past)), current])

    out = []
    dying = values(past.get("dying_memcgs"), now.get("dying_memcgs"))
    if any(v is not None for v in dying):
        out.append(("dying memcgs", tp.line_chart("pic-host-dying", f"Dying memcgs on {name}", points,
                                                  [tp.Line("dying", dying, tp.PALETTE[1])], "dying memcgs")))
    units = dict(past.get("unit_restarts") or {}) if isinstance(past.get("unit_restarts"), dict) else {}
    current_units: dict[str, Any] = now["unit_restarts"] if isinstance(now.get("unit_restarts"), dict) else {}
    lines = [tp.Line("all units", values(past.get("restarts"), now.get("restarts")), tp.PALETTE[0])]
    lines += [tp.Line(str(unit), values(units.get(unit), current_units.get(unit)), tp.PALETTE[2 + i])
              for i, unit in enumerate(sorted(set(units) | set(current_units),
                                                 key=lambda u: (-_int(current_units.get(u)), u))[:4])]
    if any(v for line in lines for v in line.values):
        out.append(("unit restarts (all units and the busiest)",
                    tp.line_chart("pic-host-restarts", f"Unit restarts on {name}", points, lines, "restarts")))
    return out
