"""auditor.jsonload: the orjson fast path gives the same documents and the same errors as the stdlib path
(`_slow_load`, the reference and the only source of messages) on ordinary and hostile JSON."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import strategies as st

from auditor import jsonload
from auditor.errors import InputError
from auditor.inputfile import MAX_DEPTH, MAX_INT_DIGITS
from tests.paths import DATA, ROOT

REAL = sorted(DATA.glob("snapshots/*.json")) + sorted(DATA.glob("reports/*.json"))


def outcome(load: Any, text: str) -> tuple[str, Any]:
    """('ok', document) or ('error', (message, file, line)): what a caller sees."""
    try:
        return "ok", load(text)
    except InputError as exc:
        return "error", (str(exc), exc.path, exc.line)


def same(text: str) -> tuple[str, Any]:
    """The public loader's outcome, asserted equal (types, key order and float signs included) to the
    stdlib path's."""
    fast = outcome(lambda t: jsonload.load_json_text(t, "f.json"), text)
    slow = outcome(lambda t: jsonload._slow_load(t, "f.json"), text)
    assert repr(fast) == repr(slow)
    return fast


def nested(depth: int, inner: str = "1") -> str:
    """`depth` containers, alternating objects and arrays, around `inner`."""
    out = inner
    for i in range(depth):
        out = f'{{"k{i}": {out}}}' if i % 2 else f"[{out}]"
    return out


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_documents_take_the_fast_path_and_equal_the_stdlib(path: Path) -> None:
    data = path.read_bytes()
    doc = jsonload._fast_load(data)
    assert doc is not jsonload._SLOW
    assert repr(doc) == repr(jsonload._slow_load(data.decode(), str(path)))
    assert repr(jsonload.load_json_file(path)) == repr(doc)


