"""How to present: renderers take the report document (a dict) and return text. One module each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import json_renderer

Renderer = Callable[[dict[str, Any]], str]

# format name → (render function, file extension). Add a module and one entry here.
RENDERERS: dict[str, tuple[Renderer, str]] = {
    "json": (json_renderer.render, "json"),
}


def _register_optional() -> None:
    """Formats whose modules may be absent while being built."""
    import importlib

    for fmt, module, ext in (("html", "html_renderer", "html"), ("md", "markdown_renderer", "md"),
                             ("junit", "junit_renderer", "xml")):
        try:
            mod = importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{module}":
                continue
            raise
        RENDERERS[fmt] = (mod.render, ext)


_register_optional()
