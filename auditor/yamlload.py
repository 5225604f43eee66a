"""Load YAML keeping line numbers, so every bad-input error can name the file and line.

Hostile input is bounded: files over 8 MiB are refused unread (inputfile.read_bounded); nesting deeper than
MAX_DEPTH (also through aliases), aliases that would expand to more than MAX_ALIAS_NODES nodes (a "billion
laughs") and documents of more than MAX_NODES values are refused while composing, before anything is built;
invalid dates, integers too long to convert, NaN and infinities, lone surrogates and control characters are
InputError at their line, never a traceback. libyaml scans and parses (C); PyYAML composes and constructs.
"""

from __future__ import annotations

import contextlib
import gc
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.resolver import Resolver

from .errors import InputError
from .inputfile import MAX_DEPTH, MAX_INT_DIGITS, MAX_YAML_BYTES, line_at, read_text

MAX_ALIAS_NODES = 100_000  # nodes that all aliases of a document may add when expanded
MAX_NODES = 1_000_000  # values (scalars, mappings, lists) in a document: a 100,000-host inventory holds ~900,000
_TYPED_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp")
_SURROGATE = re.compile("[\\ud800-\\udfff]")


class _PyParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """PyYAML's own scanner and parser, for a PyYAML built without libyaml."""

    def __init__(self, stream: str):
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)


try:  # libyaml's scanner and parser (C), when PyYAML was built with it
    from yaml._yaml import CParser as _Parser
except ImportError:  # pragma: no cover - every wheel of PyYAML 6 has libyaml
    _Parser = _PyParser  # type: ignore[misc,assignment]


class LineDict(dict):
    """A dict that remembers the 1-based line and column of itself (`line`, `col`) and of each key
    (`key_lines`, `key_cols`), so a schema error can point at the key it is about."""

    line: int = 0
    col: int = 0
    key_lines: dict[Any, int]
    key_cols: dict[Any, int]
    key_texts: dict[Any, str]  # the source text of each value YAML read as a number or a date
    # (first line, last line, style) of each scalar value that is not plain text on its key's line alone:
    # a block (`|`, `>`), or one that starts on a later line or spans lines (few: kept only for them)
    value_spans: dict[Any, tuple[int, int, str | None]]

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)

    def mark_of(self, key: Any) -> tuple[int, int]:
        """(line, column) of `key`, or of the mapping itself when it has no such key."""
        if key in self.key_lines:
            return self.key_lines[key], self.key_cols.get(key, 0)
        return self.line, self.col


class LineList(list):
    """A list that remembers its own line and column and those of each item (`item_lines`, `item_cols`)."""

    line: int = 0
    col: int = 0
    item_lines: list[int]
    item_cols: list[int]
    item_texts: dict[int, str]  # the source text of each item YAML read as a number or a date

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if index < len(self.item_lines) else self.line

    def mark_of(self, index: int) -> tuple[int, int]:
        """(line, column) of item `index`, or of the list itself."""
        if 0 <= index < len(self.item_lines):
            return self.item_lines[index], self.item_cols[index]
        return self.line, self.col


