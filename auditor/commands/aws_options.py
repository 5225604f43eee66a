"""Command-line options for AWS: EC2 discovery (`--ec2`, `--via`), region/profile and SSM settings."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from ..aws.ssm import DOCUMENT_NAME, RUN_SHELL_SCRIPT
from ..options import AwsOptions
from ..targets.ec2 import parse_filter
from .checks import bounded_float

REGION_RE = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+$")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
AZ_RE = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+[a-z]$")
INSTANCE_RE = re.compile(r"^i-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
DOC_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{3,128}$")
# SendCommand's documented patterns for MaxConcurrency / MaxErrors
CONCURRENCY_RE = re.compile(r"^([1-9][0-9]*|[1-9][0-9]%|[1-9]%|100%)$")
ERRORS_RE = re.compile(r"^([1-9][0-9]*|0|[1-9][0-9]%|[0-9]%|100%)$")
MAX_POLL_INTERVAL_S = 300.0


def checked(pattern: re.Pattern[str], what: str) -> Callable[[str], str]:
    """An argparse `type=` that accepts only values matching `pattern` (else an argparse error: exit 2)."""

    def check(value: str) -> str:
        if not pattern.match(value):  # argparse prefixes the option: "argument --region: bad region …"
            raise argparse.ArgumentTypeError(f"bad {what} {value!r}")
        return value
    return check


_positive = bounded_float(0.0, MAX_POLL_INTERVAL_S)  # finite: nan/inf refused


def _file(value: str) -> str:
    path = os.path.expanduser(value)
    if not os.path.isfile(path):
        raise argparse.ArgumentTypeError(f"no such file: {value}")
    return path


def add_aws_options(parser: argparse.ArgumentParser) -> None:
    """--ec2/--via/--ssh-address, --ssh-* (add_ssh_options), --region/--profile, --ssm-*, ami://'s --az/--attach-to."""
    g = parser.add_argument_group("AWS (EC2 discovery, SSM Run Command, ami:// volumes)")
    g.add_argument("--ec2", action="append", default=[], type=parse_filter, metavar="FILTER",
                   help="discover EC2 instances: tag:KEY=V[,V…], image-id=…, instance-state-name=… "
                        "(default running), availability-zone=… (client-side); repeatable, all must match")
    g.add_argument("--via", choices=("ssm", "ssh"), default="ssm", help="reach discovered instances by (default ssm)")
    g.add_argument("--ssh-address", choices=("private", "public"), default="private",
                   help="with --via ssh: which IP address to use (default private)")
    add_ssh_options(g)
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
    g.add_argument("--ssm-targets", action="store_true",
                   help="with --ec2 tag:…: ONE SendCommand with the tags as Targets instead of instance-id batches")
    g.add_argument("--ssm-max-concurrency", type=checked(CONCURRENCY_RE, "MaxConcurrency"), metavar="N|N%",
                   help="with --ssm-targets: instances running the probe at once (default 50)")
    g.add_argument("--ssm-max-errors", type=checked(ERRORS_RE, "MaxErrors"), metavar="N|N%",
                   help="with --ssm-targets: SSM stops sending after more failures than this (default 10%%)")
    add_ami_options(g)


def add_ssh_options(g: argparse._ArgumentGroup) -> None:
    """--ssh-*: for ssh:// targets, inventory ssh:// hosts (their own values win) and --ec2 … --via ssh."""
    where = "for ssh:// targets and --ec2 … --via ssh (an inventory host's own value wins)"
    g.add_argument("-l", "--ssh-user", metavar="USER",
                   help=f"login user {where}; default: the URL's user, ssh_config, you")
    g.add_argument("--ssh-identity", type=_file, metavar="FILE", help=f"private key file {where}")
    g.add_argument("--ssh-known-hosts", type=_file, metavar="FILE",
                   help=f"known_hosts file to verify host keys against {where} (default ~/.ssh/known_hosts)")
    g.add_argument("-F", "--ssh-config", type=_file, metavar="FILE", help=f"ssh_config file {where}")


def add_ami_options(g: argparse._ArgumentGroup) -> None:
    """--az/--attach-to: where an ami:// target's volume is made and attached (default: this instance, IMDS)."""
    g.add_argument("--az", type=checked(AZ_RE, "availability zone"), metavar="AZ",
                   help="ami://: create the volume in this AZ (default: the scanning instance's, from IMDS)")
    g.add_argument("--attach-to", type=checked(INSTANCE_RE, "instance id"), metavar="INSTANCE_ID",
                   help="ami://: attach the volume to this instance (default: the scanning instance, from IMDS); "
                        "it must be the machine running ami-auditor, which mounts the volume")


def aws_from_args(args: argparse.Namespace) -> AwsOptions:
    """The typed AWS options of a parsed command line (a command without some option gets its default)."""
    default = AwsOptions()
    given: dict[str, Any] = {f.name: getattr(args, f.name, None) for f in fields(AwsOptions)}
    values = {name: getattr(default, name) if value is None else value for name, value in given.items()}
    values["ec2"] = tuple(values["ec2"])
    return AwsOptions(**values)
