"""Hypothesis strategies shared by the fuzz tests: text mutations of real files, structure mutations of
parsed documents, and hostile scalar values."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

# Numbers a host (or a hand-edited file) may print where a small integer is expected.
HOSTILE_NUMBERS = [
    "", " ", "-1", "-0", "0", "-9223372036854775809", "18446744073709551616", "9" * 40, "9" * 5000,
    "1e999", "-1e999", "nan", "NaN", "inf", "-inf", "0x1f", "1_000", "١٢٣", "²", "12abc", "+7", "3.5", "..", "1.2.3",
]
# Control characters, invalid UTF-8 (decoded with replacement, as transports do) and line breakers.
CONTROL_TEXT = [
    "\x00", "\x07", "\x1b[31m", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\ufeff", "\t",
    b"\xff\xfe\xc3(".decode("utf-8", "replace"), b"\xed\xa0\x80".decode("utf-8", "replace"), "\ufffd",
]
# Strings hostile to renderers and loaders.
HOSTILE_STRINGS = [
    "", " ", "\x00", "\x1b[2J", "</script><script>alert(1)</script>", "<script>x</script>", "]]>", "<![CDATA[x]]>",
    "&amp;&lt;", "\"'`", "${x}", "{{ x }}", "{% for %}", "\ud800", "\udfff", "\ufffe", "\u2028", "a" * 5000,
    "-->", "<!--", "|md|table|", "*_`#", "\\", "../../etc/passwd", "ü\u0301", "😀",
]
# Tokens hostile to YAML loaders (inserted as a scalar value or a whole line).
YAML_TOKENS = [
    "2026-02-30", "2026-13-45", "2026-01-01T25:00:00", "2026-02-30 10:00:00", ".nan", ".inf", "-.inf", "~", "null",
    "!!binary AAAA", "!!set {a: null}", "!!python/object:os.system x", "!!timestamp x", "!!int x", "&a x", "*a",
    "*undefined", "{1: a, zzz: b}", "{? [a]: b}", "[a, {b: [c]}]", "? complex", "<<: *a", "'unterminated",
    "\"\\ud800\"", "\"\\x00\"", "|", ">-", "%YAML 1.1", "---", "...", "@", "`", "9" * 5000, "-" + "9" * 5000,
    "0o777", "0b1012", "1_0", "yes", "off", "=", ": x",
]
JSON_TOKENS = [
    "NaN", "Infinity", "-Infinity", "\"\\ud800\"", "\"\\udc00x\"", "1e999", "9" * 5000, "-" + "9" * 5000, "null",
    "[]", "{}", "true", "\"\"", "{\"a\":", "]", "\"\\u0000\"", "1.0", "-0", "0.0000000001",
]


def deep(depth: int, kind: str) -> str:
    """Nesting `depth` deep (brackets for YAML flow and JSON, mappings when kind == 'yaml-block')."""
    if kind == "yaml-block":
        depth = min(depth, 300)  # indentation grows with depth: keep the text small
        return "".join(f"{' ' * i}k:\n" for i in range(depth)) + " " * depth + "v\n"
    return "[" * depth + "]" * depth


# ---- text mutations (each: (draw, text) -> text) -------------------------------------------------------

def _lines(text: str) -> list[str]:
    return text.split("\n")


def _pick(draw: Callable, n: int) -> int:
    return draw(st.integers(0, max(n - 1, 0)))


def delete_lines(draw: Callable, text: str) -> str:
    lines = _lines(text)
    i = _pick(draw, len(lines))
    k = draw(st.integers(1, 4))
    return "\n".join(lines[:i] + lines[i + k:])


def duplicate_line(draw: Callable, text: str) -> str:
    lines = _lines(text)
    i = _pick(draw, len(lines))
    times = draw(st.sampled_from([1, 2, 50]))
    return "\n".join(lines[:i] + [lines[i]] * (times + 1) + lines[i + 1:])


def swap_lines(draw: Callable, text: str) -> str:
    lines = _lines(text)
    i, j = _pick(draw, len(lines)), _pick(draw, len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def truncate(draw: Callable, text: str) -> str:
    return text[:_pick(draw, len(text) + 1)]


def flip_byte(draw: Callable, text: str) -> str:
    data = bytearray(text.encode("utf-8"))
    if not data:
        return text
    i = _pick(draw, len(data))
    data[i] ^= draw(st.sampled_from([0x01, 0x20, 0x40, 0x80, 0xFF]))
    return data.decode("utf-8", "replace")


def insert_control(draw: Callable, text: str) -> str:
    i = _pick(draw, len(text) + 1)
    return text[:i] + draw(st.sampled_from(CONTROL_TEXT)) + text[i:]


def hostile_number(draw: Callable, text: str) -> str:
    spots = list(re.finditer(r"-?\d+(?:\.\d+)?", text))
    if not spots:
        return text
    m = spots[_pick(draw, len(spots))]
    return text[:m.start()] + draw(st.sampled_from(HOSTILE_NUMBERS)) + text[m.end():]


def empty_value(draw: Callable, text: str) -> str:
    """Cut a `key=value`, `key: value` or `key value` line right after its key."""
    lines = _lines(text)
    if not lines:
        return text
    i = _pick(draw, len(lines))
    m = re.search(r"[=:\s]", lines[i])
    if m:
        lines[i] = lines[i][:m.end()]
    return "\n".join(lines)


def random_line(draw: Callable, text: str) -> str:
    lines = _lines(text)
    i = _pick(draw, len(lines) + 1)
    new = draw(st.text(max_size=60))
    return "\n".join(lines[:i] + [new] + lines[i:])


TEXT_MUTATIONS = [delete_lines, duplicate_line, swap_lines, truncate, flip_byte, insert_control, hostile_number,
                  empty_value, random_line]


def _token(tokens: list[str]) -> Callable[[Callable, str], str]:
    def insert_token(draw: Callable, text: str) -> str:
        token = draw(st.sampled_from(tokens + ["<deep>"]))
        if token == "<deep>":
            token = deep(draw(st.sampled_from([64, 1000, 100_000])), draw(st.sampled_from(["flow", "yaml-block"])))
        spots = list(re.finditer(r"(?<=: )[^\n#]+|(?<=- )[^\n#]+|(?<=: )\S+", text))
        if spots and draw(st.booleans()):
            m = spots[_pick(draw, len(spots))]
            return text[:m.start()] + token + text[m.end():]
        i = _pick(draw, len(text) + 1)
        return text[:i] + token + text[i:]

    return insert_token


@st.composite
def mutated_text(draw: Callable, text: str, tokens: list[str] | None = None, max_ops: int = 4) -> str:
    """`text` after 1..max_ops random mutations (plus format-specific token insertions when `tokens`)."""
    ops = TEXT_MUTATIONS + ([_token(tokens)] * 3 if tokens else [])
    for op in draw(st.lists(st.sampled_from(ops), min_size=1, max_size=max_ops)):
        text = op(draw, text)
    return text


# ---- structure mutations (parsed YAML/JSON documents) ---------------------------------------------------

HOSTILE_VALUES: list[Any] = [
    None, True, False, 0, -1, 2**64, 10**30, -(10**30), 1e308, float("nan"), float("inf"), -float("inf"), 0.5,
    "", " ", "\x00", "\ud800", "</script>", "]]>", "${x}", "{{ x }}", "{{ undefined_name.attr }}", "{% if %}",
    "2026-02-30", "a" * 3000, dt.date(2026, 2, 28), dt.datetime(2026, 1, 1, 0, 0), [], {}, [[[[]]]],
    {"a": {"b": None}}, [None], {"": ""}, {1: "a", "zzz": "b"}, list(range(50)),
]
HOSTILE_KEYS: list[Any] = ["", "zzz", 1, None, True, "\x00", "\ud800", "a" * 300, "rule", "id", "expect", "$ref"]


def _containers(node: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every dict/list in `node` (the root included)."""
    out = []
    if isinstance(node, (dict, list)):
        out.append(path)
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            out.extend(_containers(v, (*path, k)))
    return out


