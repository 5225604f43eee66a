"""Colour for the terminal summary: SGR codes for severities and host statuses, decided once per run.

Reports (stdout or --out files) are never coloured; only the summary and progress lines are, and only on a
terminal unless `--color always`. `NO_COLOR` (non-empty, no-color.org) turns `auto` off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TextIO

MODES = ("auto", "always", "never")

STYLES: dict[str, str] = {
    "critical": "1;35", "high": "1;31", "medium": "33", "low": "36", "info": "2",
    "ok": "32", "unreachable": "31", "auth_failed": "31", "timeout": "33", "probe_refused": "31", "error": "31",
    "bold": "1", "dim": "2",
}


def enabled(mode: str, stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Whether `stream` gets colour: `always`, or `auto` on a terminal without NO_COLOR."""
    if mode == "always":
        return True
    if mode == "never" or environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def paint(text: str, style: str | None) -> str:
    """`text` wrapped in the SGR code of `style` (unknown or None: unchanged). `text` must already be escaped."""
    code = STYLES.get(style or "")
    return f"\x1b[{code}m{text}\x1b[0m" if code else text
