"""Installed packages (dpkg or rpm) as name/version/arch rows."""

from __future__ import annotations

from collections import Counter

from ...facttypes import Packages, PackagesItemsRow
from ..sections import UnparsableOutput


def parse_packages(text: str) -> Packages:
    manager = None
    versions: dict[tuple[str, str], str] = {}  # (name, arch) → version; a later row for the same pair wins
    for line in text.splitlines():
        if line == "!unparsable":  # the probe's row filter saw a line that is no `STATUS\tNAME\tVERSION\tARCH` row
            raise UnparsableOutput(f"the {manager} package list has lines that are not package rows")
        if line.startswith("manager="):
            manager = line.split("=", 1)[1].strip()
            continue
        cols = line.split("\t")
        if len(cols) >= 2 and cols[0]:
            arch = cols[2] if len(cols) > 2 else ""
            versions[(cols[0], arch)] = cols[1]
    names = Counter(name for name, _ in versions)  # counted once: per row it was quadratic in the package count
    rows: list[PackagesItemsRow] = [  # multiarch: keep the key unique (`libc6:i386`)
        {"name": f"{name}:{arch}" if names[name] > 1 else name, "version": versions[(name, arch)], "arch": arch}
        for name, arch in sorted(versions)]
    return {"manager": manager, "count": len(rows), "items": rows}
