"""Read an untrusted image root as if chrooted into it (never a path on the scanner).

Every path is walked one component at a time from an fd of the image root with `openat(...,
O_NOFOLLOW)`: symlinks are read with `readlinkat` and expanded by this code, absolute targets restart
at the image root, `..` pops the walked directory stack and is clamped at the root, more than 40 links
in one lookup is refused (a loop), a component that is not a directory ends the lookup. Only regular
files are opened (lstat first, then `O_NOFOLLOW|O_NONBLOCK` and fstat again, so a FIFO or device is
never read and a file swapped for a link in between is refused); reads are capped.

A manual walk rather than openat2(RESOLVE_IN_ROOT): it runs on any Linux kernel and seccomp profile,
and it sees each link, so an attempted escape is reported (`notes`) instead of silently re-rooted.
Because `..` never reaches the filesystem and every step opens a child of an fd already held with
O_NOFOLLOW, swapping a directory for a symlink during the walk makes the open fail; it cannot lead
out of the root. (A directory renamed out of the root while we hold its fd is the one race
RESOLVE_IN_ROOT would also catch; that needs write access to the scanner's own tree.)

Every lookup, read chunk and directory batch checks the run's deadline and SIGINT/SIGTERM (`check_time`),
so no reader path built on this class can outlive `--deadline` or a stop by more than one step.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import interrupt
from ..errors import ProbeTimeout
from .mounts import foreign_mounts
from .text import quote

MAX_LINKS = 40  # like the kernel's MAXSYMLINKS
MAX_DIR_ENTRIES = 100_000  # a big image's var/lib/dpkg/info holds ~5 files per package
MAX_DU_ENTRIES = 200_000  # entries `disk_usage` visits before it stops (and notes the cut)
_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHECK_EVERY = 1024  # directory entries between two deadline checks
NOT_FOUND = "not found"  # open_regular's reason for a path that is absent (not refused)


class ImageFSError(OSError):
    """A lookup the confined resolver refuses (link loop, too many links)."""


@dataclass
class Note:
    """Something about the image the report must say: an escaping link, a refused or cut read."""

    kind: str  # "escape" | "refused" | "truncated"
    path: str
    detail: str

    def line(self) -> str:
        return f"{self.kind} {quote(self.path)}: {' '.join(quote(w) for w in self.detail.split(' '))}"


@dataclass
class _Walk:
    """The end of a lookup: an fd of the parent directory, the final name and its lstat (None: absent, or
    `refused`: why the reader would not look there)."""

    parent_fd: int
    name: str
    st: os.stat_result | None
    parts: list[str]
    refused: str | None = None


@dataclass
class _Lookup:
    """Where one lookup stands: the components left, the directories entered (name, fd, all inside the
    root), the symbolic links followed, and the last absolute one (named if the path leads out)."""

    path: str
    todo: deque[str]
    root_fd: int
    stack: list[tuple[str, int]] = field(default_factory=list)
    hops: int = 0
    absolute_link: str | None = None

    def cur(self) -> int:
        return self.stack[-1][1] if self.stack else self.root_fd

    def names(self) -> list[str]:
        return [n for n, _ in self.stack]

    def here(self, name: str) -> str:
        return "/" + "/".join([*self.names(), name])

    def end(self, name: str, st: os.stat_result | None, refused: str | None = None) -> _Walk:
        return _Walk(self.cur(), name, st, self.names(), refused)

    def close_all(self) -> None:
        """Back at the image root: every directory entered is closed."""
        for _, fd in self.stack:
            os.close(fd)
        self.stack = []


def _split(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


class ImageFS:
    """An image root opened once; every read resolves inside it."""

    def __init__(self, root: Path, deadline: float | None = None):
        self.root = root
        self.deadline = deadline  # time.monotonic() by which the run's reads must end (None: no bound)
        self.root_fd = os.open(root, _DIR & ~os.O_NOFOLLOW)  # the operator's path itself may be a link
        self.notes: list[Note] = []
        self._seen: set[tuple[str, str]] = set()
        self.real_root = os.path.realpath(root)
        self.foreign = foreign_mounts(self.real_root)

    def close(self) -> None:
        if self.root_fd >= 0:
            os.close(self.root_fd)
            self.root_fd = -1

    def __enter__(self) -> ImageFS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_time(self) -> None:
        """Raise Interrupted on SIGINT/SIGTERM and ProbeTimeout once the deadline has passed."""
        interrupt.check()
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ProbeTimeout("image read did not finish within its deadline")

    def note(self, kind: str, path: str, detail: str) -> None:
        path = "/" + "/".join(_split(path))
        if (kind, path) not in self._seen:
            self._seen.add((kind, path))
            self.notes.append(Note(kind, path, detail))

    @contextlib.contextmanager
    def _walk(self, path: str, follow: bool = True) -> Iterator[_Walk]:
        """Resolve `path` (image-absolute) as chroot would; yields the final component, fds closed after."""
        self.check_time()
        look = _Lookup(path, deque(_split(path)), self.root_fd)
        try:
            found = None
            while found is None:
                found = self._step(look, follow)
            yield found
        except (FileNotFoundError, NotADirectoryError, ImageFSError):
            raise  # absent (changed under the walk), or refused and noted already
        except OSError as exc:  # EACCES for a scanner without DAC override, EIO: a read that failed, not an absence
            self.note("refused", path, f"not read: {exc.strerror or type(exc).__name__}")
            raise
        finally:
            look.close_all()

    def _step(self, look: _Lookup, follow: bool) -> _Walk | None:
        """One component of a lookup: the lookup's end, or None when it goes on (a directory entered,
        `..` climbed, a symbolic link's target queued)."""
        if not look.todo:  # the lookup ended on a directory already walked (the root, `..`, a link to one)
            return look.end(".", os.stat(".", dir_fd=look.cur()))
        comp = look.todo.popleft()
        if comp == "..":
            if look.stack:
                os.close(look.stack.pop()[1])
            elif look.hops:
                self.note("escape", look.path, "a symbolic link climbs above the image root with '..' "
                          "(clamped at the root as chroot would; nothing outside was read)")
            return None
        last = not look.todo
        try:
            st = os.stat(comp, dir_fd=look.cur(), follow_symlinks=False)
        except FileNotFoundError:
            if look.absolute_link:
                self.note("escape", look.path, f"symbolic link {look.absolute_link} leads out of the image "
                          "(target not in the image; resolved as chroot would, never followed outside)")
            return look.end(comp, None)
        except NotADirectoryError:
            return look.end(comp, None)
        if stat.S_ISLNK(st.st_mode) and (follow or not last):
            self._follow_link(look, comp)
            return None
        if self.foreign and stat.S_ISDIR(st.st_mode):
            where = os.path.join(self.real_root, *look.names(), comp)
            if where in self.foreign:
                why = f"{self.foreign[where]} ({look.here(comp)}); only the image's own filesystems are read"
                self.note("refused", look.path, why)
                return look.end(comp, None, why)
        if last:
            return look.end(comp, st)
        if not stat.S_ISDIR(st.st_mode):
            return look.end(comp, None)
        look.stack.append((comp, os.open(comp, _DIR, dir_fd=look.cur())))
        return None

    def _follow_link(self, look: _Lookup, comp: str) -> None:
        """Queue a symbolic link's target in place of `comp`; an absolute one restarts at the image root."""
        look.hops += 1
        if look.hops > MAX_LINKS:
            self.note("refused", look.path, f"more than {MAX_LINKS} symbolic links (a loop?)")
            raise ImageFSError(errno.ELOOP, "too many levels of symbolic links", look.path)
        target = os.readlink(comp, dir_fd=look.cur())
        if target.startswith("/"):
            look.absolute_link = f"{look.here(comp)} -> {target}"
            look.close_all()
        look.todo.extendleft(reversed(_split(target)))

    def lstat(self, path: str) -> os.stat_result | None:
        """The final component itself (a link is not followed); parents are resolved inside the root."""
        try:
            with self._walk(path, follow=False) as w:
                return w.st
        except OSError:
            return None

    def stat(self, path: str) -> os.stat_result | None:
        try:
            with self._walk(path) as w:
                return w.st
        except OSError:
            return None

    def realpath(self, path: str) -> str | None:
        """The physical path inside the image (`readlink -f` under chroot), None when absent."""
        try:
            with self._walk(path) as w:
                if w.st is None:
                    return None
                return "/" + "/".join(w.parts + ([] if w.name == "." else [w.name]))
        except OSError:
            return None

    def readlink(self, path: str) -> str | None:
        """The text of a link (never followed), None when `path` is not a link."""
        try:
            with self._walk(path, follow=False) as w:
                if w.st is None or not stat.S_ISLNK(w.st.st_mode):
                    return None
                return os.readlink(w.name, dir_fd=w.parent_fd)
        except OSError:
            return None

    def lookup(self, path: str) -> tuple[os.stat_result | None, str | None]:
        """`stat` that tells an absence from a refusal: (st, None) found, (None, None) absent, (None, why)
        when the reader could not or would not look (a link loop, another filesystem, permission denied)."""
        try:
            with self._walk(path) as w:
                return w.st, w.refused
        except (FileNotFoundError, NotADirectoryError):
            return None, None
        except OSError as exc:
            return None, exc.strerror or type(exc).__name__

    def is_dir(self, path: str) -> bool:
        st = self.stat(path)
        return st is not None and stat.S_ISDIR(st.st_mode)

    @contextlib.contextmanager
    def open_regular(self, path: str, why: list[str] | None = None) -> Iterator[tuple[int, os.stat_result] | None]:
        """An fd of a regular file at `path` (None if absent or refused: then `why` gets the reason, when
        given); closed after the block."""
        fd = -1
        reason = NOT_FOUND
        try:
            with self._walk(path) as w:
                if w.st is None or stat.S_ISDIR(w.st.st_mode):
                    result = None
                elif not stat.S_ISREG(w.st.st_mode):
                    reason = "not a regular file (FIFO, socket or device); not read"
                    self.note("refused", path, reason)
                    result = None
                else:
                    fd = os.open(w.name, _READ, dir_fd=w.parent_fd)
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):  # swapped since the lstat
                        reason = "changed into a non-regular file while being read"
                        self.note("refused", path, reason)
                        result = None
                    else:
                        result = (fd, st)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            result = None
        if result is None and why is not None:
            why.append(reason)
        try:
            yield result
        finally:
            if fd >= 0:
                os.close(fd)

    def read(self, path: str, cap: int, why: list[str] | None = None) -> bytes | None:
        """At most `cap` bytes of a regular file (a longer file is cut and noted). `why`, when given, gets
        why nothing was read (NOT_FOUND: absent) or why the text is not the whole file."""
        with self.open_regular(path, why) as opened:
            if opened is None:
                return None
            fd, st = opened
            data = bytearray()
            while len(data) < cap:
                self.check_time()
                chunk = os.read(fd, min(1 << 20, cap - len(data)))
                if not chunk:
                    break
                data += chunk
            if len(data) >= cap and st.st_size > cap:
                self.note("truncated", path, f"only the first {cap} of {st.st_size} bytes were read")
                if why is not None:
                    why.append(f"only the first {cap} of {st.st_size} bytes were read")
            return bytes(data)

    def read_text(self, path: str, cap: int, why: list[str] | None = None) -> str | None:
        data = self.read(path, cap, why)
        return None if data is None else data.decode("utf-8", "replace")

    def listdir(self, path: str, cap: int = MAX_DIR_ENTRIES) -> list[str] | None:
        """Sorted entry names of a directory inside the image (None if not a directory)."""
        try:
            with self._walk(path) as w:
                if w.st is None or not stat.S_ISDIR(w.st.st_mode):
                    return None
                fd = os.open(w.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=w.parent_fd)
        except OSError:
            return None
        names: list[str] = []
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    if len(names) % _CHECK_EVERY == 0:
                        self.check_time()
                    if len(names) >= cap:
                        self.note("truncated", path, f"only the first {cap} directory entries were read")
                        break
                    names.append(entry.name)
        except OSError:
            return None
        finally:
            os.close(fd)
        return sorted(names)

    def _uncounted(self, path: str, exc: OSError, why: list[str] | None) -> None:
        reason = f"disk usage not counted under it: {exc.strerror or type(exc).__name__}"
        self.note("refused", path, reason)
        if why is not None and reason not in why:
            why.append(reason)

    def disk_usage(self, path: str, cap: int = MAX_DU_ENTRIES, why: list[str] | None = None) -> int | None:
        """KiB used under a directory, as `du -sk` (links not followed, hard links once, other filesystems
        skipped); None when `path` is not a directory. Past `cap` entries it stops and notes the cut; a
        directory under it that cannot be read is noted (and `why`, when given, says so: the sum is short)."""
        try:
            with self._walk(path) as w:
                if w.st is None or not stat.S_ISDIR(w.st.st_mode):
                    if w.refused and why is not None:
                        why.append(w.refused)
                    return None
                top = os.open(w.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=w.parent_fd)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if why is not None:
                why.append(f"not read: {exc.strerror or type(exc).__name__}")
            return None
        dev = os.fstat(top).st_dev
        seen: set[tuple[int, int]] = set()
        blocks = os.fstat(top).st_blocks
        todo, visited = [top], 0
        try:
            while todo:
                fd = todo.pop()
                try:
                    with os.scandir(fd) as it:
                        for entry in it:
                            visited += 1
                            if visited % _CHECK_EVERY == 0:
                                self.check_time()
                            if visited > cap:
                                self.note("truncated", path, f"disk usage counted over the first {cap} entries only")
                                if why is not None:
                                    why.append(f"disk usage counted over the first {cap} entries only")
                                return blocks // 2
                            st = entry.stat(follow_symlinks=False)
                            if st.st_dev != dev or (st.st_nlink > 1 and (st.st_dev, st.st_ino) in seen):
                                continue
                            seen.add((st.st_dev, st.st_ino))
                            blocks += st.st_blocks
                            if stat.S_ISDIR(st.st_mode):
                                try:
                                    todo.append(os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                                        | os.O_CLOEXEC, dir_fd=fd))
                                except OSError as exc:
                                    self._uncounted(path, exc, why)
                except OSError as exc:
                    self._uncounted(path, exc, why)
                finally:
                    os.close(fd)
        finally:
            for fd in todo:
                os.close(fd)
        return blocks // 2
