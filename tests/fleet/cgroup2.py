"""Make REAL dying cgroups on the cgroup v2 (unified) hierarchy, and release them.

On this kernel the memory controller is bound to v1, so a v2 cgroup holds no page cache. What keeps a
removed v2 cgroup dying here is a task that has exited but was not reaped: its css_set (and with it
the cgroup) is released only when the zombie is. A helper process loops: mkdir a cgroup, fork a child
that moves itself in and exits, rmdir the cgroup (allowed: an exited task no longer populates it),
keep the zombie. The kernel counts each in `nr_dying_descendants` of every ancestor's `cgroup.stat`
until the helper exits and its zombies are reaped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

_HELPER = r"""
import os, sys
parent, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    cg = os.path.join(parent, f"d{i}")
    os.mkdir(cg)
    pid = os.fork()
    if pid == 0:
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        os._exit(0)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # exited, still a zombie
    os.rmdir(cg)
os.rmdir(parent)
sys.stdout.write("ready\n")
sys.stdout.flush()
sys.stdin.read()  # hold the zombies until told to go (stdin closed); exiting reaps them
"""


def cgroup_stat(cgroup: Path) -> dict[str, int]:
    """`cgroup.stat` of a v2 cgroup directory as numbers."""
    return {k: int(v) for k, v in (line.split() for line in (cgroup / "cgroup.stat").read_text().splitlines())}


def v2_cgroup_of(pid: int, mount: Path) -> Path:
    """The directory of `pid`'s cgroup on the v2 hierarchy mounted at `mount` (host view)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return mount / line[3:].lstrip("/")
    raise RuntimeError(f"pid {pid} is in no cgroup v2 hierarchy")


class DyingCgroups:
    """`n` dying v2 cgroups below `parent` (a cgroup2 directory), held until `release()`.

    `wait=False` returns at once (several batches can be made side by side); `ready()` then waits."""

    def __init__(self, parent: Path, n: int, wait: bool = True):
        self.before = cgroup_stat(parent).get("nr_dying_descendants", 0)
        self.parent = parent / f"ami-auditor-dying-{os.getpid()}-{time.monotonic_ns()}"
        self.parent.mkdir()
        self.proc = subprocess.Popen([sys.executable, "-c", _HELPER, str(self.parent), str(n)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait until the helper made all of them (RuntimeError if it died)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.release()
            raise RuntimeError(f"dying cgroup helper failed: {self.proc.stderr.read() if self.proc.stderr else ''}")

    def release(self, settle: float = 5.0) -> None:
        """Let the helper exit (its zombies are reaped) and wait for the kernel to free the cgroups."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.parent.exists():
            for d in sorted(self.parent.glob("*/"), key=lambda p: len(p.parts), reverse=True):
                d.rmdir()
            self.parent.rmdir()
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline and \
                cgroup_stat(self.parent.parent).get("nr_dying_descendants", 0) > self.before:
            time.sleep(0.05)

    def __enter__(self) -> DyingCgroups:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
