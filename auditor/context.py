"""An injectable environment for commands (streams, terminal-ness), so tests run the real CLI."""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from .colour import enabled, paint
from .textsafe import block, json_text

Styled = Iterable[tuple[str, str | None]]  # (text, style name or None): one terminal line in pieces


def _escape(exc: UnicodeError) -> tuple[str, int]:
    """What an encoding cannot hold as `\\uXXXX` (a surrogate pair above U+FFFF): the escape JSON itself uses, so
    a report printed in a Latin-1 or ASCII locale is still valid JSON with the same strings, and readable."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start:exc.end]:
        code = ord(ch)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), exc.end


codecs.register_error("ami-auditor-escape", _escape)


def tolerant_streams() -> None:
    """Let the process's own text streams escape what their encoding cannot show (a Latin-1 or C locale's
    terminal gets `\\u2026` for `…`) rather than raise UnicodeEncodeError mid-report; files are written as
    UTF-8 by their writers, whatever the locale."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="ami-auditor-escape")


@dataclass
class Env:
    """Where a command writes; tests pass StringIO streams."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    quiet: bool = False  # --quiet: no summary, no progress (errors still go to stderr)
    color: str = "auto"  # --color auto|always|never
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    @property
    def progress(self) -> bool:
        """Show progress only when stderr is a terminal (never with --quiet)."""
        return not self.quiet and bool(getattr(self.stderr, "isatty", lambda: False)())

    @property
    def coloured(self) -> bool:
        """Whether lines written with out_styled() get colour (colour.py decides)."""
        return not self.quiet and enabled(self.color, self.stdout, self.environ)

    def terminal(self, to_stderr: bool = False, quiet: bool = False, color: str | None = None) -> Env:
        """The Env for a run's summary: on stderr when the report owns stdout; silent with --quiet."""
        stdout = self.stderr if to_stderr else self.stdout
        if quiet:
            stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the Env
        return replace(self, stdout=stdout, quiet=quiet or self.quiet, color=color or self.color)

    def out_styled(self, parts: Styled) -> None:
        """One line from (text, style) pieces: each text escaped, then coloured when coloured is on."""
        colour = self.coloured
        self.write("".join(paint(block(text), style) if colour else block(text) for text, style in parts) + "\n",
                   escape=False)

    def out(self, text: str = "") -> None:
        self.write(text + "\n")

    def out_json(self, doc: Any, indent: int = 2, default: Any = None) -> None:
        """One JSON document: unsafe characters as `\\uNNNN` escapes (json_text), never `\\xNN`, which
        is not JSON; the same data, still parseable, inert on a terminal."""
        self.write(json_text(json.dumps(doc, indent=indent, ensure_ascii=False, default=default)) + "\n",
                   escape=False)

    def write(self, text: str, escape: bool = True) -> None:
        """Write to stdout, host text's control characters escaped (textsafe.block; out_styled escapes its
        pieces itself). A reader that went away (`| head`) must not stop the run: reports, history and the
        exit code still happen; the rest of the terminal output is dropped."""
        try:
            self.stdout.write(block(text) if escape else text)
            self.stdout.flush()
        except BrokenPipeError:
            self._drop_stdout()

    def err(self, text: str) -> None:
        with contextlib.suppress(BrokenPipeError):
            print(block(text), file=self.stderr)

    def _drop_stdout(self) -> None:
        if self.stdout is sys.stdout:  # also keep the interpreter's exit-time flush from failing
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
        self.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the Env
