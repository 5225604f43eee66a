"""Values read back from the store, checked: a column holds what this program wrote, or the store is bad input.

SQLite columns have affinity, not types, and CHECK constraints bind only writers that keep them on: a
crafted file can hold `pid = 'abc'`, 2^63-1, a blob where a count was, NaN or 100,000 nested brackets
where JSON was. Each reader states what it expects; anything else is an InputError naming the store and
the row (exit 2). JSON text goes through the project's strict loader (jsonload: depth, NaN, big integers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError
from ..jsonload import load_json_text

PID_MAX = 2**22  # Linux's largest pid_max (kernel/pid.c PID_MAX_LIMIT)
INT_MAX = 2**63 - 1


def damaged(where: Path, what: str, detail: str) -> InputError:
    return InputError(f"the history store holds a damaged value: {what} {detail} "
                      "(move it aside or choose another with --store PATH)", str(where))


def integer(value: Any, where: Path, what: str, low: int = 0, high: int = INT_MAX, null: bool = False) -> Any:
    """An int in [low, high] (None too when `null`)."""
    if value is None and null:
        return None
    if type(value) is not int or not low <= value <= high:
        raise damaged(where, what, f"is {_shown(value)}, not an integer in {low}..{high}")
    return value


def text(value: Any, where: Path, what: str, null: bool = False, choices: frozenset[str] | None = None) -> Any:
    """A str (one of `choices` when given; None too when `null`)."""
    if value is None and null:
        return None
    if not isinstance(value, str) or (choices is not None and value not in choices):
        wanted = f"one of {', '.join(sorted(choices))}" if choices is not None else "text"
        raise damaged(where, what, f"is {_shown(value)}, not {wanted}")
    return value


def json_value(value: Any, where: Path, what: str) -> Any:
    """JSON text the store wrote (None stays None), parsed strictly."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise damaged(where, what, f"is {_shown(value)}, not JSON text")
    try:
        return load_json_text(value, str(where))
    except InputError as exc:
        raise damaged(where, what, f"is not strict JSON ({exc.message})") from None


def _shown(value: Any) -> str:
    shown = repr(value)
    return f"{type(value).__name__} {shown[:40]}{'…' if len(shown) > 40 else ''}"
