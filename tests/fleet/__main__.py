"""`python -m tests.fleet up [--extra N]` keeps a fleet running until Ctrl-C/SIGTERM;
`python -m tests.fleet down [--force]` cleans leftovers; `python -m tests.fleet base` builds the base root."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from . import builder
from .fleet import Fleet, cleanup_stale


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(prog="python -m tests.fleet", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="boot the fleet, print the inventory path, run until interrupted")
    up.add_argument("--extra", type=int, default=0, help="add N benchmark hosts x01..xNN (127.0.3.N)")
    down = sub.add_parser("down", help="stop containers and unmount overlays of fleets whose owner died")
    down.add_argument("--force", action="store_true", help="also fleets whose owner is still running")
    sub.add_parser("base", help="build (or reuse) the cached base root and print its path")
    args = ap.parse_args(argv)

    if args.cmd == "base":
        print(builder.ensure_base())
        return 0
    if args.cmd == "down":
        for run in cleanup_stale(force=args.force):
            print(f"cleaned {run}")
        return 0

    def _stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    fleet = Fleet(extra=args.extra)
    try:
        fleet.up()
        print(fleet.inventory_path, flush=True)
        mem = fleet.memory_usage()
        print(f"# {len(fleet.hosts)} hosts; base {fleet.timings['base']:.1f} s, prepare "
              f"{fleet.timings['prepare']:.1f} s, boot {fleet.timings['boot']:.1f} s; memory (PSS) per host "
              f"{sum(mem.values()) / max(1, len(mem)) / 2**20:.1f} MiB", file=sys.stderr, flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        fleet.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
