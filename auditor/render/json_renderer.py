"""JSON: the report document itself (schema ami-auditor/report/1).

orjson writes it (~20x faster than json.dumps and the walk below), with the same meaning: NaN and ±Infinity as null,
non-ASCII kept as UTF-8, C0 controls in strings escaped, tuples as arrays, unknown types (datetimes and
dataclasses included, as json.dumps saw them) as str(). Numbers may be spelled differently (1e16 for
1e+16), never valued differently. What orjson will not write (a non-string key, an integer past 64 bits,
a lone surrogate, a cycle, deep nesting) goes through json.dumps as before, errors included.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..reportdoc import Rows
from ..reporttypes import ReportDoc
from ..textsafe import json_bytes, json_text


def _finite(value: Any) -> Any:
    """NaN and ±Infinity become null: they are not JSON, and many readers reject the whole document."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, Rows)):
        return [_finite(v) for v in value]
    return value


def render_stdlib(doc: Any) -> str:
    """The document through json.dumps (the reference, and the way for what orjson refuses)."""
    return json_text(json.dumps(_finite(doc), indent=2, ensure_ascii=False, default=str, allow_nan=False)) + "\n"


def render_bytes(doc: Any) -> bytes:
    """`render(doc)` as UTF-8 bytes, without a text copy when the output is plain ASCII (a 100,000-host
    report is ~0.5 GiB: written as orjson made it)."""
    import orjson  # when a report is written, not at start-up

    if isinstance(doc, Mapping) and any(isinstance(v, Rows) for v in doc.values()):  # rows made as read: sliced
        return b"".join(render_chunks(doc))

    try:
        data = orjson.dumps(doc, default=str, option=_options() | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return render_stdlib(doc).encode("utf-8")
    return _escaped(data)


def _options() -> int:
    """orjson's options for the report: indented, datetimes and dataclasses through `default` as str()."""
    import orjson

    return orjson.OPT_INDENT_2 | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


_STREAMED = ("hosts", "findings", "drift")  # the lists that grow with the fleet
_SLICE = 250  # items serialized at a time: a few copies of a slice's text are held while it is indented


def render_chunks(doc: Mapping[str, Any]) -> Iterator[bytes]:
    """`render_bytes(doc)` in pieces, never the whole text at once: the fleet-sized lists (hosts, findings,
    drift) are serialized `_SLICE` items at a time and indented into place, so a 100,000-host report
    (~0.7 GiB of JSON) is written without holding it. The same bytes, joined.

    The rest of the document is serialized with each such list replaced by a mark holding a random nonce
    (no host string can spell it), then cut at the marks."""
    import orjson

    options = _options()
    nonce = secrets.token_hex(16)
    marks = {key: f"streamed {key} {nonce}" for key in _STREAMED
             if isinstance(doc.get(key), (list, Rows)) and len(doc[key])}
    top = {k: marks.get(k) or (list(v) if isinstance(v, Rows) else v) for k, v in doc.items()}  # none left
    try:
        rest = _escaped(orjson.dumps(top, default=str, option=options))  # the text after the lists streamed
    except orjson.JSONEncodeError:
        yield render_stdlib(doc).encode("utf-8")
        return
    for key, mark in marks.items():  # in document order
        head, found, rest = rest.partition(orjson.dumps(mark))
        assert found, "a streamed list's mark is missing"
        yield head
        yield from _list_chunks(doc[key], options)
    yield rest + b"\n"


def _list_chunks(items: Sequence[Any], options: int) -> Iterator[bytes]:
    """A non-empty top-level list as orjson indents it under its key: `[`, items at depth 2, `  ]`."""
    import orjson

    yield b"["
    for start in range(0, len(items), _SLICE):
        part = list(items[start:start + _SLICE])
        try:
            text = orjson.dumps(part, default=str, option=options)  # "[\n  item,\n  item\n]"
        except orjson.JSONEncodeError:  # what orjson will not write: json.dumps, laid out the same
            text = json.dumps(_finite(part), indent=2, ensure_ascii=False, default=str, allow_nan=False).encode()
        body = text[1:-2].replace(b"\n", b"\n  ")  # one level deeper; JSON strings hold no raw newline
        yield _escaped((b"," if start else b"") + body)
    yield b"\n  ]"


def _escaped(data: bytes) -> bytes:
    """json_bytes, skipped when there is nothing to escape: orjson escapes C0 in strings, so plain ASCII
    without DEL holds no unsafe character (the indent's newlines are kept)."""
    return data if data.isascii() and b"\x7f" not in data else json_bytes(data)


def render(doc: ReportDoc) -> str:
    """The document, with control and bidi characters as \\u escapes (same data, inert on a terminal)."""
    return render_value(doc)


def render_value(value: object) -> str:
    """Any JSON-shaped value (ASFF's array of documents) written as the report is."""
    return render_bytes(value).decode("utf-8")
