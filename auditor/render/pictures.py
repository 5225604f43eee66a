"""Pictures for the HTML report: inline SVG drawn here, server-side, from the report document only.

No script is needed to see them (the page's CSP stays as it is); each SVG is `role="img"` with a `<title>` and
an `aria-label` that carries the numbers it draws, and each drawn value is also a `data-*` attribute so a test
(or a reader's tooling) can read it back from the DOM. Host text is escaped (markupsafe) after its control and
bidi characters are made visible (textsafe), like every other value on the page.
"""

from __future__ import annotations

import heapq
import math
import re
import statistics
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from ..reporttypes import HostDoc, ReportDoc
from ..textsafe import block
from . import view

Doc = dict[str, Any]
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _t(value: Any) -> Markup:
    """Host or rule text, safe inside SVG text and attribute values."""
    return escape(block(str(value)))


def _pct(value: Any) -> float:
    """A share from a report (untrusted: a saved report may hold NaN, inf, text or a bool): 0–100, else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return min(max(float(value), 0.0), 100.0)


def _count(value: Any) -> bool:
    """A count a bar can show: a finite number ≥ 0 (a saved report is untrusted)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value >= 0


def _core_number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 16 else None


def _n(value: float) -> str:
    """A coordinate or a percentage: short, deterministic."""
    return f"{value:.1f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def _svg(cls: str, width: float, height: float, label: str, title: str, body: Iterable[str],
         data: Mapping[str, Any] | None = None) -> Markup:
    attrs = "".join(f' data-{k}="{_t(v)}"' for k, v in (data or {}).items())
    return Markup(
        f'<svg class="pic {cls}" role="img" viewBox="0 0 {_n(width)} {_n(height)}" width="{_n(width)}" '
        f'height="{_n(height)}" aria-label="{_t(label)}"{attrs} xmlns="http://www.w3.org/2000/svg">'
        f"<title>{_t(title)}</title>" + "".join(body) + "</svg>")


# ------------------------------------------------------------------------------------------------
# incident chain: boxes (one per link, links at the same chain position side by side) and arrows


CHAIN_WIDTH = 420
CHAR_W = 7.8  # average glyph width of 13 px sans text (DejaVu Sans is wide), for wrapping inside a box
LINE_H = 17


def _wrap(text: str, width: float, char_w: float = CHAR_W) -> list[str]:
    return textwrap.wrap(block(text), max(8, int((width - 16) / char_w)), break_long_words=True,
                         break_on_hyphens=False) or [""]


