"""An injectable environment for commands (streams, terminal-ness), so tests run the real CLI."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO


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
        print(text, file=self.stdout)

    def err(self, text: str) -> None:
        print(text, file=self.stderr)
