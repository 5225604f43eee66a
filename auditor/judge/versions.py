"""Package versions compared by the package manager's own rules, and version constraints (`>= 1.0.0~rc93 < 1.1.12`).

dpkg's order comes from python-debian (`debian_support.Version`), rpm's from univers (`univers.rpm`, rpmvercmp
with `~` and `^`, checked against rpm's own test vectors in tests/unit/test_judge_versions.py). A version is never
compared as a string.

A constraint names upstream releases, as advisories do, so a bound without an epoch ignores the installed
epoch (Datadog ships every release as `1:7.38.0-1`) and a bound without a revision ignores the installed
revision (`<= 1.16.1` holds for `1.16.1-1`); a bound that carries them compares them. Compared so, an upstream
version loses Debian's repacked-source marker `~ds1`/`~dfsg1`: `1.7.22~ds1` is release 1.7.22, repacked (the
tilde only keeps it below a pristine 1.7.22 upload), not a pre-release of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from debian.debian_support import Version as DebVersion
from univers.rpm import compare_rpm_versions

MANAGERS = ("dpkg", "rpm")
_OPS = {"<": (-1,), "<=": (-1, 0), ">": (1,), ">=": (1, 0), "=": (0,), "==": (0,), "!=": (-1, 1)}
_TERM = re.compile(r"\s*(<=|>=|==|!=|<|>|=)?\s*([^\s<>=!]+)\s*")
_REPACK = re.compile(r"~(?:ds|dfsg)\d*$")


class VersionError(ValueError):
    """A version or constraint that cannot be read (a table row the user wrote, or a host's text)."""


@dataclass(frozen=True)
class Bound:
    """One `OP VERSION` term; `epoch`/`revision`: whether VERSION names them (else the installed ones are ignored)."""

    op: str
    version: str

    @property
    def epoch(self) -> bool:
        return ":" in self.version

    @property
    def revision(self) -> bool:
        return "-" in self.version


def compare(manager: str, a: str, b: str) -> int:
    """-1, 0 or 1 as `a` is older than, equal to or newer than `b` under `manager`'s rules (dpkg or rpm)."""
    if manager == "dpkg":
        try:
            va, vb = DebVersion(a), DebVersion(b)
        except ValueError as exc:
            raise VersionError(f"not a dpkg version: {exc}") from None
        return (va > vb) - (va < vb)
    if manager == "rpm":
        try:
            return int(compare_rpm_versions(a, b))
        except ValueError as exc:  # a non-numeric epoch
            raise VersionError(f"not an rpm version: {a!r} or {b!r} ({exc})") from None
    raise VersionError(f"unknown package manager {manager!r} (known: {', '.join(MANAGERS)})")


def _split(manager: str, version: str) -> tuple[str, str, str]:
    """(epoch, upstream, revision) as `manager` reads them: dpkg splits the revision at the last `-`, rpm the
    release at its one `-` (an rpm version cannot hold `-`)."""
    epoch, colon, rest = version.partition(":")
    if not colon:
        epoch, rest = "", version
    upstream, dash, revision = rest.rpartition("-") if manager == "dpkg" else rest.partition("-")
    if not dash:
        upstream, revision = rest, ""
    return epoch, upstream, revision


def _installed_as(manager: str, installed: str, bound: Bound) -> str:
    """The installed version reduced to the parts `bound` names (epoch, revision)."""
    epoch, upstream, revision = _split(manager, installed)
    text = _REPACK.sub("", upstream) if not bound.revision else f"{upstream}-{revision}" if revision else upstream
    if bound.epoch and epoch:
        text = f"{epoch}:{text}"
    return text


@lru_cache(maxsize=1024)
def parse_constraint(text: str) -> tuple[Bound, ...]:
    """`>= 1.0.0~rc93 < 1.1.12` → its terms (all must hold); a bare version means `= VERSION`."""
    if not isinstance(text, str) or not text.strip():
        raise VersionError(f"empty version constraint {text!r}")
    terms: list[Bound] = []
    pos = 0
    while pos < len(text):
        m = _TERM.match(text, pos)
        if m is None or m.end() == pos:
            raise VersionError(f"cannot read version constraint {text!r} at {text[pos:]!r}")
        terms.append(Bound(m.group(1) or "=", m.group(2)))
        pos = m.end()
    return tuple(terms)


def satisfies(manager: str, installed: str, constraint: str) -> bool:
    """Whether `installed` meets every term of `constraint` under `manager`'s rules."""
    for bound in parse_constraint(constraint):
        order = compare(manager, _installed_as(manager, installed, bound), bound.version)
        if order not in _OPS[bound.op]:
            return False
    return True


def backported(manager: str, installed: str, fixed: list[str]) -> str | None:
    """The entry of `fixed` (distro builds that carry the fix, e.g. Debian's `1.1.5+ds1-1+deb12u1`) that
    `installed` is at or past on the same upstream version, else None."""
    _, upstream, _ = _split(manager, installed)
    for build in fixed:
        if _split(manager, build)[1] == upstream and compare(manager, installed, build) >= 0:
            return build
    return None


def matches_any(manager: str, installed: str, constraints: str | list[str]) -> str | None:
    """The first of `constraints` (one string, or a list of alternatives) that `installed` meets, else None."""
    for constraint in [constraints] if isinstance(constraints, str) else constraints:
        if satisfies(manager, installed, constraint):
            return constraint
    return None
