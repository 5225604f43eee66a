"""`python -m tests.fleet up [--extra N | --releases bullseye,trixie]` keeps a fleet running until
Ctrl-C/SIGTERM; `python -m tests.fleet down [--force]` cleans leftovers; `python -m tests.fleet base
[--release R]` builds a base root."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from . import builder
from .fleet import RELEASES_STATE_ROOT, STATE_ROOT, Fleet, cleanup_stale


def _releases(text: str) -> list[str]:
    names = [r for r in text.split(",") if r]
    for r in names:
        if r not in builder.RELEASES:
            raise argparse.ArgumentTypeError(f"unknown release {r!r}; one of {', '.join(builder.RELEASES)}")
    return names


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(prog="python -m tests.fleet", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="boot the fleet, print the inventory path, run until interrupted")
    up.add_argument("--extra", type=int, default=0, help="add N benchmark hosts x01..xNN (127.0.NET+1.N)")
    up.add_argument("--releases", type=_releases, default=None,
                    help="instead: the multi-release fleet, <release>-a/-b per release (e.g. bullseye,trixie)")
    down = sub.add_parser("down", help="stop containers and unmount overlays of fleets whose owner died")
    down.add_argument("--force", action="store_true", help="also fleets whose owner is still running")
    base = sub.add_parser("base", help="build (or reuse) the cached base root and print its path")
    base.add_argument("--release", choices=builder.RELEASES, default=builder.RELEASE)
    args = ap.parse_args(argv)

    if args.cmd == "base":
        print(builder.ensure_base(args.release))
        return 0
    if args.cmd == "down":
        for root in (STATE_ROOT, RELEASES_STATE_ROOT):
            for run in cleanup_stale(force=args.force, root=root):
                print(f"cleaned {run}")
        return 0

    def _stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    fleet = Fleet(extra=args.extra, releases=args.releases)
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