class _LineLoading(Composer, SafeConstructor, Resolver):
    """SafeLoader's composer, constructor and resolver, its mappings and sequences carrying line numbers, with
    bounded depth and alias expansion; a parser class completes it (_LineLoader)."""

    def __init__(self) -> None:
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0
        self._open_anchors: set[str] = set()
        self._alias_nodes = 0
        self._nodes = 0
        self._measured: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, depth)

    if TYPE_CHECKING:  # the parser class's, which completes this one
        def peek_event(self) -> Any: ...

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, AliasEvent):
            if event.anchor in self._open_anchors:
                raise InputError(f"alias *{event.anchor} refers to its own anchor (recursive)", None, line)
            target = self.anchors.get(event.anchor)
            if target is not None:
                size, depth = self._measure(target)
                self._alias_nodes += size
                if self._alias_nodes > MAX_ALIAS_NODES:
                    raise InputError(f"alias *{event.anchor} expands the document past {MAX_ALIAS_NODES} nodes "
                                     "(aliases must not multiply content)", None, line)
                if self._depth + depth > MAX_DEPTH:
                    raise InputError(f"alias *{event.anchor} nests deeper than {MAX_DEPTH} levels", None, line)
            return super().compose_node(parent, index)
        if self._depth >= MAX_DEPTH:
            raise InputError(f"nested deeper than {MAX_DEPTH} levels", None, line)
        self._nodes += 1
        if self._nodes > MAX_NODES:  # each costs memory and time: 8 MiB of `[1,1,…` is 4,000,000
            raise InputError(f"more than {MAX_NODES:,} values in one document (split the file)", None, line)
        anchor = event.anchor
        self._depth += 1
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open_anchors.discard(anchor)

    def _measure(self, root: yaml.Node) -> tuple[int, int]:
        """(nodes when fully expanded, depth) of a complete node; memoised and iterative, linear overall."""
        memo = self._measured
        stack: list[tuple[yaml.Node, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            if id(node) in memo:
                continue
            kids = _children(node)
            if not done:
                stack.append((node, True))
                stack.extend((k, False) for k in kids if id(k) not in memo)
                continue
            measured = [memo[id(k)] for k in kids]
            memo[id(node)] = (1 + sum(m[0] for m in measured), 1 + max((m[1] for m in measured), default=0))
        return memo[id(root)]

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        try:
            return super().construct_yaml_timestamp(node)
        except (ValueError, OverflowError) as exc:
            raise InputError(f"invalid date/time {node.value!r}: {exc} (quote it if it is meant as text)", None,
                             node.start_mark.line + 1) from None
        except AttributeError:  # an explicit `!!timestamp x`: PyYAML's regexp does not match
            raise InputError(f"invalid date/time {node.value!r} (quote it if it is meant as text)", None,
                             node.start_mark.line + 1) from None

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """An explicit tag on a value it does not fit (`!!int x`, `!!float x`, `!!bool x`) is bad input."""
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, KeyError, TypeError, OverflowError) as exc:
            value = node.value if isinstance(node, yaml.ScalarNode) else getattr(node, "id", "node")
            raise InputError(f"{node.tag.rsplit(':', 1)[-1]} {value!r} is not valid ({type(exc).__name__}: {exc})",
                             None, node.start_mark.line + 1) from None

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        digits = len(node.value)
        if digits > MAX_INT_DIGITS:
            raise InputError(f"integer with {digits} digits is too long (limit {MAX_INT_DIGITS} digits)", None,
                             node.start_mark.line + 1)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> Any:
        """NaN and infinities (`.nan`, `.inf`, `1.0e+999`) are refused, as the JSON loader does: NaN equals
        nothing (a baseline would always drift, a threshold never fire) and JSON output cannot hold it."""
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise InputError(f"{node.value!r} is not a finite number (NaN and infinities are not accepted)", None,
                             node.start_mark.line + 1)
        return value

    def construct_yaml_str(self, node: yaml.ScalarNode) -> Any:
        value = super().construct_yaml_str(node)
        if _SURROGATE.search(value):
            raise InputError("string contains a lone surrogate (U+D800..U+DFFF), which is not valid Unicode text",
                             None, node.start_mark.line + 1)
        return value


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _construct_mapping(loader: _LineLoading, node: yaml.MappingNode) -> LineDict:
    """A LineDict; a key written twice in the mapping itself is an error, while its own keys override keys
    merged in with `<<` (YAML merge semantics: flatten_mapping puts merged pairs first, own pairs last)."""
    own = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)
    merged = len(node.value) - own
    out = LineDict()
    out.line, out.col = node.start_mark.line + 1, node.start_mark.column + 1
    out.key_lines, out.key_cols, out.key_texts, out.value_spans = {}, {}, {}, {}
    seen: set[Any] = set()
    for index, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError as exc:
            raise InputError("mapping key is not a scalar", None, key_node.start_mark.line + 1) from exc
        if index >= merged:
            if key in seen:
                raise _DuplicateKey(key, key_node.start_mark.line + 1)
            seen.add(key)
        out[key] = loader.construct_object(value_node, deep=True)
        if value_node.tag in _TYPED_TAGS:
            out.key_texts[key] = value_node.value
        out.key_lines[key] = key_node.start_mark.line + 1
        if isinstance(value_node, yaml.ScalarNode):
            _note_span(out, key, key_node, value_node)
        out.key_cols[key] = key_node.start_mark.column + 1
    return out


def _note_span(out: LineDict, key: Any, key_node: yaml.Node, value_node: yaml.ScalarNode) -> None:
    start, end = value_node.start_mark, value_node.end_mark
    last = end.line + 1 if end.column else end.line  # a block ends at the start of the line after it
    if value_node.style in ("|", ">") or start.line != key_node.start_mark.line or last > start.line + 1:
        style = value_node.style or None  # plain: None (libyaml says "")
        out.value_spans[key] = (start.line + 1, max(last, start.line + 1), style)