def chain_svg(chain: Mapping[str, Any], others: int = 0) -> Markup:
    """One host's chain, upstream at the top; `others`: hosts with the same chain (told with these numbers)."""
    links = [link for link in chain.get("links") or [] if isinstance(link, dict)]
    rows: dict[int, list[Mapping[str, Any]]] = {}
    for each in links:
        rows.setdefault(_core_number(each.get("position")) or 0, []).append(each)
    missing = sorted({str(m) for gap in chain.get("gaps") or [] for m in gap.get("missing") or []})
    body: list[str] = []
    y, gap, arrow = 4.0, 10.0, 26.0
    previous: list[tuple[float, float]] = []  # bottom centres of the previous row's boxes
    for position in sorted(rows):
        row = rows[position]
        width = (CHAIN_WIDTH - 8 - gap * (len(row) - 1)) / len(row)
        wrapped = [_wrap(str(link.get("text", "")), width) for link in row]
        height = max(len(lines) for lines in wrapped) * LINE_H + 14
        if previous:
            for i in range(len(row)):
                tx = 4 + i * (width + gap) + width / 2
                for bx, by in previous:
                    body.append(f'<path class="arrow" d="M{_n(bx)} {_n(by)} L{_n(tx)} {_n(y - 7)}" stroke="#3f4852" '
                                f'stroke-width="1.6" fill="none"/><path class="arrow-head" d="M{_n(tx - 5)} '
                                f'{_n(y - 8)} L{_n(tx + 5)} {_n(y - 8)} L{_n(tx)} {_n(y - 1)} Z" fill="#3f4852"/>')
        current = []
        for i, (link, lines) in enumerate(zip(row, wrapped, strict=True)):
            x = 4 + i * (width + gap)
            severity = str(link.get("severity") or "info")
            numbers = " ".join(NUMBER.findall(str(link.get("text", ""))))
            text = "".join(f'<tspan x="{_n(x + 8)}" dy="{LINE_H if j else 0}">{_t(line)}</tspan>'
                           for j, line in enumerate(lines))
            body.append(
                f'<g class="link" data-rule="{_t(link.get("rule", ""))}" data-position="{position}" '
                f'data-severity="{_t(severity)}" data-numbers="{numbers}" data-text="{_t(link.get("text", ""))}">'
                f'<rect class="box sev-box-{_t(severity)}" x="{_n(x)}" y="{_n(y)}" width="{_n(width)}" '
                f'height="{_n(height)}" rx="5" fill="#fff" stroke-width="2"/>'
                f'<text x="{_n(x + 8)}" y="{_n(y + 19)}" font-size="13" fill="#1d232b">{text}</text></g>')
            current.append((x + width / 2, y + height))
        previous = current
        y += height + arrow
    if missing:  # a partial chain: the link the rules declare but no finding shows, drawn dashed, not invented
        lines = _wrap("no finding for " + ", ".join(missing), CHAIN_WIDTH - 8)
        height = len(lines) * LINE_H + 14
        text = "".join(f'<tspan x="12" dy="{LINE_H if j else 0}">{_t(line)}</tspan>' for j, line in enumerate(lines))
        body.append(f'<g class="gap"><rect x="4" y="{_n(y)}" width="{CHAIN_WIDTH - 8}" height="{_n(height)}" rx="5" '
                    f'fill="#fff" stroke="#5b6673" stroke-dasharray="5 4" stroke-width="1.5"/><text x="12" '
                    f'y="{_n(y + 19)}" font-size="13" font-style="italic" fill="#3f4852">{text}</text></g>')
        y += height + arrow
    host = str(chain.get("host", ""))
    steps = "; then ".join(" and ".join(str(link.get("text", "")) for link in rows[p]) for p in sorted(rows))
    label = f"Incident chain on {host}: {steps}" + (f"; no finding for {', '.join(missing)}" if missing else "")
    if others:
        label += f" (same chain on {others} more host{'s' if others != 1 else ''})"
    return _svg("pic-chain", CHAIN_WIDTH, y - arrow + 4, label, f"Incident chain on {host}", body,
                {"host": host, "links": len(links)})


def chain_pictures(doc: ReportDoc, groups: Iterable[view.ChainGroup]) -> list[tuple[view.ChainGroup, Markup]]:
    """One picture per chain group (identical chains are one), with the group's first host's numbers."""
    by_host = {str(c.get("host", "")): c for c in doc.get("chains") or [] if isinstance(c, dict)}
    return [(g, chain_svg(by_host[g.hosts[0]], len(g.hosts) - 1)) for g in groups
            if g.hosts and g.hosts[0] in by_host]


# ------------------------------------------------------------------------------------------------
# per-core CPU strip: a cell per core (system share dark from the bottom, user share above it), wrapped


CPU_WIDTH = 480
LABEL_W = 58  # room for a row label such as 160–191 at 11 px
CELL_H = 34
MAX_COLUMNS = 32


@dataclass
class CpuStrip:
    host: str
    svg: Markup
    caption: str
    hot_system: float


def _core_rows(cores: list[list[float]]) -> list[list[list[float]]]:
    columns = min(MAX_COLUMNS, max(1, len(cores)))
    return [cores[i:i + columns] for i in range(0, len(cores), columns)]


def _cores(cpu: Mapping[str, Any]) -> list[list[float]]:
    """The cores a strip can draw: [cpu, user %, system %], each clamped (a saved report is untrusted)."""
    return [[float(core), _pct(c[1]), _pct(c[2])] for c in cpu.get("cores") or []
            if isinstance(c, list) and len(c) >= 3 and (core := _core_number(c[0])) is not None]


