"""Image text made safe for a section line (pure): names and link texts from the image, %XX-encoded so
they can never start a line or a field of their own."""

from __future__ import annotations


def quote(text: str) -> str:
    """Printable ASCII other than space and `%` kept, anything else %XX-encoded: one line, one token.

    Names and link texts come from the image; quoted, they cannot start a line or a field of their own.
    A byte that is not UTF-8 (a name read as bytes: Python's surrogate escape) is shown as `\\xff`.
    """
    return "".join(c if 0x21 <= ord(c) < 0x7F and c != "%" else _escape(c) for c in text)


def field(text: str) -> str:
    """One whitespace-separated field: white space and `%` %XX-encoded, an undecodable byte shown as `\\xff`;
    every other character kept as the image has it (the renderers escape control characters for their
    reader, the data keeps what the host said)."""
    return "".join(_escape(c) if c.isspace() or c == "%" or 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)


def _escape(char: str) -> str:
    if 0xDC80 <= ord(char) <= 0xDCFF:  # os.fsdecode's stand-in for the raw byte
        return f"\\x{ord(char) - 0xDC00:02x}"
    return "".join(f"%{b:02X}" for b in char.encode("utf-8", "surrogatepass"))
