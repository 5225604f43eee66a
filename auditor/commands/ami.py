"""`ami-auditor ami cleanup`: delete the EBS volumes that killed `ami://` runs left behind.

Only volumes carrying this tool's tag are considered, and only those whose expiry tag has passed
(`--all`: every tagged volume, also those of scans still running). A leftover mount of such a run on this
machine (below /run/ami-auditor) is unmounted first; an attached volume is detached, then deleted.
"""

from __future__ import annotations

import argparse
import os

from .. import exitcodes
from ..context import Env
from ..errors import AuditorError, TransportError
from .aws_options import REGION_RE, checked


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ami", help="ami:// housekeeping (cleanup of volumes left by killed runs)")
    ami_sub = p.add_subparsers(dest="ami_command", metavar="SUBCOMMAND")
    ami_sub.required = True
    c = ami_sub.add_parser("cleanup", help="delete tagged scan volumes whose expiry has passed")
    c.add_argument("--region", type=checked(REGION_RE, "region"), help="AWS region")
    c.add_argument("--profile", metavar="NAME", help="AWS profile")
    c.add_argument("--all", action="store_true", help="also volumes not yet expired (scans still running lose theirs)")
    c.add_argument("--dry-run", action="store_true", help="list what would be deleted, change nothing")
    c.set_defaults(func=cleanup)


def _run_id(vol: dict) -> str:
    from ..transport.ami_aws import RUN_TAG

    return next((str(t.get("Value")) for t in vol.get("Tags") or [] if t.get("Key") == RUN_TAG), "")


def cleanup(args: argparse.Namespace, env: Env) -> int:
    from ..aws.api import clients as aws_clients
    from ..transport import ami_aws, ami_disk

    try:
        (ec2,) = aws_clients(args.region, args.profile, "ec2")
        found = ami_aws.orphans(ec2, include_unexpired=args.all)
    except TransportError as exc:
        raise AuditorError(str(exc)) from None
    failed = 0
    for vol in found:
        vid, run = str(vol.get("VolumeId")), _run_id(vol)
        if args.dry_run:
            env.out(f"would delete {vid} of run {run or '?'} ({vol.get('State')})")
            continue
        try:
            if run:
                for point in ami_disk.leftover_mounts():
                    if os.path.basename(point).startswith(f"{run}-"):
                        ami_disk.unmount(point)
                        env.out(f"unmounted {point}")
            env.out(ami_aws.delete_orphan(ec2, vol))
        except (TransportError, OSError) as exc:
            failed += 1
            env.err(f"ami-auditor: {vid}: {exc}")
    verb = "would be deleted" if args.dry_run else "deleted"
    env.out(f"{len(found) - failed} volume(s) {verb}" + (f", {failed} failed" if failed else ""))
    return exitcodes.decide(exitcodes.Outcome(incomplete=failed > 0))
