"""What was last sent to each AWS target, beside the history store (`STORE.aws-sync.json`).

So a finding unchanged since it was last accepted is not sent again, a finding gone from its host is
archived once, and one whose send failed is retried by the next scan (the store alone says only what
changed between scans, not what reached AWS). Our own file, still read as untrusted: a damaged one is
started afresh (everything is re-sent, which Security Hub and SSM take as updates).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..atomicio import write_text_atomic
from ..errors import InputError
from ..jsonload import load_json_file

LIMIT = 256 * 1024 * 1024


def path_for(store: str) -> Path:
    return Path(f"{store}.aws-sync.json")


def load(path: Path) -> tuple[dict[str, dict[str, Any]], str | None]:
    """(target key → its entries, a note when the file was damaged and ignored)."""
    if not path.exists():
        return {}, None
    try:
        data = load_json_file(path, limit=LIMIT)
    except (InputError, OSError) as exc:
        return {}, f"{path}: unreadable ({exc}); everything is sent again"
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        return {}, f"{path}: not a ledger; everything is sent again"
    return data, None


def save(path: Path, data: dict[str, dict[str, Any]]) -> None:
    import json

    write_text_atomic(path, json.dumps(data, sort_keys=True, ensure_ascii=False), mode=0o600)
