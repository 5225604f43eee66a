"""Renderers: each takes the report document (reporttypes.ReportDoc, valid against report.schema.json) and
returns text.

One module per format, imported explicitly: a missing module is an ImportError at start-up, never a
silently absent format. A renderer imports its heavy libraries (jinja2) when it first renders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..reporttypes import ReportDoc
from . import asff_renderer, html_renderer, json_renderer, junit_renderer, markdown_renderer, prom_renderer

Renderer = Callable[[ReportDoc], str]

# format name → (render function, file extension). Add a module and one entry here.
RENDERERS: dict[str, tuple[Renderer, str]] = {
    "json": (json_renderer.render, "json"),
    "html": (html_renderer.render, "html"),
    "md": (markdown_renderer.render, "md"),
    "junit": (junit_renderer.render, "xml"),
    "prom": (prom_renderer.render, "prom"),
    "asff": (asff_renderer.render, "asff.json"),
}

# formats that can also render straight to UTF-8 bytes (the same content), in pieces written as they are
# made: the JSON of a 100,000-host report is never held whole
BYTE_RENDERERS: dict[str, Callable[[ReportDoc], Iterable[bytes]]] = {"json": json_renderer.render_chunks}
