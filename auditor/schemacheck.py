"""A fast first check of a document against one of our JSON Schemas (draft 2020-12).

jsonschema-rs (Rust) answers valid or not far faster than the pure-Python jsonschema; only when it does
not say valid does the caller run jsonschema, which names the error (and has the last word: what it
accepts is accepted). Both treat `format` as an annotation, not an assertion.

The one way jsonschema-rs is more lenient, found by tests/unit/test_schemacheck.py: it reads a Python tuple as
an array, where jsonschema wants a list. A document built in Python (not parsed from JSON) is therefore
walked for tuples before a valid verdict is trusted. NaN/Infinity, non-string keys and types it does not
know make jsonschema-rs say invalid or raise: those documents simply take the pure-Python way.
"""

from __future__ import annotations

from typing import Any


def _has_tuple(doc: Any) -> bool:
    stack = [doc]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is dict:
            stack.extend(value.values())
        elif kind is list:
            stack.extend(value)
        elif kind is tuple:
            return True
    return False


class FastCheck:
    """jsonschema-rs compiled once for `schema`."""

    def __init__(self, schema: dict[str, Any]):
        import jsonschema_rs  # when a document is validated, not at start-up

        self._validator = jsonschema_rs.Draft202012Validator(schema)

    def valid(self, doc: Any, from_json: bool = False) -> bool:
        """True only if `doc` is surely valid; False means "ask jsonschema" (it may still be valid).
        `from_json`: the document was parsed from JSON text, so it holds no tuples."""
        try:
            ok = bool(self._validator.is_valid(doc))
        except (ValueError, TypeError, OverflowError):  # a type it cannot read
            return False
        return ok and (from_json or not _has_tuple(doc))
