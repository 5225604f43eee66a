"""Package version order (dpkg's algorithm: epoch, upstream, revision; `~` sorts before anything).

Used for rpm versions too: for the usual `VERSION-RELEASE` strings both orders agree (digit runs compare as
numbers, letters before other symbols); rpm's treatment of `^` and separators differs only in corner cases.
"""

from __future__ import annotations


def _order(c: str) -> int:
    if not c or c.isdigit():
        return 0
    if c.isalpha():
        return ord(c)
    if c == "~":
        return -1
    return ord(c) + 256


def _verrevcmp(a: str, b: str) -> int:
    """dpkg's verrevcmp: alternate non-digit runs (by `_order`) and digit runs (as numbers)."""
    i = j = 0

    def at(s: str, k: int) -> str:
        return s[k] if k < len(s) else ""

    while i < len(a) or j < len(b):
        while (at(a, i) and not at(a, i).isdigit()) or (at(b, j) and not at(b, j).isdigit()):
            ac, bc = _order(at(a, i)), _order(at(b, j))
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        while at(a, i) == "0":
            i += 1
        while at(b, j) == "0":
            j += 1
        first_diff = 0
        while at(a, i).isdigit() and at(b, j).isdigit():
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if at(a, i).isdigit():
            return 1
        if at(b, j).isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


def _split(version: str) -> tuple[int, str, str]:
    epoch, upstream, revision = 0, version, ""
    head, sep, rest = version.partition(":")
    if sep and head.isdigit():
        epoch, upstream = int(head), rest
    if "-" in upstream:
        upstream, revision = upstream.rsplit("-", 1)
    return epoch, upstream, revision


def compare_versions(a: str, b: str) -> int:
    """< 0 when `a` is older than `b`, 0 when equal, > 0 when newer."""
    ea, ua, ra = _split(a)
    eb, ub, rb = _split(b)
    if ea != eb:
        return ea - eb
    return _verrevcmp(ua, ub) or _verrevcmp(ra, rb)