HOSTILE = {
    "nan": '{"a": NaN}', "infinity": '{"a": [1, Infinity]}', "minus-infinity": "-Infinity",
    "float-overflow": '{"a": 1e400}', "negative-overflow": '[-1e400]', "underflow": "[1e-400, -0e0]",
    "400-digit-int": '{"n": ' + "9" * 400 + "}", "int-past-limit": '{"n": -' + "1" * (MAX_INT_DIGITS + 1) + "}",
    "20-digit-int": "[18446744073709551616, -9223372036854775809, 99999999999999999999]",
    "19-digit-ints": "[9223372036854775807, -9223372036854775808, 1234567890123456789]",
    "long-digits-in-string": '{"boot_id": "00000000000000000000000000000000", "x": "a0000000000000000000000"}',
    "long-digits-after-colon-in-string": '{"f": "SHA256:0000000000000000000000", "g": "\\"x:1234567890123456789"}',
    "long-int-after-escaped-quote": '{"g": "\\"", "n": 12345678901234567890123}',
    "long-fraction": "[0.0000000000000000000001, 1.00000000000000000000001e5]",
    "lone-surrogate-value": '{"a": "\\ud800"}', "lone-surrogate-key": '{"\\udc80x": 1}',
    "high-then-letter": '["\\ud800\\u0041"]', "low-then-high": '["\\udc00\\ud800"]',
    "surrogate-pair": '{"e": "\\ud83d\\ude00", "\\uD83D\\uDE00": 1}', "escaped-backslash-u": '["\\\\ud800"]',
    "depth-at-limit": nested(MAX_DEPTH), "depth-over-limit": nested(MAX_DEPTH + 1),
    "depth-10000": "[" * 10_000 + "]" * 10_000, "depth-10000-open": "[" * 10_000,
    "brackets-in-strings-hide-depth": nested(MAX_DEPTH + 1, '"' + "]" * 70 + '"'),
    "closers-in-key": "[" * (MAX_DEPTH - 1) + '{"]]]]": [0]}' + "]" * (MAX_DEPTH - 1),
    "escaped-quotes": nested(MAX_DEPTH + 1, '"a \\"[[[\\" \\\\" '),
    "escaped-backslash-before-quote": '{"p": "C:\\\\", "q": "[\\\\\\"]", "r": ' + nested(MAX_DEPTH + 1) + "}",
    "bom": '\ufeff{"a": 1}', "duplicate-keys": '{"a": 1, "b": 2, "a": 3}', "empty": "", "spaces": "  \n ",
    "trailing-comma": "[1,]", "trailing-data": '{"a": 1} x', "control-in-string": '["a\x01b"]',
    "nul-escape": '["\\u0000", "\\u001b[2J", "\\u202e"]', "form-feed-space": "[1,\x0c2]",
    "single-quotes": "['a']", "leading-zero": "[01]", "plus": "[+1]", "unterminated": '{"a": "b',
    "bad-escape": '["\\x41"]', "deep-error-line": "\n\n" + "[" * 70 + "1,,",
    "non-ascii": '{"h\u00e9": "\u202eevil \U0001f600", "cjk": "\u4e2d"}', "top-scalar": '"x"', "minus-zero": "-0",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_text_same_outcome_as_the_stdlib_path(name: str) -> None:
    same(HOSTILE[name])


def test_the_refusals_keep_their_messages() -> None:
    def error(text: str) -> str:
        kind, got = same(text)
        assert kind == "error", got
        return got[0]

    assert "NaN and Infinity are refused" in error(HOSTILE["nan"])
    assert "out of range" in error(HOSTILE["float-overflow"])
    assert f"/n: integer with {MAX_INT_DIGITS + 1} digits is too long" in error(HOSTILE["int-past-limit"])
    assert same(HOSTILE["400-digit-int"]) == ("ok", {"n": int("9" * 400)})
    assert "/a: string contains a lone surrogate" in error(HOSTILE["lone-surrogate-value"])
    assert "a key contains a lone surrogate" in error(HOSTILE["lone-surrogate-key"])
    assert f"nested deeper than {MAX_DEPTH} levels" in error(HOSTILE["depth-over-limit"])
    assert f"nested deeper than {MAX_DEPTH} levels" in error(HOSTILE["depth-10000"])
    assert "BOM" in error(HOSTILE["bom"])
    assert same(HOSTILE["20-digit-int"])[1] == [18446744073709551616, -9223372036854775809, 99999999999999999999]
    assert same(HOSTILE["duplicate-keys"]) == ("ok", {"a": 3, "b": 2})


def test_screen_keeps_digits_in_strings_on_the_fast_path() -> None:
    fast = jsonload._fast_load(HOSTILE["long-digits-after-colon-in-string"].encode())
    assert fast is not jsonload._SLOW and fast["f"] == "SHA256:" + "0" * 22
    assert jsonload._fast_load(HOSTILE["long-int-after-escaped-quote"].encode()) is jsonload._SLOW
    assert jsonload._fast_load(b'{"a": "b", "n": -1234567890123456789}') is jsonload._SLOW


def test_deep_text_never_reaches_orjson() -> None:
    """orjson 3.8 has no nesting limit: a deep enough text overflows its C stack (a segfault, not an
    exception). The loader refuses such texts cleanly, in a child process so a crash is seen as one."""
    code = ("import sys; from auditor.jsonload import load_json_text\n"
            "from auditor.errors import InputError\n"
            "for text in ('[' * 2_000_000 + ']' * 2_000_000, '{\"a\":' * 500_000 + '1' + '}' * 500_000):\n"
            "    try:\n        load_json_text(text)\n    except InputError as exc:\n        print(exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count(f"nested deeper than {MAX_DEPTH} levels") == 2


def test_orjson_refuses_every_lone_surrogate_escape() -> None:
    """What the fast path relies on besides its own screen: orjson never yields a lone surrogate."""
    for code in range(0xD800, 0xE000):
        for text in (f'["\\u{code:04x}"]', f'{{"\\u{code:04X}x": 1}}', f'["\\u{code:04x}\\u0041"]'):
            with pytest.raises(orjson.JSONDecodeError):
                orjson.loads(text)


def test_files_invalid_utf8_and_bom(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{\n "a": "caf\xe9"\n}')
    with pytest.raises(InputError, match="not valid UTF-8") as exc:
        jsonload.load_json_file(bad)
    assert exc.value.line == 2
    bom = tmp_path / "bom.json"
    bom.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    with pytest.raises(InputError, match="BOM"):
        jsonload.load_json_file(bom)
    surrogate = tmp_path / "surrogate.json"
    surrogate.write_bytes(b'["\xed\xa0\x80"]')  # a surrogate encoded as UTF-8 bytes: not UTF-8
    with pytest.raises(InputError, match="not valid UTF-8"):
        jsonload.load_json_file(surrogate)


def height(doc: Any) -> int:
    if isinstance(doc, dict):
        return 1 + max(map(height, doc.values()), default=0)
    if isinstance(doc, list):
        return 1 + max(map(height, doc), default=0)
    return 0


def long_ints(doc: Any) -> bool:
    if isinstance(doc, dict):
        return any(map(long_ints, doc.values()))
    if isinstance(doc, list):
        return any(map(long_ints, doc))
    return type(doc) is int and abs(doc) >= 10**18


TRICKY = st.text(alphabet='[]{}"\\/bnu0a:1', max_size=30)
NUMBERS = st.one_of(st.integers(), st.integers(-(10**25), 10**25), st.floats(allow_nan=False, allow_infinity=False))
DOCS = st.recursive(st.one_of(st.none(), NUMBERS, TRICKY, st.sampled_from(["SHA256:" + "0" * 22, ":" + "1" * 20])),
                    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(TRICKY, kids, max_size=3)),
                    max_leaves=40)


