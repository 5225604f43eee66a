"""Trend pictures (inline SVG, drawn server-side): values per recorded scan as lines over time, and a timeline
of when findings were first seen.

Like pictures.py: no script needed, `role="img"` with a `<title>` and an `aria-label` carrying the numbers,
every drawn value also a `data-*` attribute, host text made visible (textsafe) and escaped. Colour is never
the only channel: each line ends in its name and latest value. The x axis is time when every scan's time
reads as ISO 8601 (scans far apart stay far apart), else one step per scan. Values come from a saved
document (untrusted): anything but a finite number ≥ 0 is drawn as unknown (a gap).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from markupsafe import Markup

from ..textsafe import block
from . import view
from .pictures import _n, _svg, _t

WIDTH = 400
LEFT, RIGHT = 40.0, 296.0  # plot area; the names of the lines are written right of it
TOP, PLOT_H = 10.0, 130.0
LABEL_GAP = 12.0
PALETTE = ("#1f5fa8", "#b3141a", "#226e31", "#7d4e00", "#6a3d9a", "#00727a", "#b93d0b", "#3f4852")
SEVERITY_COLOURS = {"critical": "#b3141a", "high": "#b93d0b", "medium": "#7d6200", "low": "#2f6fb0",
                    "info": "#5b6673"}
OTHERS = "#5b6673"


@dataclass
class Line:
    name: str
    values: list[float | None]
    colour: str
    dash: str = ""  # stroke-dasharray: the summary of the hosts not drawn is dashed
    kind: str = "series"


def number(value: Any) -> float | None:
    """A value a line can draw: a finite number ≥ 0 (bools and text are unknown)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def numbers(values: Any) -> list[float | None]:
    return [number(v) for v in values] if isinstance(values, list) else []


def _when(value: Any) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def x_positions(points: Sequence[Mapping[str, Any]], left: float = LEFT, right: float = RIGHT) -> list[float]:
    """Where each scan sits: by time when all times parse and differ, else evenly."""
    times = [_when(p.get("at")) for p in points]
    if len(points) == 1:
        return [(left + right) / 2]
    if all(t is not None for t in times) and times[0] != times[-1]:
        start, span = times[0], (times[-1] - times[0]).total_seconds()  # type: ignore[operator]
        if span > 0:
            return [left + (right - left) * max(0.0, (t - start).total_seconds()) / span  # type: ignore[operator]
                    for t in times]
    return [left + (right - left) * j / max(1, len(points) - 1) for j in range(len(points))]


def scan_name(point: Mapping[str, Any]) -> str:
    at = str(point.get("at") or "")
    return f"scan {point.get('id')} ({at[:16].replace('T', ' ')})" if at else f"scan {point.get('id')}"


def _ceiling(top: float) -> float:
    """A round axis maximum at or above `top` (1, 2, 5 × 10^k)."""
    if top <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(top))
    return next(m * step for m in (1, 2, 5, 10) if m * step >= top)


def _spread(wanted: list[tuple[float, int]], low: float, high: float) -> dict[int, float]:
    """Label heights near their lines' ends, at least LABEL_GAP apart: pushed down from `low`, then back up
    from `high` (more labels than fit overlap at the top; the table under the picture has them all)."""
    order = sorted(wanted)
    ys: list[float] = []
    for y, _ in order:
        ys.append(max(y, ys[-1] + LABEL_GAP) if ys else max(y, low))
    for j in range(len(ys) - 1, -1, -1):
        ys[j] = min(ys[j], high if j == len(ys) - 1 else ys[j + 1] - LABEL_GAP)
    return {i: y for (_, i), y in zip(order, ys, strict=True)}


def _fmt(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.6g}"


