"""Release notes (compare/release.py) as Markdown, JSON or one self-contained HTML page.

Values come from images and hosts: Markdown escapes them like the report's Markdown (markdown_renderer.escape),
HTML autoescapes them (html_renderer's environment) under a CSP that allows no script and no fetch."""

from __future__ import annotations

import json
from typing import Any

from ..reporttypes import ReleaseNotesDoc
from . import view
from .html_renderer import environment
from .markdown_renderer import code, escape

FORMATS = ("md", "json", "html")
TEMPLATE = "release-notes.html.j2"


def _value(value: Any) -> str:
    return "—" if value is None else view.short(view.show(value), 80)


def summary_line(notes: ReleaseNotesDoc) -> str:
    """The count every format of `diff` gives: changes (one per subject, as the notes list them) by severity,
    then the differences (fact paths, one per line of the text output) they hold."""
    counts = ", ".join(f"{n} {s}" for s, n in notes["by_severity"].items())
    return f"{notes['changes']} change(s)" + (f": {counts}" if counts else "") + \
        f" ({notes['differences']} difference(s))"


def markdown(notes: ReleaseNotesDoc) -> str:
    lines = [f"# Release notes: {code(notes['from'])} → {code(notes['to'])}", ""]  # code spans: nothing escaped
    lines.append(summary_line(notes) + ".")  # numbers and severity names: nothing from a host
    for section in notes["sections"]:
        lines += ["", f"## {section['title']}", "", "| severity | subject | change | before | after |",
                  "| --- | --- | --- | --- | --- |"]
        for c in section["changes"]:
            lines.append(f"| {c['severity']} | {escape(c['subject'])} | {escape(c['change'])} | "
                         f"{escape(_value(c['before']))} | {escape(_value(c['after']))} |")
    if notes["unknown"]:
        lines += ["", "## Not known on one side", ""]
        lines += [f"- {escape(u['area'])}: {escape(u['from'])} → {escape(u['to'])}" for u in notes["unknown"]]
    return "\n".join(lines) + "\n"


def render(notes: ReleaseNotesDoc, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(notes, indent=2, ensure_ascii=True, default=list) + "\n"
    if fmt == "md":
        return markdown(notes)
    return environment().get_template(TEMPLATE).render(notes=notes, summary=summary_line(notes))
