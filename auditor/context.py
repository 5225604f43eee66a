"""An injectable environment for commands (streams, terminal-ness), so tests run the real CLI."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import TextIO

from .textsafe import block


@dataclass
class Env:
    """Where a command writes; tests pass StringIO streams."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)

    @property
    def progress(self) -> bool:
        """Show progress only when stderr is a terminal."""
        return bool(getattr(self.stderr, "isatty", lambda: False)())

    def out(self, text: str = "") -> None:
        self.write(text + "\n")

    def write(self, text: str) -> None:
        """Write to stdout, host text's control characters escaped (textsafe.block). A reader that went
        away (`| head`) must not stop the run: reports, history and the exit code still happen; the rest of
        the terminal output is dropped."""
        try:
            self.stdout.write(block(text))
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
