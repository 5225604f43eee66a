"""JSON: the report document itself (schema ami-auditor/report/1)."""

from __future__ import annotations

import json
from typing import Any


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"
