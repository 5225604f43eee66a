"""Yesterday's history folders (`scan --history DIR`, one report JSON per scan), read for `history import`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

from ..atomicio import write_text_atomic
from ..errors import InputError
from ..reportdoc import load_report

PREFIX = "scan-"
_SEQ = re.compile(r"^(?P<stamp>.*?)(?:-(?P<n>\d+))?$")


def _order(path: Path) -> tuple[str, int]:
    """Time stamp, then the -N a second save within the same second got (`-2` sorts after no suffix)."""
    m = _SEQ.match(path.stem)
    assert m is not None  # the pattern matches every string
    return m["stamp"], int(m["n"] or 1)


def scan_files(directory: Path) -> list[Path]:
    """Saved scans, oldest first (names sort by time)."""
    if not directory.exists():
        return []
    if not directory.is_dir():
        raise InputError("history path is not a directory", str(directory))
    return sorted(directory.glob(f"{PREFIX}*.json"), key=_order)


def load_scan(path: Path) -> dict[str, Any]:
    """One saved report, validated; a corrupt file names itself."""
    return cast(dict[str, Any], load_report(str(path)))


def latest_scan(directory: Path) -> dict[str, Any] | None:
    files = scan_files(directory)
    return load_scan(files[-1]) if files else None


def save_scan(directory: Path, doc: dict[str, Any]) -> Path:
    """Write the report under a name made from its generation time (atomic; never overwrites)."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = doc["generated_at"].replace(":", "").replace("-", "")
    path = directory / f"{PREFIX}{stamp}.json"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{PREFIX}{stamp}-{n}.json"
    write_text_atomic(path, json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
    return path
