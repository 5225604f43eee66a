"""How deep a run's calls go and how many of the tool's modules it runs: a reader's map of `scan local`.

Run:  python3 -m benchmarks.trace_depth [--root DIR] [-- ARGS…]   (default ARGS: scan local --out TMP)
`--root` is the checkout to measure (default: this one), so a "before" can be taken at another commit's
worktree. Prints the module count under auditor/, the deepest stack (auditor frames, and all Python frames)
with the auditor frames of that stack, and how many auditor modules the run executed. Asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any


def module_count(package: Path) -> int:
    return sum(1 for _ in package.rglob("*.py"))


class Tracer:
    """Profile hook: on every Python call, the depth of the calling stack (all frames, auditor frames)."""

    def __init__(self, package: Path):
        self.prefix = str(package) + "/"
        self.max_all = 0
        self.max_ours = 0
        self.deepest: list[str] = []
        self.max_distinct = 0  # distinct functions on one stack: recursion (a rule's expression walk) counted once
        self.widest: list[str] = []
        self.modules: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(self.prefix):
            return
        depth_all = depth_ours = 0
        f: FrameType | None = frame
        while f is not None:
            depth_all += 1
            if f.f_code.co_filename.startswith(self.prefix):
                depth_ours += 1
            f = f.f_back
        with self.lock:
            self.modules.add(filename)
            self.max_all = max(self.max_all, depth_all)
            if depth_ours > self.max_ours:
                self.max_ours = depth_ours
                self.deepest = self._stack(frame)
            if depth_ours > self.max_distinct:  # a bound: distinct functions never exceed the frames
                stack = list(dict.fromkeys(self._stack(frame)))
                if len(stack) > self.max_distinct:
                    self.max_distinct, self.widest = len(stack), stack

    def _stack(self, frame: FrameType) -> list[str]:
        out = []
        f: FrameType | None = frame
        while f is not None:
            if f.f_code.co_filename.startswith(self.prefix):
                rel = f.f_code.co_filename[len(self.prefix):]
                out.append(f"{rel}:{f.f_code.co_name}")
            f = f.f_back
        return out[::-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]), help="checkout to measure")
    parser.add_argument("args", nargs="*", help="the command line (after --); default: scan local --out TMP")
    opts = parser.parse_args()
    root = Path(opts.root).resolve()
    sys.path.insert(0, str(root))
    package = root / "auditor"
    tmp = Path(tempfile.mkdtemp(prefix="trace-depth-"))
    argv = opts.args or ["scan", "local", "--store", str(tmp / "store.sqlite3"), "--out", str(tmp / "x")]
    tracer = Tracer(package)
    out, err = io.StringIO(), io.StringIO()
    threading.setprofile(tracer)
    sys.setprofile(tracer)  # before the import: a module's top level counts as run
    try:
        from auditor.cli import main as cli_main  # noqa: PLC0415 - after sys.path names the checkout measured
        from auditor.context import Env  # noqa: PLC0415

        if not cli_main.__code__.co_filename.startswith(str(package)):
            raise SystemExit(f"auditor imported from {cli_main.__code__.co_filename}, not {package}")
        code = cli_main(argv, Env(stdout=out, stderr=err))
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"checkout: {root}")
    print(f"command: ami-auditor {' '.join(argv)} -> exit {code}")
    print(f"modules under auditor/: {module_count(package)}")
    print(f"auditor modules the run executed: {len(tracer.modules)}")
    print(f"deepest stack: {tracer.max_ours} auditor frames ({tracer.max_all} Python frames in all), "
          f"top: {tracer.deepest[-1] if tracer.deepest else '-'}")
    print(f"most distinct auditor functions on one stack: {tracer.max_distinct}")
    for line in tracer.widest:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
