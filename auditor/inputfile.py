"""Read an input file safely: regular files only (a FIFO never blocks), a hard size cap checked while reading
(a huge file is never read whole), symlink loops and invalid UTF-8 reported as InputError naming the file.

Limits (README, Security model → Limits): YAML inputs (rule packs, waivers, baselines, inventories,
--rules-config) at most 8 MiB; saved reports and snapshots (JSON) at most 64 MiB.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from .errors import InputError

MiB = 1 << 20
MAX_YAML_BYTES = 8 * MiB
MAX_JSON_BYTES = 64 * MiB
MAX_DEPTH = 64  # nesting levels of a YAML or JSON document (YAML: counting what aliases bring in)
MAX_INT_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 4300)() or 4300
_CHUNK = 1 * MiB


def _mib(n: int) -> str:
    return f"{n / MiB:g} MiB"


_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)


def read_bounded(path: str | Path, limit: int) -> bytes:
    """The file's bytes, refusing non-regular files and anything larger than `limit` bytes.

    A device is refused by stat before it is ever opened (opening one can act: a watchdog starts, a tape
    rewinds, a tty becomes the controlling terminal); the open (non-blocking, no controlling tty: a FIFO
    must not wait for a writer) is checked again by fstat, for a file swapped in between."""
    p = str(path)
    if "\0" in p:
        raise InputError("a file name cannot contain a NUL character", p.replace("\0", "\\0"))
    try:
        _refuse(os.stat(p), p, limit)
        fd = os.open(p, _OPEN)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError("symlink loop (too many levels of symbolic links)", p) from None
        raise InputError(f"cannot read: {exc.strerror or exc}", p) from None
    try:
        st = os.fstat(fd)
        _refuse(st, p, limit)
        chunks: list[bytes] = []
        total = 0
        # the first read asks for the size fstat gave (+1 to see growth): a read of a whole _CHUNK
        # allocates (and faults in) a MiB per small file, 10x the cost of reading it
        want = min(st.st_size + 1, _CHUNK)
        while True:
            asked = min(want, limit + 1 - total)
            chunk = os.read(fd, asked)
            want = _CHUNK
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # grew while we read it
                raise InputError(f"file is over the {_mib(limit)} limit for this input", p)
            if len(chunk) < asked and total == st.st_size:  # all fstat promised, and no more: the end
                break
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", p) from None
    finally:
        os.close(fd)


def _refuse(st: os.stat_result, p: str, limit: int) -> None:
    """InputError for anything but a regular file of at most `limit` bytes."""
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) \
            else "a device or socket"
        raise InputError(f"not a regular file ({kind})", p)
    if st.st_size > limit:
        raise InputError(f"file is {_mib(st.st_size)}, over the {_mib(limit)} limit for this input", p)


def read_ahead(path: str, limit: int = MAX_JSON_BYTES) -> None:
    """Ask the kernel to start reading `path` now, so that files read one after another arrive from disk
    while the one before is parsed: its first `limit` + 1 bytes, as much as read_bounded may read (a
    hint for the whole file would pull a huge one into the page cache). A hint only: anything that goes
    wrong is left to the read that follows, which names it; only a regular file is opened (by stat)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
        fd = os.open(path, _OPEN)
    except (OSError, ValueError):  # missing, unreadable, a NUL in the name
        return
    try:
        os.posix_fadvise(fd, 0, limit + 1, os.POSIX_FADV_WILLNEED)
    except OSError:  # a filesystem that takes no advice
        pass
    finally:
        os.close(fd)


def decode_utf8(data: bytes, path: str) -> str:
    """UTF-8 text; invalid bytes are an InputError at their line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {column})", path,
                         line) from None


def read_text(path: str | Path, limit: int) -> str:
    """read_bounded + decode_utf8."""
    return decode_utf8(read_bounded(path, limit), str(path))


def line_at(text: str, index: int) -> int:
    """1-based line of character `index` in `text`."""
    return text.count("\n", 0, index) + 1
