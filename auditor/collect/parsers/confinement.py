"""The image reader's `confinement` section: what it refused or found suspicious, one note per line (pure).

The image room (auditor/image/) prints it; collect only reads it, so it needs nothing from that room."""

from __future__ import annotations

from collections.abc import Mapping

from ..sections import Section

CONFINEMENT = "confinement"  # the extra section listing what the image reader refused or reported
MAX_NOTES_SHOWN = 10


def confinement_error(sections: Mapping[str, Section]) -> str | None:
    """The snapshot's `errors["image"]` text from a `confinement` section (None when it is empty)."""
    section = sections.get(CONFINEMENT)
    lines = [ln for ln in (section.body.splitlines() if section is not None else []) if ln.strip()]
    if not lines:
        return None
    more = f"; … {len(lines) - MAX_NOTES_SHOWN} more" if len(lines) > MAX_NOTES_SHOWN else ""
    return "image read confined to its root: " + "; ".join(lines[:MAX_NOTES_SHOWN]) + more