def _construct_sequence(loader: _LineLoading, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line, out.col = node.start_mark.line + 1, node.start_mark.column + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    out.item_cols = [child.start_mark.column + 1 for child in node.value]
    out.item_texts = {i: child.value for i, child in enumerate(node.value) if child.tag in _TYPED_TAGS}
    return out


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int):
        self.key = key
        self.line = line


_LineLoading.yaml_constructors = {
    **SafeConstructor.yaml_constructors,
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG: _construct_mapping,
    yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG: _construct_sequence,
    "tag:yaml.org,2002:timestamp": _LineLoading.construct_yaml_timestamp,
    "tag:yaml.org,2002:int": _LineLoading.construct_yaml_int,
    "tag:yaml.org,2002:str": _LineLoading.construct_yaml_str,
    "tag:yaml.org,2002:float": _LineLoading.construct_yaml_float,
}


class _LineLoader(_LineLoading, _Parser):  # type: ignore[misc,valid-type]  # _Parser: either parser class
    """_LineLoading over libyaml's scanner and parser (C) when PyYAML has it: PyYAML's own takes minutes
    and gigabytes on a file at the size cap (docs/performance.md)."""

    def __init__(self, stream: str):
        _Parser.__init__(self, stream)
        _LineLoading.__init__(self)


def load_yaml_text(text: str, path: str = "<string>") -> Any:
    """Parse YAML text; syntax errors, duplicate keys and hostile structure become InputError(path, line)."""
    surrogate = _SURROGATE.search(text)  # text that was not UTF-8 (an argument's bytes): libyaml takes none
    if surrogate is not None:
        raise InputError(f"invalid YAML: character U+{ord(surrogate.group()):04X} is not allowed (the text is not "
                         "valid UTF-8)", path, line_at(text, surrogate.start()))
    try:
        with _collection_paused():
            loader = _LineLoader(text)  # SafeConstructor's: plain data only
            try:
                return loader.get_single_data()
            finally:
                loader.dispose()
    except _DuplicateKey as exc:
        raise InputError(f"duplicate key {exc.key!r}", path, exc.line) from None
    except InputError as exc:
        raise InputError(exc.message, path, exc.line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or str(exc)
        if problem == "found invalid Unicode character escape code":  # libyaml's words for "\ud800"
            problem += " (a surrogate \\uD800-\\uDFFF, or past \\U0010FFFF)"
        raise InputError(f"invalid YAML: {problem}", path, line) from None
    except yaml.reader.ReaderError as exc:
        char = exc.character
        what = f"character U+{char if isinstance(char, int) else ord(char):04X}" if char not in (None, "") \
            else "a character"
        raise InputError(f"invalid YAML: {what} is not allowed ({exc.reason})", path,
                         line_at(text, _char_offset(text, exc.position))) from None
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", path) from None
    except RecursionError:
        raise InputError("invalid YAML: nested too deeply", path) from None


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """No garbage collection while a document is built: its nodes and values make no cycles to collect (an
    alias is a shared reference, not a loop), yet each full collection would walk all built so far: a
    large inventory loads in about half the time without them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _char_offset(text: str, position: int) -> int:
    """A reader error's position as an index into `text`: libyaml counts the bytes of its UTF-8."""
    if _Parser is _PyParser:
        return position
    return len(text.encode("utf-8")[:position].decode("utf-8", "ignore"))


def load_yaml_file(path: str | Path, limit: int = MAX_YAML_BYTES) -> Any:
    """Read (at most `limit` bytes, regular files only) and parse a YAML file; every problem is InputError."""
    return load_yaml_text(read_text(path, limit), str(path))


def line_of(node: Any, key: Any = None) -> int | None:
    """Best-effort line of `node` (or of `node[key]`) when it came from load_yaml_*."""
    if key is not None and isinstance(node, (LineDict, LineList)):
        return node.line_of(key)
    return getattr(node, "line", None)


def as_text(node: Any, key: Any, file: str, what: str) -> str:
    """node[key] where text is wanted. A number becomes its str() only when that is what was written: YAML 1.1
    reads `010` as 8, `1.10` as 1.1, `10:30` as 630 and `0x1F` as 31, and editors (YAML 1.2) read some of them
    otherwise, so such a number is InputError at its line ("quote it") rather than silently other text."""
    value = node[key]
    if isinstance(value, str):
        return value
    texts = getattr(node, "key_texts" if isinstance(node, LineDict) else "item_texts", {})
    written = texts.get(key)
    if written is not None and written != str(value):
        raise InputError(f"{what}: {written} is read by YAML as the number {value!r}; quote it ({written!r}) to "
                         "keep it as text", file, line_of(node, key))
    return str(value)
