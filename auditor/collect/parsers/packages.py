"""Installed packages (dpkg or rpm) as name/version/arch rows."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..sections import UnparsableOutput


def parse_packages(text: str) -> dict[str, Any]:
    manager = None
    items: dict[tuple[str, str], dict[str, str]] = {}
    for line in text.splitlines():
        if line == "!unparsable":  # the probe's row filter saw a line that is no `STATUS\tNAME\tVERSION\tARCH` row
            raise UnparsableOutput(f"the {manager} package list has lines that are not package rows")
        if line.startswith("manager="):
            manager = line.split("=", 1)[1].strip()
            continue
        cols = line.split("\t")
        if len(cols) >= 2 and cols[0]:
            arch = cols[2] if len(cols) > 2 else ""
            items[(cols[0], arch)] = {"name": cols[0], "version": cols[1], "arch": arch}
    rows = sorted(items.values(), key=lambda r: (r["name"], r["arch"]))
    names = Counter(r["name"] for r in rows)  # counted once: per row it was quadratic in the package count
    for row in rows:  # multiarch: keep the key unique (`libc6:i386`)
        if names[row["name"]] > 1:
            row["name"] = f"{row['name']}:{row['arch']}"
    return {"manager": manager, "count": len(rows), "items": rows}
