"""Atomic writes and up-front write checks.

`write_text_atomic` writes to a unique temporary file in the destination's directory and renames it
over the destination, so readers never see half a file and a failure leaves nothing behind.
`check_writable_dir` proves, before any host is contacted, that a directory can be created and written
(it creates what is missing and a probe file, then removes both), raising InputError naming the option.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .errors import InputError

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: files get the usual 0666 & ~umask mode, not mkstemp's 0600


def write_text_atomic(path: Path, text: str | bytes, mode: int | None = None) -> None:
    """Write `text` (bytes: already UTF-8) to `path` via a unique temp file in the same directory; removed
    on any failure. `mode`: the file's permissions (default 0666 less the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text if isinstance(text, bytes) else text.encode("utf-8"))
        os.chmod(tmp, 0o666 & ~_UMASK if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_writable_dir(directory: Path, option: str) -> None:
    """InputError unless `directory` is (or can be made) a writable directory; leaves no trace."""
    if directory.exists() and not directory.is_dir():
        raise InputError(f"{option}: {directory} exists and is not a directory")
    missing: list[Path] = []
    probe = directory
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    try:
        for made in reversed(missing):
            made.mkdir()
        fd, tmp = tempfile.mkstemp(prefix=".ami-auditor-probe.", suffix=".tmp", dir=directory)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise InputError(f"{option}: cannot write to {directory}: {_why(exc)}") from None
    finally:
        for made in missing:  # deepest first
            with contextlib.suppress(OSError):
                made.rmdir()


def check_writable_file(path: Path, option: str) -> None:
    """InputError unless `path` can be written as a file (not a directory; its directory writable)."""
    if path.is_dir():
        raise InputError(f"{option}: {path} is a directory; give a file name")
    check_writable_dir(path.parent, option)