def _tick(value: float) -> str:
    """An axis label: 2.5, 500, 20k, 1.5M."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{_n(round(value / size, 1))}{suffix}"
    return _n(round(value, 1))


def _axes(xs: list[float], points: Sequence[Mapping[str, Any]], top: float) -> list[str]:
    body = []
    for frac in (0.0, 0.5, 1.0):
        y = TOP + PLOT_H * (1 - frac)
        body.append(f'<line x1="{LEFT}" x2="{RIGHT}" y1="{_n(y)}" y2="{_n(y)}" stroke="#d6dbe1"/>'
                    f'<text x="{LEFT - 4}" y="{_n(y + 4)}" font-size="11" text-anchor="end" fill="#3f4852">'
                    f'{_tick(top * frac)}</text>')
    if points:
        bottom = TOP + PLOT_H + 16
        first, last = str(points[0].get("at") or ""), str(points[-1].get("at") or "")
        same_day = first[:10] == last[:10]  # scans of one day: their times, else their dates
        first, last = (first[11:16], last[11:16]) if same_day else (first[:10], last[:10])
        body.append(f'<text x="{LEFT}" y="{_n(bottom)}" font-size="11" fill="#3f4852">{_t(first)}</text>')
        if len(points) > 1:
            body.append(f'<text x="{RIGHT}" y="{_n(bottom)}" font-size="11" text-anchor="end" fill="#3f4852">'
                        f'{_t(last)}</text>')
        body.append(f'<text x="{_n((LEFT + RIGHT) / 2)}" y="{_n(bottom)}" font-size="11" text-anchor="middle" '
                    f'fill="#3f4852">{len(points)} scan{"s" if len(points) != 1 else ""}</text>')
        body.extend(f'<line x1="{_n(x)}" x2="{_n(x)}" y1="{_n(TOP + PLOT_H)}" y2="{_n(TOP + PLOT_H + 4)}" '
                    f'stroke="#5b6673"/>' for x in xs)
    return body


def _path(xs: list[float], ys: list[float | None]) -> str:
    """Segments through the known points; an unknown value breaks the line."""
    out, pen = [], False
    for x, y in zip(xs, ys, strict=True):
        if y is None:
            pen = False
            continue
        out.append(f"{'L' if pen else 'M'}{_n(x)} {_n(y)}")
        pen = True
    return " ".join(out)


def line_chart(cls: str, title: str, points: Sequence[Mapping[str, Any]], lines: Sequence[Line],
               words: str, note: str = "") -> Markup:
    """Lines over the scans in `points` (each line one value per point); `words` names the measure."""
    xs = x_positions(points)
    known = [v for line in lines for v in line.values if v is not None]
    top = _ceiling(max(known, default=0.0))
    body = _axes(xs, points, top)
    ends: list[tuple[float, int]] = []
    for i, line in enumerate(lines):
        ys = [None if v is None else TOP + PLOT_H * (1 - v / top) for v in line.values]
        dots = "".join(
            f'<circle cx="{_n(x)}" cy="{_n(y)}" r="2.6" fill="{line.colour}"><title>{_t(line.name)}, '
            f'{_t(scan_name(p))}: {_fmt(v)} {_t(words)}</title></circle>'
            for x, y, v, p in zip(xs, ys, line.values, points, strict=True) if y is not None)
        values = ",".join("" if v is None else _n(v) for v in line.values)
        dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
        body.append(f'<g class="{line.kind}" data-name="{_t(line.name)}" data-values="{values}">'
                    f'<path d="{_path(xs, ys)}" fill="none" stroke="{line.colour}" stroke-width="2"{dash}/>'
                    f"{dots}</g>")
        last = next((y for y in reversed(ys) if y is not None), None)
        if last is not None:
            ends.append((last + 4, i))
    for i, y in _spread(ends, TOP + 4, TOP + PLOT_H + 4).items():
        line = lines[i]
        latest = next((v for v in reversed(line.values) if v is not None), None)
        body.append(f'<text class="end" x="{RIGHT + 6}" y="{_n(y)}" font-size="11" fill="{line.colour}">'
                    f'{_t(view.short(block(line.name), 14))} {_fmt(latest)}</text>')
    height = TOP + PLOT_H + 24
    if note:
        body.append(f'<text x="{LEFT}" y="{_n(height + 2)}" font-size="11" fill="#3f4852">{_t(note)}</text>')
        height += 14
    label = f"{title}, {len(points)} scans: " + "; ".join(
        f"{line.name} " + " → ".join(_fmt(v) for v in line.values) for line in lines) + (f". {note}" if note else "")
    return _svg(f"pic-trend {cls}", WIDTH, height, label, title, body, {"scans": ",".join(
        str(p.get("id")) for p in points), "measure": words})


def top_lines(title: str, cls: str, points: Sequence[Mapping[str, Any]], doc: Mapping[str, Any],
              words: str, who: str) -> Markup | None:
    """A `top_lines` document (history/charts): its lines, and the hosts or units not drawn as median and max."""
    lines = [Line(str(s.get("name")), numbers(s.get("values")), PALETTE[i % len(PALETTE)])
             for i, s in enumerate(doc.get("lines") or []) if isinstance(s, dict)]
    lines = [line for line in lines if len(line.values) == len(points)]
    rest = doc.get("rest") if isinstance(doc.get("rest"), dict) else None
    note = ""
    if rest and len(numbers(rest.get("median"))) == len(points):
        others = f"other {rest.get('count')} {who}"
        lines.append(Line(f"{others} max", numbers(rest.get("max")), OTHERS, "2 3", "others"))
        lines.append(Line(f"{others} median", numbers(rest.get("median")), OTHERS, "6 4", "others"))
        note = f"{len(lines) - 2} {who} with the largest latest value drawn; the {others}: max and median (dashed)"
    if not lines or not points:
        return None
    return line_chart(cls, title, points, lines, words, note)


TIMELINE_ROW = 44.0


def timeline(points: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> Markup | None:
    """A bar per finding (rule · item, across hosts) from the scan it was first seen to the last that saw it."""
    if not points or not rows:
        return None
    xs = x_positions(points, 8, WIDTH - 8)
    where = {p.get("id"): x for p, x in zip(points, xs, strict=True)}
    ids = [p.get("id") for p in points]
    body: list[str] = []
    y = 4.0
    told = []
    for row in rows:
        first, last = row.get("first_scan"), row.get("last_scan")
        start = where.get(first, xs[0])
        end = where.get(last, xs[-1])
        before = isinstance(first, int) and isinstance(ids[0], int) and first < ids[0]
        name = str(row.get("rule", "")) + (f" · {row['item']}" if row.get("item") else "")
        open_hosts = row.get("open_hosts")
        words = (f"first seen {str(row.get('first_seen', ''))[:16].replace('T', ' ')}, {row.get('hosts')} host"
                 f"{'s' if row.get('hosts') != 1 else ''}, " + (f"{open_hosts} open" if open_hosts else "resolved"))
        severity = str(row.get("severity") or "info")
        colour = SEVERITY_COLOURS.get(severity, OTHERS)
        told.append(f"{name} ({severity}): {words}")
        body.append(
            f'<g class="span" data-rule="{_t(row.get("rule", ""))}" data-item="{_t(row.get("item") or "")}" '
            f'data-first-scan="{_t(first)}" data-last-scan="{_t(last)}" data-open="{_t(open_hosts)}" '
            f'data-hosts="{_t(row.get("hosts"))}" data-severity="{_t(severity)}">'
            f'<text x="8" y="{_n(y + 11)}" font-size="11.5" font-weight="600" fill="#1d232b">'
            f'{_t(view.short(block(name), 56))}</text>'
            f'<text x="8" y="{_n(y + 24)}" font-size="11" fill="#3f4852">{_t(severity)}, {_t(words)}</text>'
            f'<rect x="{_n(start)}" y="{_n(y + 29)}" width="{_n(max(end - start, 4))}" height="9" rx="2" '
            f'fill="{colour}"><title>{_t(name)} ({_t(severity)}): {_t(words)}</title></rect>'
            + (f'<text x="{_n(start)}" y="{_n(y + 37)}" font-size="9" fill="#fff">◀</text>' if before else "")
            + "</g>")
        y += TIMELINE_ROW
    label = f"When findings were first seen, over {len(points)} scans: " + "; ".join(told)
    return _svg("pic-timeline", WIDTH, y, label, "First-seen timeline of findings", body, {"rows": len(rows)})
