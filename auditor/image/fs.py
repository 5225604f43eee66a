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
import re
import stat
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import interrupt
from ..errors import ProbeTimeout
from .text import quote

MAX_LINKS = 40  # like the kernel's MAXSYMLINKS
PSEUDO_FS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "tmpfs", "ramfs", "cgroup", "cgroup2", "securityfs", "debugfs",
    "tracefs", "bpf", "mqueue", "hugetlbfs", "fusectl", "configfs", "pstore", "autofs", "binfmt_misc",
    "efivarfs", "selinuxfs", "nsfs",
})
MAX_DIR_ENTRIES = 100_000  # a big image's var/lib/dpkg/info holds ~5 files per package
MAX_DU_ENTRIES = 200_000  # entries `disk_usage` visits before it stops (and notes the cut)
_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHECK_EVERY = 1024  # directory entries between two deadline checks


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
    """The end of a lookup: an fd of the parent directory, the final name and its lstat (None: absent)."""

    parent_fd: int
    name: str
    st: os.stat_result | None
    parts: list[str]


def _split(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def foreign_mounts(root: str, mountinfo: str = "/proc/self/mountinfo") -> dict[str, str]:
    """Mount points below `root` that are not the image's own filesystems → why they are not read.

    Accepted: a disk filesystem mounted at its own root whose device is mounted nowhere outside the
    image (an image's /var partition). Refused: pseudo filesystems (proc, sysfs, tmpfs, …), bind mounts
    of a subdirectory, and devices also mounted outside the image (a bind of the scanner's own disk).
    """
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            rows = [line.split() for line in f]
    except OSError:
        return {}
    prefix = root.rstrip("/") + "/"
    mounts: dict[str, tuple[str, str, str]] = {}
    outside: set[str] = set()
    for cols in rows:
        if "-" not in cols[6:] or len(cols) < 9:
            continue
        sep = cols.index("-", 6)
        device, mroot, point, fstype = cols[2], _unescape(cols[3]), _unescape(cols[4]), cols[sep + 1]
        if point.startswith(prefix):
            mounts[point] = (device, mroot, fstype)
        elif point != root:
            outside.add(device)
    out = {}
    for point, (device, mroot, fstype) in mounts.items():
        if fstype in PSEUDO_FS:
            out[point] = f"a {fstype} filesystem is mounted here"
        elif mroot != "/":
            out[point] = f"a bind mount of {mroot} is mounted here"
        elif device in outside:
            out[point] = "a filesystem that is also mounted outside the image is mounted here"
    return out


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
        todo = deque(_split(path))
        stack: list[tuple[str, int]] = []
        hops = 0
        absolute_link: str | None = None

        def cur() -> int:
            return stack[-1][1] if stack else self.root_fd

        def here(name: str) -> str:
            return "/" + "/".join([n for n, _ in stack] + [name])

        try:
            while True:
                if not todo:  # the lookup ended on a directory already walked (the root, `..`, a link to one)
                    yield _Walk(cur(), ".", os.stat(".", dir_fd=cur()), [n for n, _ in stack])
                    return
                comp = todo.popleft()
                if comp == "..":
                    if stack:
                        os.close(stack.pop()[1])
                    elif hops:
                        self.note("escape", path, "a symbolic link climbs above the image root with '..' "
                                  "(clamped at the root as chroot would; nothing outside was read)")
                    continue
                last = not todo
                try:
                    st = os.stat(comp, dir_fd=cur(), follow_symlinks=False)
                except FileNotFoundError:
                    if absolute_link:
                        self.note("escape", path, f"symbolic link {absolute_link} leads out of the image (target "
                                  "not in the image; resolved as chroot would, never followed outside)")
                    yield _Walk(cur(), comp, None, [n for n, _ in stack])
                    return
                except NotADirectoryError:
                    yield _Walk(cur(), comp, None, [n for n, _ in stack])
                    return
                if stat.S_ISLNK(st.st_mode) and (follow or not last):
                    hops += 1
                    if hops > MAX_LINKS:
                        self.note("refused", path, f"more than {MAX_LINKS} symbolic links (a loop?)")
                        raise ImageFSError(errno.ELOOP, "too many levels of symbolic links", path)
                    target = os.readlink(comp, dir_fd=cur())
                    if target.startswith("/"):
                        absolute_link = f"{here(comp)} -> {target}"
                        for _, fd in stack:
                            os.close(fd)
                        stack = []
                    todo.extendleft(reversed(_split(target)))
                    continue
                if self.foreign and stat.S_ISDIR(st.st_mode):
                    where = os.path.join(self.real_root, *[n for n, _ in stack], comp)
                    if where in self.foreign:
                        self.note("refused", path, f"{self.foreign[where]} ({here(comp)}); only the image's own "
                                  "filesystems are read")
                        yield _Walk(cur(), comp, None, [n for n, _ in stack])
                        return
                if last:
                    yield _Walk(cur(), comp, st, [n for n, _ in stack])
                    return
                if not stat.S_ISDIR(st.st_mode):
                    yield _Walk(cur(), comp, None, [n for n, _ in stack])
                    return
                stack.append((comp, os.open(comp, _DIR, dir_fd=cur())))
        finally:
            for _, fd in stack:
                os.close(fd)

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

    def is_dir(self, path: str) -> bool:
        st = self.stat(path)
        return st is not None and stat.S_ISDIR(st.st_mode)

    @contextlib.contextmanager
    def open_regular(self, path: str, why: list[str] | None = None) -> Iterator[tuple[int, os.stat_result] | None]:
        """An fd of a regular file at `path` (None if absent or refused: then `why` gets the reason, when
        given); closed after the block."""
        fd = -1
        reason = "not found"
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

    def read(self, path: str, cap: int) -> bytes | None:
        """At most `cap` bytes of a regular file (a longer file is cut and noted)."""
        with self.open_regular(path) as opened:
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
            return bytes(data)

    def read_text(self, path: str, cap: int) -> str | None:
        data = self.read(path, cap)
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

    def disk_usage(self, path: str, cap: int = MAX_DU_ENTRIES) -> int | None:
        """KiB used under a directory, as `du -sk` (links not followed, hard links once, other filesystems
        skipped); None when `path` is not a directory. Past `cap` entries it stops and notes the cut."""
        try:
            with self._walk(path) as w:
                if w.st is None or not stat.S_ISDIR(w.st.st_mode):
                    return None
                top = os.open(w.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=w.parent_fd)
        except OSError:
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
                                return blocks // 2
                            st = entry.stat(follow_symlinks=False)
                            if st.st_dev != dev or (st.st_nlink > 1 and (st.st_dev, st.st_ino) in seen):
                                continue
                            seen.add((st.st_dev, st.st_ino))
                            blocks += st.st_blocks
                            if stat.S_ISDIR(st.st_mode):
                                with contextlib.suppress(OSError):
                                    todo.append(os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                                        | os.O_CLOEXEC, dir_fd=fd))
                except OSError:
                    pass
                finally:
                    os.close(fd)
        finally:
            for fd in todo:
                os.close(fd)
        return blocks // 2
