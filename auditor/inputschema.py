"""Check a parsed YAML input file (rule pack, waivers, inventory, baseline) against its JSON Schema.

The schemas in auditor/schemas/ are the declared formats: editors validate with them (yaml-language-server)
and the loaders call `check` first, so both say the same. A schema error becomes an InputError at the
file:line:column of the node it is about (from yamlload's marks), in words: "rule 'ecs.crash': severity 'hgh'
is not one of critical, high, medium, low, info". A schema may give a keyword group its words with
`errorMessage` (the key yaml-language-server shows too). A YAML date is refused where the schema wants text
and declares no date `format` (editors read it as text; the loaders would get a datetime.date). When several
errors exist, the one a reader meets first is reported (top to bottom; an unknown key before the missing one
a typo also makes).

jsonschema-rs answers "valid" first (schemacheck.FastCheck); only an invalid file imports and runs jsonschema
for its errors (which has the last word), so loading valid packs never pays for importing it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from itertools import islice
from typing import TYPE_CHECKING, Any

from .errors import InputError
from .schemacheck import FastCheck
from .textsafe import clip
from .yamlload import LineDict, LineList

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

MAX_ERRORS = 200  # errors weighed for "first in the file": jsonschema yields a list's items in order, so a file
# wrong on every line is answered without weighing every error
_MISSING = {"required", "anyOf", "oneOf"}  # about what a mapping lacks
_SHOWS_VALUE = {"type", "pattern", "minLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                "const", "format"}
_OWN_WORDS = {"additionalProperties", "required", "uniqueItems", "enum", "date",  # exact: never errorMessage
              "maxLength", "maxProperties", "maxItems"}  # a bound says its own size
_TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}


@dataclass(frozen=True)
class Form:
    """How a file's nodes are named in messages: `noun` for the whole file; `items` maps a top-level key to
    (noun, key): its entry is "noun 'value of key'" when it has that key, else `key[index]`; key None names a
    mapping's entry by its own key (a baseline's fact path). `list_name` prefixes paths of a bare top-level list."""

    schema: str
    noun: str
    items: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    list_name: str = ""
    show_strings: bool = True  # False: never echo a string value (inventories may hold credentials)


@cache
def load_schema(name: str) -> dict[str, Any]:
    """auditor/schemas/NAME.schema.json, parsed."""
    text = resources.files("auditor.schemas").joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _fast(name: str) -> FastCheck:
    return FastCheck(load_schema(name))


@cache
def _full(name: str) -> Any:
    """jsonschema's validator, imported only when a file is invalid or holds a YAML date (a valid pack loads
    without it). Its `type` keyword refuses a YAML date where text is wanted and the schema declares no date
    `format`: YAML read `2026-01-01` as a date, and the loaders would get a date where they expect a str."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError

    plain_type = Draft202012Validator.VALIDATORS["type"]

    def typed(validator: Any, types: Any, instance: Any, schema: dict[str, Any]) -> Any:
        if isinstance(instance, _YamlDate) and "string" in _as_list(types) \
                and schema.get("format") not in ("date", "date-time"):
            yield ValidationError("is a date; quote it to use it as text", validator="date")
            return
        yield from plain_type(validator, types, instance, schema)

    return validators.extend(Draft202012Validator, {"type": typed})(load_schema(name))


class _YamlDate(str):
    """A YAML date or timestamp in the checked view: ISO text that remembers it was not written as text."""


def _dated_view(value: Any) -> tuple[Any, bool]:
    """json_view with dates as _YamlDate, and whether any date was seen."""
    seen = False

    def view(node: Any) -> Any:
        nonlocal seen
        if isinstance(node, dict):
            return {str(k): view(v) for k, v in node.items()}
        if isinstance(node, list):
            return [view(v) for v in node]
        if isinstance(node, (dt.date, dt.datetime)):
            seen = True
            return _YamlDate(node.isoformat())
        return node

    return view(value), seen


