"""The one entry point of the generated references (docs/rules.md, docs/facts.md): write, say where."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def write_reference(text: Callable[[], str], default: Path, argv: list[str] | None = None) -> int:
    """Write `text()` to the path given on the command line, or to `default`; print where."""
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else default
    target.write_text(text(), encoding="utf-8")
    print(f"wrote {target}")
    return 0
