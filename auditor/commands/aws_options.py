"""Command-line options for AWS: EC2 discovery (`--ec2`, `--via`), region/profile and SSM settings."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import replace

from ..errors import InputError
from ..models import HostSpec, SSHOptions
from ..targets.ec2 import Discovery, discover, parse_filter
from ..transport.ssm import RUN_SHELL_SCRIPT, SSMSettings
from ..transport.ssm_document import DOCUMENT_NAME

REGION_RE = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+$")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
DOC_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{3,128}$")


def checked(pattern: re.Pattern[str], what: str) -> Callable[[str], str]:
    """An argparse `type=` that accepts only values matching `pattern` (else InputError, exit 2)."""

    def check(value: str) -> str:
        if not pattern.match(value):
            raise InputError(f"bad {what} {value!r}")
        return value
    return check


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if number <= 0:
        raise InputError(f"expected a positive number of seconds, not {value!r}")
    return number


def add_aws_options(parser: argparse.ArgumentParser) -> None:
    """--ec2/--via/--ssh-address/--ssh-user, --region/--profile and the --ssm-* knobs."""
    g = parser.add_argument_group("AWS (EC2 discovery, SSM Run Command)")
    g.add_argument("--ec2", action="append", default=[], type=parse_filter, metavar="FILTER",
                   help="discover EC2 instances: tag:KEY=V[,V…], image-id=…, instance-state-name=… "
                        "(default running), availability-zone=… (client-side); repeatable, all must match")
    g.add_argument("--via", choices=("ssm", "ssh"), default="ssm", help="reach discovered instances by (default ssm)")
    g.add_argument("--ssh-address", choices=("private", "public"), default="private",
                   help="with --via ssh: which IP address to use (default private)")
    g.add_argument("--ssh-user", metavar="USER", help="with --via ssh: login user (default: ssh_config / you)")
    g.add_argument("--region", type=checked(REGION_RE, "region"), help="AWS region (default: AWS_REGION / profile)")
    g.add_argument("--profile", metavar="NAME", help="AWS profile (default: the normal credential chain)")
    g.add_argument("--ssm-document", type=checked(DOC_NAME_RE, "SSM document name"), default=DOCUMENT_NAME,
                   metavar="NAME", help=f"the ami-auditor SSM document (default {DOCUMENT_NAME})")
    g.add_argument("--ssm-run-shell-script", action="store_true",
                   help=f"send the probe with {RUN_SHELL_SCRIPT} instead (needs broader IAM rights)")
    g.add_argument("--ssm-s3-bucket", type=checked(BUCKET_RE, "S3 bucket name"), metavar="BUCKET",
                   help="SSM writes full output here; read when the 24,000-character inline output is cut")
    g.add_argument("--ssm-s3-prefix", default="ami-auditor", metavar="PREFIX", help="key prefix (default ami-auditor)")
    g.add_argument("--ssm-poll-interval", type=_positive, default=1.0, metavar="SECONDS",
                   help="first status poll after (grows to 5×, jittered; default 1)")


def ssm_settings(args: argparse.Namespace) -> SSMSettings:
    return SSMSettings(
        region=getattr(args, "region", None), profile=getattr(args, "profile", None),
        document=None if getattr(args, "ssm_run_shell_script", False) else getattr(args, "ssm_document", DOCUMENT_NAME),
        s3_bucket=getattr(args, "ssm_s3_bucket", None), s3_prefix=getattr(args, "ssm_s3_prefix", "ami-auditor"),
        poll_interval_s=getattr(args, "ssm_poll_interval", 1.0),
    )


def discovered_hosts(args: argparse.Namespace, notes: list[str] | None = None) -> list[HostSpec]:
    """Run EC2 discovery when --ec2 was given (an InputError when nothing matches)."""
    filters = tuple(getattr(args, "ec2", None) or ())
    if not filters:
        return []
    d = Discovery(filters, via=args.via, ssh_address=args.ssh_address,
                  ssh=SSHOptions(user=args.ssh_user), ssm=ssm_settings(args))
    specs, left_out = discover(d)
    if notes is not None:
        notes.extend(left_out)
    if not specs:
        shown = " ".join(f"--ec2 {f.name}={','.join(f.values)}" for f in filters)
        raise InputError(f"no EC2 instances match {shown}")
    return specs


def with_ssm_settings(specs: list[HostSpec], args: argparse.Namespace) -> list[HostSpec]:
    """Give every ssm:// target from the command line or an inventory this run's SSM settings."""
    settings = ssm_settings(args)
    return [replace(s, options={**s.options, "ssm": s.options.get("ssm") or settings})
            if s.target.startswith("ssm://") else s for s in specs]