def json_view(value: Any) -> Any:
    """The document as JSON sees it, as editors do: keys as strings, YAML dates as ISO text."""
    if isinstance(value, dict):
        return {str(k): json_view(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_view(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def check(doc: Any, form: Form, file: str) -> None:
    """InputError at the first schema error of `doc` (parsed by yamlload), or return if it is valid."""
    errors = _errors(doc, form)
    if errors:
        raise _input_error(doc, _leaf(min(errors, key=lambda e: _order(doc, e))), form, file)


def check_items(doc: Any, form: Form, file: str, key: str) -> dict[int, InputError]:
    """The first schema error inside each item of `doc[key]` (the rules of a pack), so a file with several broken
    items names them all at once; an error outside those items raises, as check() does."""
    errors = sorted(_errors(doc, form), key=lambda e: _order(doc, e))
    outside = [e for e in errors if len(e.absolute_path) < 2 or e.absolute_path[0] != key
               or not isinstance(e.absolute_path[1], int)]
    if outside:
        raise _input_error(doc, _leaf(outside[0]), form, file)
    first: dict[int, ValidationError] = {}
    for error in errors:
        item = error.absolute_path[1]
        assert isinstance(item, int)  # `outside` took every other path
        first.setdefault(item, error)
    return {i: _input_error(doc, _leaf(e), form, file) for i, e in first.items()}


def _errors(doc: Any, form: Form) -> list[ValidationError]:
    fast = _fast(form.schema)
    if fast.valid(doc, from_json=True):  # LineDict/LineList are dicts/lists; a date or a number key says no
        return []
    view, dated = _dated_view(doc)
    if not dated and fast.valid(view, from_json=True):
        return []
    return list(islice(_full(form.schema).iter_errors(view), MAX_ERRORS))


def _order(doc: Any, error: ValidationError) -> tuple[int, int, int]:
    """Where a reader meets an error, top to bottom. Something missing from a mapping counts as met at its last
    key, after what is wrong inside it (a typo in a key makes both an unknown and a missing key); on one line an
    unknown key comes first."""
    rank = 0 if error.validator == "additionalProperties" else 2 if error.validator in _MISSING else 1
    node, _ = _walk(doc, list(error.absolute_path))
    if error.validator in _MISSING and isinstance(node, LineDict) and node.key_lines:
        return max(node.key_lines.values()), rank, 0
    line, col = _mark(doc, error)
    return line, rank, col


def _leaf(error: ValidationError) -> ValidationError:
    """An anyOf/oneOf without words of its own is described by its best-matching branch error."""
    from jsonschema.exceptions import best_match

    while error.validator in ("anyOf", "oneOf") and not _words(error) and error.context:
        error = best_match(error.context)
    return error


def _words(error: ValidationError) -> str:
    if error.validator in _OWN_WORDS:
        return ""
    schema = error.schema if isinstance(error.schema, dict) else {}
    message = schema.get("errorMessage")
    return message if isinstance(message, str) else ""


def _walk(doc: Any, path: Sequence[Any]) -> tuple[Any, tuple[int, int]]:
    """The original node at a JSON path, and the (line, column) of its key or list item."""
    node, mark = doc, (getattr(doc, "line", 1) or 1, getattr(doc, "col", 1) or 1)
    for step in path:
        if isinstance(node, LineDict):
            key = step if step in node else next((k for k in node if str(k) == step), step)  # `1:` is "1"
            mark, node = node.mark_of(key), node.get(key)
        elif isinstance(node, LineList) and isinstance(step, int) and step < len(node):
            mark, node = node.mark_of(step), node[step]
        else:
            break
    return node, mark


def _mark(doc: Any, error: ValidationError) -> tuple[int, int]:
    """Where the error points: the unknown key, the key that needs another, the repeated item, else the node."""
    path = list(error.absolute_path)
    node, _ = _walk(doc, path)
    culprit = _culprit(error, node)
    if culprit is not None:
        return _walk(doc, [*path, culprit])[1]
    if error.validator in _MISSING and isinstance(node, (LineDict, LineList)):
        return node.line, node.col
    return _walk(doc, path)[1]


def _culprit(error: ValidationError, node: Any) -> Any:
    """The key or index inside `node` an object- or list-level error is about (None: the node itself)."""
    if error.validator == "additionalProperties" and isinstance(node, LineDict):
        return next(iter(_unknown(error, node)), None)
    if error.validator == "dependentRequired" and isinstance(node, LineDict):
        return next((k for k, _ in _needs(error, node)), None)
    if error.validator == "uniqueItems" and isinstance(node, LineList):
        return _repeat(node)
    return None


def _unknown(error: ValidationError, node: LineDict) -> list[Any]:
    allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
    return [k for k in node if str(k) not in allowed]


def _needs(error: ValidationError, node: LineDict) -> list[tuple[Any, str]]:
    deps = error.validator_value if isinstance(error.validator_value, dict) else {}
    return [(k, d) for k in node if str(k) in deps for d in deps[str(k)] if d not in node]


def _repeat(node: LineList) -> int | None:
    seen: list[Any] = []
    for i, item in enumerate(json_view(node)):
        if item in seen:
            return i
        seen.append(item)
    return None


def _input_error(doc: Any, error: ValidationError, form: Form, file: str) -> InputError:
    path = list(error.absolute_path)
    node, _ = _walk(doc, path)
    line, col = _mark(doc, error)
    return InputError(_describe(error, node, _subject(doc, path, form), form), file, line, col)


def _subject(doc: Any, path: Sequence[Any], form: Form) -> str:
    """The node's name in a message: "rule 'x': severity", "hosts[1].ssh.port", "facts.os.id"."""
    if not path:
        return form.noun
    head, rest, named = path[0], list(path), ""
    if isinstance(head, str) and head in form.items and len(path) > 1:
        named, rest = _item_name(_walk(doc, [head])[0], path[1], form.items[head]), rest[2:]
    if not named:
        rest = list(path)
    dotted = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest).lstrip(".")
    if isinstance(head, int):
        dotted = form.list_name + dotted  # a file that is a bare list: waivers[0].reason
    if named and dotted:
        return f"{named}{dotted}" if dotted[0] == "[" else f"{named}: {dotted}"
    return named or dotted


def _item_name(parent: Any, step: Any, how: tuple[str, str | None]) -> str:
    """"rule 'x'" for an entry labelled by its key, the fact path for a mapping entry, "" when unnamed."""
    noun, label = how
    if label is None:
        return str(step)
    item = _walk(parent, [step])[0]
    value = item.get(label) if isinstance(item, dict) else None
    return f"{noun} {_clipped(value)!r}" if isinstance(value, str) and value else ""


def _clipped(text: str, limit: int = 60) -> str:
    return clip(text, limit)


def _describe(error: ValidationError, node: Any, subject: str, form: Form) -> str:
    """The error in words, starting with its subject."""
    words, kind = _words(error), error.validator
    shown = _shown(node, form)
    tail = f", not {shown}" if kind in _SHOWS_VALUE and shown else ""
    if kind == "date":  # the value only where strings may be shown (a date could be someone's secret)
        value = f" {json_view(node)!r}" if form.show_strings else ""
        return f"{subject}{value} is a date; quote it to use it as text"
    if kind == "type":
        expected = words or "must be " + " or ".join(_TYPE_WORDS.get(t, t) for t in _as_list(error.validator_value))
        return f"{subject} {expected}, not {kind_of(node)}{' ' + shown if shown and node is not None else ''}"
    if words:
        return f"{subject} {words}{tail}"
    return _default_words(error, node, subject, tail)


def _default_words(error: ValidationError, node: Any, subject: str, tail: str) -> str:
    kind, value = error.validator, error.validator_value
    listed: list[Any] = value if isinstance(value, list) else []
    simple: dict[str, Callable[[], str]] = {
        "enum": lambda: f"{subject} {node!r} is not one of {', '.join(str(v) for v in listed)}",
        "const": lambda: f"{subject} must be {value!r}{tail}",
        "required": lambda: f"{subject} is missing " + ", ".join(repr(p) for p in listed if p not in node),
        "additionalProperties": lambda: _unknown_words(error, node, subject),
        "dependentRequired": lambda: "; ".join(f"{subject}: {k!r} needs {d!r}" for k, d in _needs(error, node)),
        "uniqueItems": lambda: f"{subject}: {json_view(node)[_repeat(node) or 0]!r} is listed twice",
        "minItems": lambda: f"{subject} is empty" if value == 1 else f"{subject} needs at least {value} items",
        "minProperties": lambda: f"{subject} is empty",
        "minLength": lambda: f"{subject} must not be empty",
        "pattern": lambda: f"{subject} must match {value}{tail}",
        "minimum": lambda: f"{subject} must be at least {value}{tail}",
        "maximum": lambda: f"{subject} must be at most {value}{tail}",
        "exclusiveMinimum": lambda: f"{subject} must be more than {value}{tail}",
        "maxLength": lambda: f"{subject}{' key' if isinstance(node, dict) else ''} is "  # propertyNames: a key
                             f"{len(str(error.instance)):,} characters long (at most {value:,})",
        "maxProperties": lambda: f"{subject} has {len(node):,} entries (at most {value:,})",
        "maxItems": lambda: f"{subject} has {len(node):,} items (at most {value:,})",
    }
    if kind in simple:
        return simple[kind]()
    return f"{subject}: {error.message}"


def _unknown_words(error: ValidationError, node: LineDict, subject: str) -> str:
    allowed = sorted(error.schema.get("properties", {})) if isinstance(error.schema, dict) else []
    unknown = _unknown(error, node)
    where = f" in {subject}" if subject else ""
    return f"unknown key {unknown[0]!r}{where} (allowed: {', '.join(allowed)})"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _shown(value: Any, form: Form, limit: int = 60) -> str:
    """A short repr of a scalar for a message; strings only when the form allows them."""
    if isinstance(value, (dict, list)) or (isinstance(value, str) and not form.show_strings):
        return ""
    text = repr(json_view(value)) if value is not None else "null"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def kind_of(value: Any) -> str:
    """A value's YAML kind in words: null, a boolean, an integer, a string, a list, a mapping."""
    if value is None:
        return "null"
    for typ, word in ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
                      (list, "a list"), (dict, "a mapping")):
        if isinstance(value, typ):
            return word
    return type(value).__name__
