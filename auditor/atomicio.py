"""Atomic writes and up-front write checks.

`write_text_atomic` writes to a unique temporary file in the destination's directory and renames it
over the destination, so readers never see half a file and a failure leaves nothing behind.
`write_files` does that for a set (every report format, every snapshot of a run): all temporary files
first, then all renames; when anything fails (disk full, read-only, a refused rename) the renamed files
are put back from backups of the previous ones, no temporary file is left and OutputError (exit 3) says
which file and why: the set is replaced as a whole or not at all.
Two runs writing one directory's set (`--out`) are serialised: the replace phase holds an exclusive flock on
the directory, so sets never mix; temporaries and backups carry their writer's pid, and those of a writer
no longer alive (a SIGKILLed run) are removed by the next set written there.
`check_writable_dir` proves, before any host is contacted, that a directory can be created and written
(it creates what is missing and a probe file, then removes both), raising InputError naming the option.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeAlias

from .errors import InputError, OutputError

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: files get the usual 0666 & ~umask mode, not mkstemp's 0600


LOCK_WAIT_S = 120.0  # another run's replace phase takes milliseconds; a stuck one is named, not waited for forever


def _prefix(path: Path) -> str:
    """Temporaries and backups are `.NAME.PID.XXXXXXXX.tmp|old`: the pid says whether their writer still lives."""
    return f".{path.name}.{os.getpid()}."


def _temp_beside(path: Path, kind: str = "tmp") -> str:
    fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=f".{kind}", dir=path.parent)
    os.close(fd)
    return tmp


Content: TypeAlias = "str | bytes | Iterable[bytes]"  # text, UTF-8 bytes, or UTF-8 bytes in pieces written as they come


def _write_temp(path: Path, text: Content, mode: int | None) -> str:
    """A unique temporary file beside `path` holding `text`, with its final mode; removed if writing fails
    (a piece that cannot be made included)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            if isinstance(text, (str, bytes)):
                handle.write(text if isinstance(text, bytes) else text.encode("utf-8"))
            else:
                for piece in text:
                    handle.write(piece)
        os.chmod(tmp, 0o666 & ~_UMASK if mode is None else mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def write_text_atomic(path: Path, text: str | bytes, mode: int | None = None) -> None:
    """Write `text` (bytes: already UTF-8) to `path` via a unique temp file in the same directory; removed
    on any failure. `mode`: the file's permissions (default 0666 less the umask)."""
    tmp = _write_temp(path, text, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _backup(path: Path) -> str | None:
    """A second name for the previous `path` (a hard link; a copy where links are refused), None if absent."""
    if not path.exists():
        return None
    backup = _temp_beside(path, "old")
    try:
        os.unlink(backup)
        try:
            os.link(path, backup)
        except OSError:  # no hard links here (vfat), or an immutable file: copy it
            shutil.copy2(path, backup)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(backup)
        raise
    return backup


class StagedFiles:
    """A set of files written one by one as they arrive and replaced as a whole by `commit` (all or none),
    so a caller streaming results (`collect -o`: a snapshot per host as it completes) never holds the set
    in memory. The first write that fails is remembered and `commit` raises OutputError for it; used as a
    context manager, whatever is still staged on exit (an error, Ctrl-C) is removed."""

    def __init__(self, mode: int | None = None) -> None:
        self.mode = mode
        self.temps: list[tuple[Path, str]] = []
        self.failed: tuple[Path, OSError] | None = None

    def __enter__(self) -> StagedFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def add(self, path: Path, text: Content) -> None:
        """Stage one file (a temporary beside `path`); after a failure nothing more is staged."""
        if self.failed is not None:
            return
        try:
            self.temps.append((path, _write_temp(path, text, self.mode)))
        except OSError as exc:
            self.failed = (path, exc)
            self.discard()

    def discard(self) -> None:
        """Remove every staged temporary file; the previous files stay as they were."""
        _remove([tmp for _, tmp in self.temps])
        self.temps = []

    def commit(self) -> None:
        """Replace every staged file, or none: OutputError (naming the file and the reason) if any fails."""
        if self.failed is not None:
            path, exc = self.failed
            raise _not_saved(path, exc) from exc
        temps, self.temps = self.temps, []
        _replace_all(temps)


def write_files(files: Sequence[tuple[Path, Content]], mode: int | None = None) -> None:
    """Replace every file of the set, or none: OutputError (naming the file and the reason) if any fails.

    Each file is still replaced by one rename, so a reader (node_exporter's textfile collector) never sees
    it missing or half written."""
    with StagedFiles(mode) as staged:
        for path, text in files:
            staged.add(path, text)
        staged.commit()


def _not_saved(path: Path, exc: OSError) -> OutputError:
    return OutputError(f"incomplete: results not saved: cannot write {path}: {_why(exc)} "
                       "(the previous files are unchanged)")


@contextlib.contextmanager
def _locked(directories: Iterable[Path], wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """An exclusive flock on each directory (sorted: two sets never wait on each other in turn), held while a
    set is replaced there. The directory itself is locked, so nothing is left in it."""
    fds: list[int] = []
    try:
        for directory in sorted(set(directories)):
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            fds.append(fd)
            if not _flock_within(fd, wait_s):
                raise OutputError(f"incomplete: results not saved: another run has been writing {directory} "
                                  f"for over {wait_s:.0f}s (the previous files are unchanged)")
        yield
    finally:
        for fd in fds:
            os.close(fd)  # releases the lock


def _flock_within(fd: int, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while not _try_flock(fd):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


_LEFTOVER = re.compile(r"\.(\d+)\.[^.]+\.(?:tmp|old)$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, someone else's
        return True
    return True


def _clean_leftovers(paths: Iterable[Path]) -> None:
    """Remove the temporaries and backups that a killed writer left beside `paths` (its pid no longer alive)."""
    for path in paths:
        prefix = f".{path.name}."
        with contextlib.suppress(OSError):
            for entry in os.scandir(path.parent):
                match = _LEFTOVER.fullmatch(entry.name[len(prefix) - 1:]) if entry.name.startswith(prefix) else None
                if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)


def _replace_all(temps: list[tuple[Path, str]]) -> None:
    """Under the directories' lock: leftovers of killed writers removed, then each staged temporary renamed."""
    with _locked(path.parent for path, _ in temps):
        _clean_leftovers(path for path, _ in temps)
        _replace_locked(temps)


def _replace_locked(temps: list[tuple[Path, str]]) -> None:
    """Rename each staged temporary over its file; on any failure put the previous set back."""
    backups: dict[Path, str | None] = {}
    renamed: list[Path] = []
    current = temps[0][0] if temps else Path(".")
    try:
        for current, _ in temps:
            backups[current] = _backup(current)
        for current, tmp in temps:
            os.replace(tmp, current)
            renamed.append(current)
    except BaseException as exc:
        for path in reversed(renamed):  # put the previous set back
            previous = backups.get(path)
            with contextlib.suppress(OSError):  # a backup that cannot be put back is kept, never removed
                if previous:
                    os.replace(previous, path)
                    backups[path] = None
                else:
                    os.unlink(path)
        _remove([tmp for path, tmp in temps if path not in renamed]
                + [b for p, b in backups.items() if b and p not in renamed])
        if isinstance(exc, OSError):
            raise _not_saved(current, exc) from exc
        raise
    _remove([b for b in backups.values() if b])


def _remove(paths: list[str]) -> None:
    for name in paths:
        with contextlib.suppress(OSError):
            os.unlink(name)


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
