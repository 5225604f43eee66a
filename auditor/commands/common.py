"""Options and helpers shared by commands that reach hosts."""

from __future__ import annotations

import argparse
import re

from ..collect.probe import DEFAULT_BINARIES
from ..options import DEFAULT_PARALLEL, TargetOptions
from .aws_options import add_aws_options, aws_from_args
from .checks import MAX_DEADLINE_S, MAX_PARALLEL, bounded_float, bounded_int

DEEP_AREAS = ("cpu",)


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """TARGET…, -i INVENTORY and the knobs of a collection run."""
    parser.add_argument("targets", nargs="*", metavar="TARGET",
                        help="local, ssh://[user@]host[:port], ssm://i-…[?region=…], image:///path, "
                             "ami://ami-…[?region=…]")
    parser.add_argument("-i", "--inventory", action="append", default=[], metavar="FILE",
                        help="inventory YAML (hosts, labels, SSH options); repeatable")
    parser.add_argument("--parallel", type=bounded_int(1, MAX_PARALLEL), default=DEFAULT_PARALLEL, metavar="N",
                        help=f"hosts at once, 1-{MAX_PARALLEL} (default {DEFAULT_PARALLEL})")
    parser.add_argument("--deadline", type=bounded_float(0.0, MAX_DEADLINE_S), default=60.0, metavar="SECONDS",
                        help=f"wall-clock limit per host, at most {MAX_DEADLINE_S:.0f} (default 60)")
    parser.add_argument("--binary", action="append", default=None, metavar="NAME",
                        help=f"key binary to fingerprint (repeatable; default: {', '.join(DEFAULT_BINARIES)})")
    parser.add_argument("--exec-versions", action="store_true",
                        help="also run `BINARY --version` (as the probe's user, usually root) when the file and "
                             "every directory above it are root-owned and writable by root only; off by default")
    parser.add_argument("--deep", action="append", choices=DEEP_AREAS, default=[], metavar="AREA",
                        help="opt-in deeper looks: `cpu` samples the hottest core's kernel stacks with the "
                             "host's perf for 0.5 s (facts.cpu_stack; hosts without perf say 'not available')")
    add_aws_options(parser)


def target_options(args: argparse.Namespace) -> TargetOptions:
    """The typed TargetOptions of a command that called add_target_options()."""
    return TargetOptions(
        targets=tuple(args.targets), inventories=tuple(args.inventory), parallel=args.parallel,
        deadline_s=args.deadline, binaries=tuple(args.binary or DEFAULT_BINARIES),
        exec_versions=args.exec_versions, deep_cpu="cpu" in args.deep, aws=aws_from_args(args),
    )


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_stem(name: str) -> str:
    """A host name made safe as a file name."""
    return _UNSAFE.sub("_", name).strip("._") or "host"
