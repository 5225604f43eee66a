"""Space and inodes of the filesystems a node writes to (the `disk` section: `df -P` rows in argument order)."""

from __future__ import annotations

from ...facttypes import Disk, DiskMountsRow
from ..sections import UnparsableOutput, kv_lines, subsections, to_int


def _rows(text: str, what: str) -> list[list[str]]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].startswith("Filesystem"):
        lines = lines[1:]
    rows = []
    for line in lines:
        cols = line.split()
        if len(cols) < 6:
            raise UnparsableOutput(f"df {what} row {line[:80]!r} has fewer than 6 columns")
        rows.append(cols[:5] + [" ".join(cols[5:])])  # a mount point may hold spaces
    return rows


def _pct(value: str) -> float | None:
    return None if value == "-" else float(to_int(value.rstrip("%")) or 0)


def parse_disk(text: str) -> Disk:
    parts = subsections(text)
    paths = (kv_lines(parts.get("", "")).get("paths") or "").split()
    blocks, inodes = _rows(parts.get("blocks", ""), "-k"), _rows(parts.get("inodes", ""), "-i")
    if len(blocks) != len(paths) or len(inodes) != len(paths):
        raise UnparsableOutput(f"df printed {len(blocks)}/{len(inodes)} rows for {len(paths)} paths")
    mounts: list[DiskMountsRow] = []
    for path, b, i in zip(paths, blocks, inodes, strict=True):
        if not b[4].endswith("%") or to_int(b[3]) is None:
            raise UnparsableOutput(f"df -k row {' '.join(b)[:80]!r} is not a df row")
        mounts.append({"path": path, "mount": b[5], "used_pct": _pct(b[4]), "avail_kb": to_int(b[3]),
                       "inodes_used_pct": _pct(i[4]) if to_int(i[1]) else None})
    return {"mounts": mounts}
