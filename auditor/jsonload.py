"""Read a JSON document from disk; unreadable files and syntax errors name the file (and line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import InputError


def load_json_file(path: str | Path) -> Any:
    p = str(path)
    try:
        text = Path(p).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", p) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", p, exc.lineno) from None
