"""One fact over stored scans (pure): resolve a fact path in a snapshot, group values, draw a sparkline.

`facts.cgroups.memory.dying`, `facts.systemd.units[ecs.service].restarts`,
`facts.trends.units[ecs.service].restarts_delta` (trend facts are derived again between consecutive
snapshots of a host), `facts.kernel.sysctls[vm.swappiness]`.
"""

from __future__ import annotations

from typing import Any

from ..collect.facthints import LIST_COMMAND, unknown_fact_path
from ..collect.schema import lookup
from ..errors import InputError
from ..factpath import selector_steps
from ..snapshotdoc import Snapshot

BARS = "▁▂▃▄▅▆▇█"
CHARTED = ("integer", "number", "boolean")  # declared types a trend can draw


def parse_path(path: str) -> list[tuple[str, bool]]:
    """(`name`, is_selector) steps of a fact path; bad paths, and facts that are no numbers, are an InputError."""
    if not path.startswith("facts.") and not path.startswith("host."):
        raise InputError(f"fact path must start with facts. or host., not {path!r}")
    spec = lookup(path)
    if spec is None:
        raise InputError(unknown_fact_path(path))
    if spec.type not in CHARTED:
        raise InputError(f"{path} is {'an' if spec.type[0] in 'aeiou' else 'a'} {spec.type}, not a number: "
                         f"history trend charts numbers (such as facts.cgroups.memory.dying; see `{LIST_COMMAND}`)")
    try:
        return selector_steps(path)
    except ValueError as exc:
        raise InputError(f"cannot parse fact path {path!r} at character {exc.args[0] + 1}") from None


def resolve(snapshot: Snapshot, path: str, steps: list[tuple[str, bool]]) -> Any:
    """The value at a parsed path (None when absent); list rows are chosen by their schema key."""
    value: Any = snapshot
    walked = ""
    for name, selector in steps:
        if selector:
            walked += f"[{name}]"
            if isinstance(value, list):
                spec = lookup(walked.rsplit("[", 1)[0]) if "[" in walked else None
                key = spec.key if spec is not None and spec.key else "name"
                value = next((r for r in value if isinstance(r, dict) and str(r.get(key)) == name),
                             name if name in value else None)
                if value == name and not isinstance(value, dict):
                    value = True  # a list of names: membership
            elif isinstance(value, dict):
                value = value.get(name)
            else:
                return None
        else:
            walked += f".{name}" if walked else name
            value = value.get(name) if isinstance(value, dict) else None
        if value is None:
            return None
    return value


def number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def sparkline(values: list[float | None]) -> str:
    """One character per point (space when unknown), scaled between the series' min and max."""
    known = [v for v in values if v is not None]
    if not known:
        return " " * len(values)
    low, high = min(known), max(known)
    span = high - low
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        else:
            out.append(BARS[0] if span == 0 else BARS[min(len(BARS) - 1, int((v - low) / span * (len(BARS) - 1)))])
    return "".join(out)
