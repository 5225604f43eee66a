"""Options and helpers shared by commands that reach hosts."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from .. import textsafe
from ..atomicio import write_text_atomic
from ..collect.probe import DEFAULT_BINARIES
from ..context import Env
from ..errors import InputError
from ..models import HostResult, HostSpec
from .aws_options import add_aws_options, check_aws_options, discovered_hosts, with_ssm_settings
from .checks import MAX_DEADLINE_S, MAX_PARALLEL, bounded_float, bounded_int


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """TARGET…, -i INVENTORY and the knobs of a collection run."""
    parser.add_argument("targets", nargs="*", metavar="TARGET",
                        help="local, ssh://[user@]host[:port], ssm://i-…[?region=…], image:///path")
    parser.add_argument("-i", "--inventory", action="append", default=[], metavar="FILE",
                        help="inventory YAML (hosts, labels, SSH options); repeatable")
    parser.add_argument("--parallel", type=bounded_int(1, MAX_PARALLEL), default=8, metavar="N",
                        help=f"hosts at once, 1-{MAX_PARALLEL} (default 8)")
    parser.add_argument("--deadline", type=bounded_float(0.0, MAX_DEADLINE_S), default=60.0, metavar="SECONDS",
                        help=f"wall-clock limit per host, at most {MAX_DEADLINE_S:.0f} (default 60)")
    parser.add_argument("--binary", action="append", default=None, metavar="NAME",
                        help=f"key binary to fingerprint (repeatable; default: {', '.join(DEFAULT_BINARIES)})")
    parser.add_argument("--exec-versions", action="store_true",
                        help="also run `BINARY --version` (as the probe's user, usually root) when the file and "
                             "every directory above it are root-owned and writable by root only; off by default")
    add_aws_options(parser)


def resolve_specs(args: argparse.Namespace) -> list[HostSpec]:
    """Hosts from targets and inventories; duplicate names are an input error."""
    from ..targets.inventory import load_inventory, targets_from_args

    check_aws_options(args)
    specs: list[HostSpec] = list(targets_from_args(args.targets, check_paths=True))
    for path in args.inventory:
        specs.extend(load_inventory(path, check_paths=True))
    args.notes = getattr(args, "notes", None) or []
    if getattr(args, "ec2", None):  # after every input file is validated: discovery calls AWS
        args.ec2_hosts = discovered_hosts(args, args.notes)
    extra = getattr(args, "ec2_hosts", None)
    if extra:
        specs.extend(extra)
    specs = with_ssm_settings(specs, args)
    if not specs:
        raise InputError("no targets: give TARGET…, -i INVENTORY or --ec2 FILTER (try `local`)")
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise InputError(f"host name {spec.name!r} given twice")
        seen.add(spec.name)
    if args.parallel < 1:
        raise InputError("--parallel must be at least 1")
    return specs


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_stem(name: str) -> str:
    """A host name made safe as a file name."""
    return _UNSAFE.sub("_", name).strip("._") or "host"


def write_json(path: Path, doc: Any) -> None:
    """Write JSON atomically (unique temp file in the same directory + rename; removed on failure)."""
    write_text_atomic(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")


def progress_printer(env: Env):
    """A progress callback that writes to stderr only when it is a terminal."""
    if not env.progress:
        return None

    def show(result: HostResult, done: int, total: int) -> None:
        env.err(f"[{done}/{total}] {result.name}: {result.status}")

    return show


def one_line(result: HostResult) -> str:
    """`name  status  1.2s  facts…` — the per-host summary line (host text's control characters escaped)."""
    if result.status != "ok" or not result.snapshot:
        line = f"{result.name:<20} {result.status:<18} {result.duration_s:5.1f}s  {result.error or ''}"
        return textsafe.one_line(line)
    snap = result.snapshot
    facts = snap["facts"]
    os_name = (facts.get("os") or {}).get("pretty_name") or "?"
    kernel = (facts.get("kernel") or {}).get("release") or "?"
    systemd = facts.get("systemd") or {}
    units = systemd.get("units") or []
    looping = [u["name"] for u in units if (u.get("restarts") or 0) > 0]
    dying = ((facts.get("cgroups") or {}).get("memory") or {}).get("dying")
    bits = [os_name, f"kernel {kernel}", f"{len(systemd.get('enabled_units') or [])} enabled units"]
    if looping:
        bits.append("restarting: " + ",".join(looping[:3]))
    bits.append(f"dying memcgs {dying if dying is not None else '?'}")
    if snap.get("errors"):
        bits.append("errors: " + ",".join(sorted(snap["errors"])))
    if snap.get("not_applicable"):
        bits.append("n/a: " + ",".join(sorted(snap["not_applicable"])))
    return textsafe.one_line(f"{result.name:<20} {'ok':<18} {result.duration_s:5.1f}s  " + "; ".join(bits))
