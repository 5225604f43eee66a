"""JSON: the report document itself (schema ami-auditor/report/1)."""

from __future__ import annotations

import json
import math
from typing import Any

from ..textsafe import json_text


def _finite(value: Any) -> Any:
    """NaN and ±Infinity become null: they are not JSON, and many readers reject the whole document."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def render(doc: dict[str, Any]) -> str:
    """The document, with control and bidi characters as \\u escapes (same data, inert on a terminal)."""
    return json_text(json.dumps(_finite(doc), indent=2, ensure_ascii=False, default=str, allow_nan=False)) + "\n"