def cpu_strip(host: str, cpu: Mapping[str, Any]) -> CpuStrip | None:
    cores = _cores(cpu)
    if not cores:
        return None
    hot = _core_number(cpu.get("max_core"))
    hot_pct = _pct(cpu.get("max_core_system_pct"))
    thread = cpu.get("hot_thread") or {}
    rows = _core_rows(cores)
    columns = len(rows[0])
    cell = min(60.0, (CPU_WIDTH - LABEL_W) / columns)
    body: list[str] = []
    y = 4.0
    for row in rows:
        body.append(f'<text x="0" y="{_n(y + CELL_H / 2 + 4)}" font-size="11" fill="#3f4852">'
                    f'{int(row[0][0])}–{int(row[-1][0])}</text>')
        for i, (number, user, system) in enumerate(row):
            x = LABEL_W + i * cell
            sys_h = CELL_H * min(system, 100) / 100
            user_h = CELL_H * min(user, max(0.0, 100 - system)) / 100
            is_hot = hot is not None and int(number) == int(hot)
            body.append(
                f'<rect class="core" data-cpu="{int(number)}" data-user="{_n(user)}" data-system="{_n(system)}" '
                f'x="{_n(x)}" y="{_n(y)}" width="{_n(cell - 1)}" height="{CELL_H}" fill="#e3e7eb">'
                f"<title>cpu {int(number)}: user {_n(user)}%, system {_n(system)}%</title></rect>"
                f'<rect x="{_n(x)}" y="{_n(y + CELL_H - sys_h)}" width="{_n(cell - 1)}" height="{_n(sys_h)}" '
                f'fill="#b3141a"/><rect x="{_n(x)}" y="{_n(y + CELL_H - sys_h - user_h)}" width="{_n(cell - 1)}" '
                f'height="{_n(user_h)}" fill="#2f6fb0"/>')
            if is_hot:
                body.append(f'<rect class="hot-mark" x="{_n(x - 1)}" y="{_n(y - 2)}" width="{_n(cell + 1)}" '
                            f'height="{CELL_H + 4}" fill="none" stroke="#1d232b" stroke-width="2.5"/>')
        y += CELL_H + 8
    avg_user = statistics.fmean(c[1] for c in cores)
    avg_sys = statistics.fmean(c[2] for c in cores)
    label = (f"CPU window on {host}: {len(cores)} cores, mean user {avg_user:.1f}%, mean system {avg_sys:.1f}%")
    hot_line = ""
    if hot is not None:
        hot_line = f"hot core {int(hot)}: system {hot_pct:g}%"
        if thread.get("comm"):
            hot_line += f", busiest thread {thread.get('comm')} (tid {thread.get('tid')}, {thread.get('ticks')} ticks)"
        else:
            hot_line += ", no sampled thread (≥ 5 ticks) last ran there"
        label += "; " + hot_line
        lines = _wrap("▲ " + hot_line, CPU_WIDTH - LABEL_W, 8.2)  # 12 px bold
        spans = "".join(f'<tspan x="{LABEL_W}" dy="{16 if j else 0}">{_t(line)}</tspan>'
                        for j, line in enumerate(lines))
        body.append(f'<text class="hot" x="{LABEL_W}" y="{_n(y + 10)}" font-size="12" font-weight="700" '
                    f'fill="#1d232b">{spans}</text>')
        y += 16 * len(lines) + 2
    data = {"host": host, "cores": len(cores), "hot-core": "" if hot is None else int(hot),
            "hot-system": _n(hot_pct), "hot-thread": thread.get("comm") or "", "hot-tid": thread.get("tid") or ""}
    svg = _svg("pic-cpu", CPU_WIDTH, y, label, f"Per-core CPU on {host}", body, data)
    return CpuStrip(host, svg, label, hot_pct)


MAX_CPU_STRIPS = 24  # hottest first; the JSON report has every host


def cpu_strips(doc: ReportDoc) -> tuple[list[CpuStrip], int]:
    """Strips for hosts with per-core CPU facts, the hottest core first; (strips shown, hosts not shown).
    Only the shown ones are drawn: a 100,000-host report has one strip's worth of facts per host."""
    drawable: list[tuple[float, str, Mapping[str, Any]]] = []
    for host in doc["hosts"]:
        cpu = (host.get("facts_summary") or {}).get("cpu")
        if isinstance(cpu, dict) and _cores(cpu):
            drawable.append((-_pct(cpu.get("max_core_system_pct")), str(host["name"]), cpu))
    shown = heapq.nsmallest(MAX_CPU_STRIPS, drawable, key=lambda d: (d[0], d[1]))  # stable, as sorted() is
    strips = [strip for _, name, cpu in shown if (strip := cpu_strip(name, cpu)) is not None]
    return strips, max(0, len(drawable) - MAX_CPU_STRIPS)


# ------------------------------------------------------------------------------------------------
# per group: dying memcgs and restarts per host as small bar charts, outliers marked


