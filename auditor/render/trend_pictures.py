"""Trend pictures (inline SVG, drawn server-side): values per recorded scan as lines over time, and a timeline
of when findings were first seen.

Like pictures.py: no script needed, `role="img"` with a `<title>` and an `aria-label` carrying the numbers,
every drawn value also a `data-*` attribute, host text made visible (textsafe) and escaped. A picture is as
wide as its box (horizontal places are percentages, no viewBox), its height and text size fixed, so it reads
the same on a phone and across a wide screen. Colour is never the only channel: each line has its own dash
and mark, lines on the same values at a scan are drawn a few pixels apart (the numbers stay exact in the
labels, legend and table), and a legend under the picture names each line with its latest value. The x axis
is time when every scan's time reads as ISO 8601 (scans far apart stay far apart), else one step per scan.
Values come from a saved document (untrusted): anything but a finite number ≥ 0 is drawn as unknown (a gap).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from markupsafe import Markup

from ..textsafe import block
from . import view
from .pictures import _n, _t

TOP, PLOT_H = 12.0, 170.0  # px: the plot's top and height; a picture is as wide as its box, its height fixed
PAD_LEFT, PAD_RIGHT = 46, 12  # px outside the plot: the value axis's numbers, the last dot
OFFSET, SPREAD = 5.0, 15.0  # px between lines drawn on the same spot at a scan, and their widest spread
PALETTE = ("#1f5fa8", "#b3141a", "#226e31", "#7d4e00", "#6a3d9a", "#00727a", "#b93d0b", "#3f4852")
SEVERITY_COLOURS = {"critical": "#b3141a", "high": "#b93d0b", "medium": "#7d6200", "low": "#2f6fb0",
                    "info": "#5b6673"}
OTHERS = "#5b6673"
# each line its own dash and mark besides its colour, so lines on the same values stay told apart
DASHES = ("none", "8 4", "2 3", "12 3 3 3", "5 5", "1 4", "14 6", "6 2 2 2")
MARKS = ("circle", "square", "ring", "box")


@dataclass
class Line:
    name: str
    values: list[float | None]
    colour: str
    dash: str = ""  # stroke-dasharray; empty: by the line's place, from DASHES
    kind: str = "series"
    mark: str = ""  # one of MARKS; empty: by the line's place


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


def x_positions(points: Sequence[Mapping[str, Any]], left: float = 0.0, right: float = 100.0) -> list[float]:
    """Where each scan sits (by default a percentage of the plot's width): by time when all times parse and
    differ, else evenly."""
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
    step = 10.0 ** math.floor(math.log10(top))
    return next(m * step for m in (1.0, 2.0, 5.0, 10.0) if m * step >= top)


def _fmt(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.6g}"


def _tick(value: float) -> str:
    """An axis label: 2.5, 500, 20k, 1.5M."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{_n(round(value / size, 1))}{suffix}"
    return _n(round(value, 1))


def _pc(x: float) -> str:
    """A percentage of the plot's width, as an SVG length."""
    return f"{x:.2f}".rstrip("0").rstrip(".") + "%"


def _fluid(cls: str, height: float, label: str, title: str, body: Iterable[str], data: Mapping[str, Any],
           left: int = PAD_LEFT) -> Markup:
    """An SVG as wide as its box, `height` px high, without a viewBox: text keeps its size on a phone and on a
    wide screen, horizontal places are percentages of the width inside the padding (the y axis's numbers
    sit in the left padding)."""
    attrs = "".join(f' data-{k}="{_t(v)}"' for k, v in data.items())
    return Markup(
        f'<svg class="pic pic-fluid {cls}" role="img" width="100%" height="{_n(height)}" style="height:'
        f'{_n(height)}px;padding:0 {PAD_RIGHT}px 0 {left}px;overflow:visible" aria-label="{_t(label)}"{attrs} '
        f'xmlns="http://www.w3.org/2000/svg"><title>{_t(title)}</title>' + "".join(body) + "</svg>")


def _axes(xs: list[float], points: Sequence[Mapping[str, Any]], top: float) -> list[str]:
    body = []
    for frac in (0.0, 0.5, 1.0):
        y = TOP + PLOT_H * (1 - frac)
        body.append(f'<line x1="0" x2="100%" y1="{_n(y)}" y2="{_n(y)}" stroke="#d6dbe1"/>'
                    f'<text x="-8" y="{_n(y + 4)}" font-size="11" text-anchor="end" fill="#3f4852">'
                    f'{_tick(top * frac)}</text>')
    if points:
        bottom = TOP + PLOT_H + 17
        first, last = str(points[0].get("at") or ""), str(points[-1].get("at") or "")
        same_day = first[:10] == last[:10]  # scans of one day: their times, else their dates
        first, last = (first[11:16], last[11:16]) if same_day else (first[:10], last[:10])
        body.append(f'<text x="0" y="{_n(bottom)}" font-size="11" fill="#3f4852">{_t(first)}</text>')
        if len(points) > 1:
            body.append(f'<text x="100%" y="{_n(bottom)}" font-size="11" text-anchor="end" fill="#3f4852">'
                        f'{_t(last)}</text>')
        body.append(f'<text x="50%" y="{_n(bottom)}" font-size="11" text-anchor="middle" '
                    f'fill="#3f4852">{len(points)} scan{"s" if len(points) != 1 else ""}</text>')
        body.extend(f'<line x1="{_pc(x)}" x2="{_pc(x)}" y1="{_n(TOP + PLOT_H)}" y2="{_n(TOP + PLOT_H + 4)}" '
                    f'stroke="#5b6673"/>' for x in xs)
    return body


def _path(xs: list[float], ys: list[float | None]) -> str:
    """Segments through the known points (x in tenths of a percent); an unknown value breaks the line."""
    out, pen = [], False
    for x, y in zip(xs, ys, strict=True):
        if y is None:
            pen = False
            continue
        out.append(f"{'L' if pen else 'M'}{_n(x * 10)} {_n(y)}")
        pen = True
    return " ".join(out)


def _apart(columns: list[list[float | None]]) -> list[list[float | None]]:
    """Heights of the lines at each scan, lines that would be drawn on (or within OFFSET of) one another moved
    apart around their middle, in the order of their values (the larger higher; equal ones in the order of the
    lines), by OFFSET px each (SPREAD px at most in all); lines already that far apart stay where they are."""
    out = [list(ys) for ys in columns]
    for j in range(len(columns[0]) if columns else 0):
        at = sorted((y, i) for i, ys in enumerate(columns) if (y := ys[j]) is not None)
        group: list[tuple[float, int]] = []
        for y, i in [*at, (math.inf, -1)]:
            if group and y - group[-1][0] >= OFFSET:
                step = min(OFFSET, SPREAD / max(1, len(group) - 1))
                if group[-1][0] - group[0][0] < step * (len(group) - 1):
                    middle = sum(g for g, _ in group) / len(group)
                    for rank, (_, k) in enumerate(group):
                        out[k][j] = middle + (rank - (len(group) - 1) / 2) * step
                group = []
            group.append((y, i))
    return out


def _mark(kind: str, x: str, y: float, colour: str, tip: str = "") -> str:
    """A scan's point: a filled or open circle or square centred on (x, y); x may be a percentage."""
    title = f"<title>{tip}</title>" if tip else ""
    fill = "#fff" if kind in ("ring", "box") else colour
    edge = f' stroke="{colour}" stroke-width="1.4"' if kind in ("ring", "box") else ""
    if kind in ("circle", "ring"):
        radius = 2.6 if kind == "circle" else 2.2
        return f'<circle cx="{x}" cy="{_n(y)}" r="{radius}" fill="{fill}"{edge}>{title}</circle>'
    side = 5 if kind == "square" else 4.4
    return (f'<rect x="{x}" y="{_n(y)}" width="{side}" height="{side}" transform="translate(-{side / 2} -{side / 2})" '
            f'fill="{fill}"{edge}>{title}</rect>')


def _legend(drawn: Sequence[tuple[Line, str, str]]) -> str:
    """Under the picture, in page text (it wraps on a phone): each line's swatch, name and latest value."""
    items = []
    for line, dash, mark in drawn:
        latest = next((v for v in reversed(line.values) if v is not None), None)
        dasharray = f' stroke-dasharray="{dash}"' if dash else ""
        items.append(
            f'<li class="{line.kind}" data-name="{_t(line.name)}" data-latest="{_fmt(latest)}">'
            f'<svg class="key" width="40" height="12" aria-hidden="true" focusable="false">'
            f'<line x1="1" x2="39" y1="6" y2="6" stroke="{line.colour}" stroke-width="2"{dasharray}/>'
            f'{_mark(mark, "20", 6, line.colour)}</svg>'
            f'{_t(view.short(block(line.name), 48))} <b>{_fmt(latest)}</b></li>')
    return '<ul class="pic-legend">' + "".join(items) + "</ul>"


def line_chart(cls: str, title: str, points: Sequence[Mapping[str, Any]], lines: Sequence[Line],
               words: str, note: str = "") -> Markup:
    """Lines over the scans in `points` (each line one value per point); `words` names the measure. The
    picture takes its box's width; a legend under it names each line with its latest value."""
    xs = x_positions(points)
    lines = [replace(line, values=[*line.values, *[None] * len(points)][:len(points)]) for line in lines]  # a
    # saved report's series may be shorter or longer than its scans: what is missing is unknown (a gap)
    known = [v for line in lines for v in line.values if v is not None]
    top = _ceiling(max(known, default=0.0))
    body = _axes(xs, points, top)
    height = TOP + PLOT_H + 24
    heights = _apart([[None if v is None else TOP + PLOT_H * (1 - v / top) for v in line.values]
                      for line in lines])
    drawn = []
    for i, (line, ys) in enumerate(zip(lines, heights, strict=True)):
        dash, mark = line.dash or DASHES[i % len(DASHES)], line.mark or MARKS[i % len(MARKS)]
        drawn.append((line, dash, mark))
        dots = "".join(_mark(mark, _pc(x), y, line.colour, f"{_t(line.name)}, {_t(scan_name(p))}: {_fmt(v)} "
                             f"{_t(words)}")
                       for x, y, v, p in zip(xs, ys, line.values, points, strict=True) if y is not None)
        values = ",".join("" if v is None else _n(v) for v in line.values)
        dasharray = f' stroke-dasharray="{dash}"' if dash else ""
        body.append(f'<g class="{line.kind}" data-name="{_t(line.name)}" data-values="{values}" '
                    f'data-dash="{dash}" data-mark="{mark}">'
                    f'<svg width="100%" height="{_n(height)}" viewBox="0 0 1000 {_n(height)}" '
                    f'preserveAspectRatio="none" overflow="visible"><path d="{_path(xs, ys)}" fill="none" '
                    f'stroke="{line.colour}" stroke-width="2" vector-effect="non-scaling-stroke"{dasharray}/>'
                    f"</svg>{dots}</g>")
    label = f"{title}, {len(points)} scans: " + "; ".join(
        f"{line.name} " + " → ".join(_fmt(v) for v in line.values) for line in lines) + (f". {note}" if note else "")
    svg = _fluid(f"pic-trend {cls}", height, label, title, body, {"scans": ",".join(
        str(p.get("id")) for p in points), "measure": words})
    return svg + Markup(_legend(drawn) + (f'<p class="small pic-note">{_t(note)}</p>' if note else ""))


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
        note = f"{len(lines) - 2} {who} with the largest latest value drawn; the {others}: max and median (grey)"
    if not lines or not points:
        return None
    return line_chart(cls, title, points, lines, words, note)


TEXT_LINE = 13.0  # px between the timeline's text lines
NAME_CHARS, WORDS_CHARS = 44, 56  # a line of 11.5 px bold / 11 px text that fits a phone (≈ 310 px)


def _lines(text: str, chars: int, most: int = 2) -> list[str]:
    """Text wrapped into at most `most` lines of `chars` characters (the last one cut with …): SVG text does
    not wrap, and a timeline as wide as a phone has no room for a long rule · item on one line."""
    lines = textwrap.wrap(block(text), chars, break_long_words=True, break_on_hyphens=False) or [""]
    return lines if len(lines) <= most else [*lines[:most - 1], lines[most - 1][:chars - 1] + "…"]


def timeline(points: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> Markup | None:
    """A bar per finding (rule · item, across hosts) from the scan it was first seen to the last that saw it."""
    if not points or not rows:
        return None
    xs = x_positions(points)
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
        bar = (f'x="{_pc(start)}" width="{_pc(end - start)}"' if end - start >= 1 else  # else a 4 px stub
               f'x="{_pc(start)}" width="4" transform="translate(-2 0)"')
        text = [(line, ' font-size="11.5" font-weight="600" fill="#1d232b"') for line in _lines(name, NAME_CHARS)]
        text += [(line, ' font-size="11" fill="#3f4852"') for line in _lines(f"{severity}, {words}", WORDS_CHARS)]
        bar_y = y + TEXT_LINE * len(text) + 5
        body.append(
            f'<g class="span" data-rule="{_t(row.get("rule", ""))}" data-item="{_t(row.get("item") or "")}" '
            f'data-first-scan="{_t(first)}" data-last-scan="{_t(last)}" data-open="{_t(open_hosts)}" '
            f'data-hosts="{_t(row.get("hosts"))}" data-severity="{_t(severity)}">'
            + "".join(f'<text x="0" y="{_n(y + 11 + TEXT_LINE * k)}"{style}>{_t(line)}</text>'
                      for k, (line, style) in enumerate(text))
            + f'<rect {bar} y="{_n(bar_y)}" height="9" rx="2" '
            f'fill="{colour}"><title>{_t(name)} ({_t(severity)}): {_t(words)}</title></rect>'
            + (f'<text x="{_pc(start)}" y="{_n(bar_y + 8)}" font-size="9" fill="#fff">◀</text>' if before else "")
            + "</g>")
        y = bar_y + 15
    label = f"When findings were first seen, over {len(points)} scans: " + "; ".join(told)
    return _fluid("pic-timeline", y, label, "First-seen timeline of findings", body, {"rows": len(rows)}, PAD_RIGHT)
