"""Help for a fact path the schema does not declare: the closest declared paths, and how to list them all.

One message for every place a user names a fact path (--group-by, --symptom, baselines, history trend).
"""

from __future__ import annotations

import difflib
import re

from .schema import fact_paths

LIST_COMMAND = "ami-auditor rules facts [PREFIX]"
_SELECTOR = re.compile(r"\[[^\]]*\]")


def close_paths(path: str, n: int = 3) -> list[str]:
    """Declared paths like `path`, with `path`'s own row keys put back (`units[ecs.service].restart` →
    `facts.systemd.units[ecs.service].restarts`)."""
    keys = [m.group(0) for m in _SELECTOR.finditer(path)]
    near = difflib.get_close_matches(_SELECTOR.sub("[]", path), list(fact_paths()), n=n, cutoff=0.75)
    return [_with_keys(candidate, keys) for candidate in near]


def _with_keys(schema_path: str, keys: list[str]) -> str:
    """`units[].restarts` with keys `[ecs.service]` → `units[ecs.service].restarts` (extra `[]` stay)."""
    parts = schema_path.split("[]")
    out = parts[0]
    for i, rest in enumerate(parts[1:]):
        out += (keys[i] if i < len(keys) else "[]") + rest
    return out


def unknown_fact_path(path: str) -> str:
    """`unknown fact path 'facts.kernel.relase' (did you mean facts.kernel.release?); list them: …`."""
    near = close_paths(path)
    mean = f" (did you mean {', '.join(near)}?)" if near else ""
    return f"unknown fact path {path!r}{mean}; list the fact paths with `{LIST_COMMAND}`"
