"""How much a fact matters: drift severity per path and the order facts are ranked in.

The severity is data: each fact's `drift` in auditor/collect/facts.yaml (a newly enabled unit or a
changed binary hash/source is high, a package version change is medium, undeclared facts are low).
This module only applies the direction rules (newly enabled vs disabled; a whole added/removed row).
"""

from __future__ import annotations

import re
from typing import Any

from ..collect.schema import ENABLEMENT, drift_level
from ..factpath import parse
from ..models import severity_rank

# Within one subject (a unit, a binary), the fact that best names the cause comes first.
FIELD_PRIORITY: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in (
    r"^facts\.binaries\[[^\]]+\]\.source_host$",
    r"^facts\.binaries\[[^\]]+\]\.source_url$",
    r"^facts\.binaries\[[^\]]+\]\.sha256$",
    r"^facts\.systemd\.unit_files\[[^\]]+\]\.state$",
    r"^facts\.systemd\.enabled_units\[",
    r"^facts\.systemd\.units\[[^\]]+\]\.unit_file_state$",
    r"^facts\.systemd\.units\[[^\]]+\]\.health$",
    r"^facts\.binaries\[[^\]]+\]\.(version|package)$",
))

ENABLED_STATES = frozenset({"enabled", "enabled-runtime", True})


def path_severity(path: str) -> str:
    """How much a difference at `path` matters, whatever its direction: its `drift` in facts.yaml
    (an enablement state counts as high), low when undeclared."""
    level = drift_level(path)
    if level == ENABLEMENT:
        return "high"
    return level or "low"


def drift_severity(path: str, kind: str, expected: Any, actual: Any) -> str:
    """Severity of one drift item; a whole added/removed row takes its worst field's severity."""
    if kind == "unknown":
        return "medium"
    if kind != "changed" and path.startswith("facts.packages.items["):
        return "low"  # an extra or missing package is worth a line, its version change more
    if isinstance(actual if kind == "added" else expected, dict):  # a whole row
        row = actual if kind == "added" else expected
        severities = [drift_severity(f"{path}.{f}" if f else path, kind,
                                     None if kind == "added" else v, v if kind == "added" else None)
                      for f, v in row.items()]
        return max(severities, key=severity_rank, default=path_severity(path))
    if drift_level(path) == ENABLEMENT:  # newly enabled is high; other enablement changes are worth a look
        if actual in ENABLED_STATES and expected not in ENABLED_STATES:
            return "high"
        return "medium" if kind == "changed" or expected in ENABLED_STATES else "low"
    return path_severity(path)


def rank_key(path: str) -> tuple[int, int, str]:
    """Sort key (ascending = more important first): severity, then field priority, then path."""
    priority = next((i for i, p in enumerate(FIELD_PRIORITY) if p.search(path)), len(FIELD_PRIORITY))
    return -severity_rank(path_severity(path)), priority, path


def subject(path: str) -> str:
    """What a fact is about: `systemd:ecs.service` for every fact of that unit, else the path itself."""
    fp = parse(path)
    return f"{fp.area}:{fp.key}" if fp.is_row else path
