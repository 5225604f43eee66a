"""Make REAL dying memory cgroups on a cgroup-v1 kernel (FIELD-NOTES §2), and clean them up.

A helper process loops: mkdir a memcg, move itself in, write a page of page cache to a file, move back
out, rmdir the memcg. The page cache still charged to the removed memcg keeps it "dying" until the file
is deleted and caches are dropped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

MEMCG_ROOT = Path("/sys/fs/cgroup/memory")
DATA_ROOT = Path("/var/tmp/ami-auditor-memcg")
MEMCG_ID_LIMIT = 65535

_HELPER = r"""
import os, sys
parent, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pid = str(os.getpid()).encode()
home = os.path.join(parent, "cgroup.procs")
page = b"z" * 4096
for i in range(n):
    cg = os.path.join(parent, f"d{i}")
    os.mkdir(cg)
    with open(os.path.join(cg, "cgroup.procs"), "wb", buffering=0) as f:
        f.write(pid)
    fd = os.open(os.path.join(data, f"f{i}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, page)
    os.close(fd)
    with open(home, "wb", buffering=0) as f:
        f.write(pid)
    os.rmdir(cg)
"""


def available() -> str | None:
    """Why dying memcgs cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root"
    if not (MEMCG_ROOT / "cgroup.procs").exists() or not (MEMCG_ROOT / "memory.usage_in_bytes").exists():
        return f"needs a cgroup-v1 memory hierarchy at {MEMCG_ROOT}"
    return None


def memory_num_cgroups() -> int:
    """`num_cgroups` of the memory controller in /proc/cgroups (live + dying)."""
    for line in Path("/proc/cgroups").read_text().splitlines():
        cols = line.split()
        if cols and cols[0] == "memory":
            return int(cols[2])
    raise RuntimeError("no memory controller in /proc/cgroups")


def live_memcg_count() -> int:
    """Directories under the v1 memory hierarchy (the root included): the live memcgs."""
    return sum(1 for _ in os.walk(MEMCG_ROOT))


def dying_memcg_count() -> int:
    """num_cgroups from /proc/cgroups minus live memcg directories."""
    return memory_num_cgroups() - live_memcg_count()


def drop_caches(level: int = 3) -> None:
    """Write back dirty pages, then drop page cache (1), slab (2) or both (3)."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text(f"{level}\n")


def settle(timeout: float = 5.0, quiet: float = 0.5) -> int:
    """Wait until the dying count stops changing (the kernel frees memcgs asynchronously); return it."""
    deadline = time.monotonic() + timeout
    last, since = dying_memcg_count(), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet:
        time.sleep(0.05)
        now = dying_memcg_count()
        if now != last:
            last, since = now, time.monotonic()
    return last


class DyingMemcgs:
    """Owner of one batch of dying memcgs: `make(n)` adds some, `cleanup()` releases them all."""

    def __init__(self, tag: str | None = None):
        self.tag = tag or f"ami-auditor-test-{os.getpid()}-{time.monotonic_ns()}"
        self.parent = MEMCG_ROOT / self.tag
        self.data = DATA_ROOT / self.tag
        self._batches = 0

    def make(self, n: int, timeout: float = 300.0) -> int:
        """Make `n` dying memcgs; return how much the dying count rose (≈ n)."""
        reason = available()
        if reason:
            raise RuntimeError(f"cannot make dying memcgs: {reason}")
        if memory_num_cgroups() + n >= MEMCG_ID_LIMIT - 100:
            raise ValueError(f"{n} more memcgs would exhaust the kernel's {MEMCG_ID_LIMIT} memcg ids")
        before = dying_memcg_count()
        batch = self.parent / f"b{self._batches}"
        data = self.data / f"b{self._batches}"
        self._batches += 1
        batch.mkdir(parents=True)
        data.mkdir(parents=True)
        try:
            subprocess.run([sys.executable, "-c", _HELPER, str(batch), str(data), str(n)],
                           check=True, timeout=timeout, capture_output=True, text=True)
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"dying memcg helper failed: {e.stderr.strip()}") from e
        finally:
            with contextlib.suppress(OSError):
                batch.rmdir()  # empty now; itself charged nothing, so it does not linger
        return dying_memcg_count() - before

    def cleanup(self) -> None:
        """Remove the cache-holding files and the memcgs, then drop caches so the dying ones go."""
        shutil.rmtree(self.data, ignore_errors=True)
        if self.parent.exists():
            for d in sorted(self.parent.glob("**/"), key=lambda p: len(p.parts), reverse=True):
                with contextlib.suppress(OSError):
                    d.rmdir()
        with contextlib.suppress(OSError):
            DATA_ROOT.rmdir()
        drop_caches(3)
        settle()

    def __enter__(self) -> DyingMemcgs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


_DEFAULT: DyingMemcgs | None = None


def make_dying_memcgs(n: int) -> int:
    """Make `n` real dying memcgs (released by `cleanup_dying_memcgs()`); return the rise in the count."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = DyingMemcgs()
    return _DEFAULT.make(n)


def cleanup_dying_memcgs() -> None:
    """Release every memcg made by `make_dying_memcgs` (files removed, caches dropped)."""
    global _DEFAULT
    if _DEFAULT is not None:
        _DEFAULT.cleanup()
        _DEFAULT = None


@contextlib.contextmanager
def dying_memcgs(n: int) -> Iterator[int]:
    """Context manager: make `n` dying memcgs, yield the rise in the count, clean up after."""
    with DyingMemcgs() as batch:
        yield batch.make(n)
