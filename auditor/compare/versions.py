"""Package version order: dpkg's algorithm (epoch, upstream, revision; `~` sorts before anything), from
python-debian.

Used for rpm versions too: for the usual `VERSION-RELEASE` strings both orders agree (digit runs compare as
numbers, letters before other symbols); rpm's treatment of `^` and separators differs only in corner cases.
"""

from __future__ import annotations

from debian.debian_support import Version


def compare_versions(a: str, b: str) -> int:
    """< 0 when `a` is older than `b`, 0 when equal or when either is not a version at all (a host's
    text: the change is then only "changed", never an invented order), > 0 when newer."""
    try:
        va, vb = Version(a), Version(b)
    except ValueError:
        return 0
    return (va > vb) - (va < vb)