BAR_W = 360
BAR_H = 16
NAME_W = 110
MEASURES = (("dying_memcgs", "dying memcgs"), ("restarts", "unit restarts"))
MAX_BARS = 40  # per group and measure: the largest values; the rest are counted in the caption


def outlier(value: float, median: float) -> bool:
    """Far above the fleet's median: more than twice it and at least 10 more (a few memcgs is noise)."""
    return value > 2 * median and value - median >= 10


@dataclass
class BarChart:
    group: str
    measure: str
    svg: Markup


def _summary(host: HostDoc) -> Mapping[str, Any]:
    return host.get("facts_summary") or {}


def bar_charts(doc: ReportDoc) -> list[BarChart]:
    """Per group, a chart per measure (the group's charts side by side); one scale per measure over the fleet."""
    key = view.group_key(doc)
    measured: dict[str, tuple[dict[str, list[tuple[str, float]]], float, float]] = {}  # by group, median, top
    unknown: dict[tuple[str, str], list[str]] = {}  # (group, measure) → hosts without the value (not reached)
    for measure, _ in MEASURES:
        values = [(view.host_group(h, key), str(h["name"]), _summary(h).get(measure))
                  for h in doc["hosts"]]
        known: dict[str, list[tuple[str, float]]] = {}
        for g, n, v in values:
            if v is not None and _count(v):
                known.setdefault(g, []).append((n, float(v)))
            else:
                unknown.setdefault((g, measure), []).append(n)
        every = [v for rows in known.values() for _, v in rows]
        if any(every):
            measured[measure] = (known, statistics.median(every), max(every) or 1.0)
    charts: list[BarChart] = []
    for group in view.groups(doc):
        for measure, words in MEASURES:
            if measure not in measured or not (in_group := measured[measure][0].get(group)):
                continue
            _, median, top = measured[measure]
            hidden = len(in_group) - MAX_BARS  # the largest drawn: sorted(...)[:MAX_BARS], without the sort
            rows = heapq.nsmallest(MAX_BARS, in_group, key=lambda nv: (-nv[1], nv[0]))
            body = []
            marked = []
            for i, (name, value) in enumerate(rows):
                y = 4 + i * (BAR_H + 4)
                odd = outlier(value, median)
                width = (BAR_W - NAME_W - 70) * value / top
                if odd:
                    marked.append(f"{name} {value:g}")
                body.append(
                    f'<text x="{NAME_W - 6}" y="{_n(y + 12)}" font-size="11" text-anchor="end" fill="#1d232b">'
                    f'{_t(view.short(block(name), 16))}</text>'
                    f'<rect class="bar" data-host="{_t(name)}" data-value="{_n(value)}" data-outlier="{int(odd)}" '
                    f'x="{NAME_W}" y="{_n(y)}" width="{_n(max(width, 1))}" height="{BAR_H}" '
                    f'fill="{"#b3141a" if odd else "#5b6673"}"><title>{_t(name)}: {_n(value)} {words}'
                    f'{" (outlier)" if odd else ""}</title></rect>'
                    f'<text x="{_n(NAME_W + max(width, 1) + 4)}" y="{_n(y + 12)}" font-size="11" '
                    f'font-weight="{700 if odd else 400}" fill="{"#b3141a" if odd else "#1d232b"}">'
                    f'{_n(value)}{" ▲" if odd else ""}</text>')
            height = 8 + len(rows) * (BAR_H + 4)
            missing = unknown.get((group, measure)) or []
            if missing:
                body.append(f'<text class="no-data" x="4" y="{_n(height + 6)}" font-size="11" fill="#3f4852">'
                            f'{_t(view.short(block("no data: " + ", ".join(missing)), 56))}</text>')
                height += 16
            label = (f"{words.capitalize()} per host in {group}: "
                     + ", ".join(f"{n} {v:g}" for n, v in rows)
                     + (f"; {hidden} more hosts not drawn" if hidden > 0 else "")
                     + (f"; no data for {', '.join(missing)}" if missing else "")
                     + (f"; outliers (over twice the fleet median {median:g}): {', '.join(marked)}" if marked else ""))
            charts.append(BarChart(group, measure, _svg(
                "pic-bars", BAR_W, height, label, f"{words} per host in {group}", body,
                {"group": group, "measure": measure, "median": _n(median)})))
    return charts
