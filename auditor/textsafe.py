"""Text from hosts made safe to show: control characters and invisible reordering become visible escapes.

A hostname, unit name, evidence value or error text can carry terminal escape sequences (`ESC[2J`, the
8-bit CSI `\\x9b`), `\\r` that overwrites a line, BEL, NUL, or a U+202E override that shows text reversed.
Every renderer and the terminal pass what they show through here: such a character is written as
`\\x1b` / `\\u202e` (the way Python and JUnit show it), so it is visible and inert. The data itself
(snapshots, the JSON report) keeps the real characters.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, Arabic letter mark, LRM/RLM, line/paragraph separators, bidi embeddings,
# overrides and isolates, BOM, lone surrogates (not writable as UTF-8), and the non-characters U+FFFE/FFFF.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff"
                    "\ufffe\uffff]")


def _visible(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, ending in "…" when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def escape_controls(text: str, keep: str = "") -> str:
    """`text` with every unsafe character as a visible `\\xNN`/`\\uNNNN` escape, except those in `keep`."""
    if not UNSAFE.search(text):
        return text
    return UNSAFE.sub(lambda m: m.group() if m.group() in keep else _visible(m.group()), text)


def one_line(text: object) -> str:
    """One line of terminal text: newlines and tabs escaped too, so a host cannot add lines of its own."""
    return escape_controls("" if text is None else str(text))


def block(text: str) -> str:
    """Multi-line text (a report, a message): newlines and tabs kept, every other unsafe character escaped."""
    return escape_controls(text, keep="\n\t")


def json_text(text: str) -> str:
    """Serialized JSON with its unsafe characters as `\\uNNNN` escapes: the same data, inert on a terminal.

    json.dumps already escapes C0 inside strings; outside strings JSON has only ASCII and newlines, so
    replacing the rest (C1, bidi, lone surrogates) with escapes keeps the document valid and equal."""
    return UNSAFE.sub(lambda m: m.group() if m.group() == "\n" else f"\\u{ord(m.group()):04x}", text)


# UNSAFE as UTF-8 bytes, newline and lone surrogates (never valid UTF-8) aside. Every multi-byte pattern
# starts with a lead byte, which never occurs inside another character's encoding: matches are exact.
_UNSAFE_UTF8 = re.compile(b"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]"
                          b"|\xe2\x81[\xa6-\xa9]|\xef\xbb\xbf|\xef\xbf[\xbe\xbf]")


# the bytes an unsafe match starts with: one class, which re scans for far faster than the alternation
# (a report with an arrow in every finding title: 2.4 s for 200 MiB with the whole pattern, 0.5 s so)
_UNSAFE_LEAD = re.compile(b"[\x00-\x09\x0b-\x1f\x7f\xc2\xd8\xe2\xef]")


def json_bytes(data: bytes) -> bytes:
    """`json_text` on UTF-8 bytes, without decoding them: `json_bytes(t.encode()) == json_text(t).encode()`
    (a 0.5 GiB report is escaped in one pass and one copy)."""
    parts: list[bytes] = []
    done = 0
    lead = _UNSAFE_LEAD.search(data)
    while lead is not None:
        at = lead.start()
        unsafe = _UNSAFE_UTF8.match(data, at)
        if unsafe is None:  # a safe character with that lead byte (an arrow, an accented letter)
            lead = _UNSAFE_LEAD.search(data, at + 1)
            continue
        parts += (data[done:at], f"\\u{ord(unsafe.group().decode('utf-8')):04x}".encode("ascii"))
        done = unsafe.end()
        lead = _UNSAFE_LEAD.search(data, done)
    if not parts:
        return data
    parts.append(data[done:])
    return b"".join(parts)
