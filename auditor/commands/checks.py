"""Argument types and checks shared by commands: bounded numbers, host-attribute keys, file stems.

Everything here runs before any host is contacted or any file written; failures are InputError
(or argparse errors, which the CLI also turns into exit 2).
"""

from __future__ import annotations

import argparse
import hashlib
import math
from collections.abc import Callable, Sequence

from ..errors import InputError

MAX_DEADLINE_S = 86400.0  # one day per host
MAX_PARALLEL = 512
MAX_TOP = 1000


def bounded_float(low_exclusive: float, high: float) -> Callable[[str], float]:
    """An argparse type: a finite number in (low, high]; nan, inf and out-of-range values are refused."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or not low_exclusive < value <= high:
            raise argparse.ArgumentTypeError(
                f"must be a finite number greater than {low_exclusive:g} and at most {high:g}, not {text!r}")
        return value

    return parse


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, not {value}")
        return value

    return parse


def finite_positive(value: float, option: str) -> float:
    """InputError unless value is a finite number > 0 (for options whose type is a plain float)."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"{option} must be a finite number greater than 0, not {value!r}")
    return float(value)


def stem_digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def unique_stems(names: Sequence[str], stem: Callable[[str], str]) -> dict[str, str]:
    """A distinct file stem per host name, deterministic for a given set of names.

    Names whose safe stems collide (compared case-insensitively, for case-insensitive file systems)
    get `-<sha256[:8]>` of their real name appended — first those the sanitising changed, then all of
    the group if needed. InputError if stems are still not unique (practically never).
    """
    stems = {name: stem(name) for name in names}
    for rule in ("changed", "all"):
        groups: dict[str, list[str]] = {}
        for name in names:
            groups.setdefault(stems[name].casefold(), []).append(name)
        for members in groups.values():
            if len(members) < 2:
                continue
            for name in members:
                if rule == "all" or stem(name) != name:
                    stems[name] = f"{stem(name)}-{stem_digest(name)}"
    seen: dict[str, str] = {}
    for name in names:
        key = stems[name].casefold()
        if key in seen:
            raise InputError(f"hosts {seen[key]!r} and {name!r} would be written to the same file "
                             f"{stems[name]}.json; rename one")
        seen[key] = name
    return stems
