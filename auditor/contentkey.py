"""Content digests of parsed JSON values (equal digests mean equal values, types and key order included),
and a table that holds equal values once."""

from __future__ import annotations

import hashlib
import marshal
from typing import Any, TypeVar

T = TypeVar("T")


def content_digest(value: Any) -> bytes | None:
    """A 16-byte digest of `value` (dicts, lists, strings, numbers, booleans, None), or None for what
    marshal cannot write. marshal (C, much faster than sorted JSON) tells `true` from `1` from `1.0` and a
    list from a tuple; equal content in another key order digests differently (a miss, never a wrong hit)."""
    try:
        data = marshal.dumps(value, 2)
    except ValueError:  # a type marshal does not know, or nesting past its limit
        return None
    return hashlib.blake2b(data, digest_size=16).digest()


class Shared:
    """A bounded table of values by content: `one` returns an equal value held before, if any, so what
    many hosts have in common is held once. Only for values that are read, never changed (report
    documents and what the evaluation core keeps). After `limit` distinct values it starts over (what is
    already shared stays shared), so all-different values cost a digest each and no more memory."""

    def __init__(self, limit: int = 1 << 16):
        self._limit = limit
        self._held: dict[bytes, Any] = {}
        self._strings: dict[str, str] = {}  # a string is its own key: no digest needed to tell it apart

    def one(self, value: T) -> T:
        """`value`, or the equal value held for it (dicts, lists and strings; anything else as it is)."""
        got: Any = value
        kind = type(got)
        if kind is str:
            return self._string(got)  # type: ignore[return-value]  # T is str here
        if kind is not dict and kind is not list:
            return value
        key = content_digest(got)
        if key is None:
            return value
        held = self._held.get(key)
        if held is not None:
            return held  # type: ignore[no-any-return]  # equal content: the same type
        if len(self._held) >= self._limit:
            self._held.clear()
        self._held[key] = got
        return value

    def _string(self, value: str) -> str:
        held = self._strings.get(value)
        if held is not None:
            return held
        if len(self._strings) >= self._limit:
            self._strings.clear()
        self._strings[value] = value
        return value

    def keys(self, record: Any) -> Any:
        """A dict whose keys are held once (a table of unit names with per-host counts), or `record`."""
        if type(record) is not dict:
            return record
        held = self.one(record)
        if held is not record:
            return held
        return {self._string(k) if type(k) is str else k: v for k, v in record.items()}

    def fields(self, record: dict[str, Any] | None, names: tuple[str, ...]) -> None:
        """`record`'s values under `names` replaced, in place, by the equal values held."""
        if record is not None:
            for name in names:
                if name in record:
                    record[name] = self.one(record[name])