def _at(node: Any, path: tuple) -> Any:
    for k in path:
        node = node[k]
    return node


@st.composite
def mutated_doc(draw: Callable, doc: Any, max_ops: int = 3) -> Any:
    """A deep copy of `doc` with 1..max_ops structural edits: delete, replace with a hostile value, rename a
    key, duplicate a list item, wrap a node in a list, or turn a mapping into a list."""
    import copy

    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, max_ops))):
        paths = _containers(doc)
        if not paths:
            return copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES)))
        path = draw(st.sampled_from(paths))
        node = _at(doc, path)
        keys = list(node.keys()) if isinstance(node, dict) else list(range(len(node)))
        op = draw(st.sampled_from(["delete", "replace", "rename", "duplicate", "wrap", "listify", "add"]))
        if op == "add" or not keys:
            key = draw(st.sampled_from(HOSTILE_KEYS))
            value = copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES)))  # the pool must stay unchanged
            if isinstance(node, dict):
                node[key] = value
            else:
                node.append(value)
            continue
        key = draw(st.sampled_from(keys))
        if op == "delete":
            del node[key]
        elif op == "replace":
            node[key] = copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES)))
        elif op == "rename" and isinstance(node, dict):
            node[draw(st.sampled_from(HOSTILE_KEYS))] = node.pop(key)
        elif op == "duplicate" and isinstance(node, list):
            node.insert(key, copy.deepcopy(node[key]))
        elif op == "wrap":
            node[key] = [node[key]]
        elif op == "listify" and isinstance(node[key], dict):
            node[key] = list(node[key].items())
    return doc


# ---- hostile values that keep a document's shape (for renderers and the judge) ----------------------------

def hostile_string() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(HOSTILE_STRINGS), st.text(max_size=40),
                     st.text(alphabet=st.characters(codec=None, categories=["Cc", "Cs", "Zl", "Zp", "Co"]),
                             max_size=10))


def hostile_int() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([0, -1, 2**63, -(2**63) - 1, 10**40]), st.integers())


def hostile_float() -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 5e-324]), st.floats())


@st.composite
def reshaped(draw: Callable, doc: Any, rate: float = 0.15) -> Any:
    """`doc` with about `rate` of its scalars (and some keys of string maps) replaced by hostile values of
    the same type, so the document keeps its shape while its text and numbers turn hostile.

    Hypothesis draws the pools of hostile values (so failures shrink to a small pool); a seeded Random
    (reproducible under derandomize) decides which nodes change, which keeps big documents in budget."""
    rnd = draw(st.randoms(use_true_random=True))
    strings = draw(st.lists(hostile_string(), min_size=1, max_size=8)) + HOSTILE_STRINGS
    ints = draw(st.lists(hostile_int(), min_size=1, max_size=4))
    floats = draw(st.lists(hostile_float(), min_size=1, max_size=4))

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if isinstance(k, str) and rnd.random() < rate / 3:
                    k = rnd.choice(strings)
                out[k] = walk(v)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, bool) or rnd.random() >= rate:
            return node
        if isinstance(node, int):
            return rnd.choice(ints)
        if isinstance(node, float):
            return rnd.choice(floats)
        if isinstance(node, str):
            return rnd.choice(strings)
        return node

    return walk(doc)
