"""Content digests of parsed JSON values: equal digests mean equal values, types and key order included."""

from __future__ import annotations

import hashlib
import marshal
from typing import Any


def content_digest(value: Any) -> bytes | None:
    """A 16-byte digest of `value` (dicts, lists, strings, numbers, booleans, None), or None for what
    marshal cannot write. marshal (C, ~10x faster than sorted JSON) tells `true` from `1` from `1.0` and a
    list from a tuple; equal content in another key order digests differently (a miss, never a wrong hit)."""
    try:
        data = marshal.dumps(value, 2)
    except ValueError:  # a type marshal does not know, or nesting past its limit
        return None
    return hashlib.blake2b(data, digest_size=16).digest()
