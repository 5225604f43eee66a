"""Typed target resolution: TargetOptions → the HostSpecs of a run (targets, inventories, EC2 discovery).

Every input file is validated before EC2 discovery calls AWS, and discovery happens before any host is
contacted; bad input is an InputError (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import cache
from importlib import resources
from urllib.parse import urlsplit

from ..errors import InputError
from ..models import AmiSettings, HostSpec, SSHOptions, SSMSettings
from ..options import AwsOptions, TargetOptions
from .ec2 import BUILTIN_LABELS, Discovery, discover, tag_targets
from .inventory import inventory_hosts, safe_target, targets_from_args

# --ssh-* option → SSHOptions field: given on the command line, they fill what an ssh:// host leaves unset
SSH_FLAGS = {"ssh_user": "user", "ssh_identity": "identity_file", "ssh_known_hosts": "known_hosts",
             "ssh_config": "ssh_config"}


def ssm_settings(aws: AwsOptions) -> SSMSettings:
    return SSMSettings(
        region=aws.region, profile=aws.profile,
        document=None if aws.ssm_run_shell_script else aws.ssm_document,
        s3_bucket=aws.ssm_s3_bucket, s3_prefix=aws.ssm_s3_prefix, poll_interval_s=aws.ssm_poll_interval,
        max_concurrency=aws.ssm_max_concurrency or "50", max_errors=aws.ssm_max_errors or "10%",
    )


def check_aws_options(aws: AwsOptions) -> None:
    """Options that only mean something together (InputError otherwise, before AWS is called)."""
    if aws.ssm_targets and (not aws.ec2 or aws.via != "ssm"):
        raise InputError("--ssm-targets needs --ec2 tag:KEY=… with --via ssm")
    for name in ("ssm_max_concurrency", "ssm_max_errors"):
        if getattr(aws, name) and not aws.ssm_targets:
            raise InputError(f"--{name.replace('_', '-')} needs --ssm-targets (instance-id batches run at once)")


def discovered_hosts(aws: AwsOptions, notes: list[str] | None = None) -> list[HostSpec]:
    """Run EC2 discovery when --ec2 was given (an InputError when nothing matches)."""
    check_aws_options(aws)
    if not aws.ec2:
        return []
    settings = ssm_settings(aws)
    if aws.ssm_targets:
        settings = replace(settings, targets=tag_targets(aws.ec2))
    ssh = SSHOptions(user=aws.ssh_user, identity_file=aws.ssh_identity, known_hosts=aws.ssh_known_hosts,
                     ssh_config=aws.ssh_config)
    specs, left_out = discover(Discovery(aws.ec2, via=aws.via, ssh_address=aws.ssh_address, ssh=ssh, ssm=settings))
    if notes is not None:
        notes.extend(left_out)
    if not specs:
        shown = " ".join(f"--ec2 {f.name}={','.join(f.values)}" for f in aws.ec2)
        raise InputError(f"no EC2 instances match {shown}")
    return specs


def with_ssm_settings(specs: list[HostSpec], aws: AwsOptions) -> list[HostSpec]:
    """Give every ssm:// target from the command line or an inventory this run's SSM settings."""
    settings = ssm_settings(aws)
    return [replace(s, options=replace(s.options, ssm=s.options.ssm or settings))
            if s.target.startswith("ssm://") else s for s in specs]


def with_ami_settings(specs: list[HostSpec], aws: AwsOptions) -> list[HostSpec]:
    """Give every ami:// target this run's region/profile/--az/--attach-to."""
    if not any(s.target.startswith("ami://") for s in specs):
        return specs
    settings = AmiSettings(region=aws.region, profile=aws.profile, az=aws.az, attach_to=aws.attach_to)
    return [replace(s, options=replace(s.options, ami=s.options.ami or settings))
            if s.target.startswith("ami://") else s for s in specs]


def with_ssh_options(specs: list[HostSpec], aws: AwsOptions, direct: Sequence[HostSpec] = ()) -> list[HostSpec]:
    """Give every ssh:// host the --ssh-* values it does not set itself (an inventory's own values win).

    InputError when an option reaches no ssh:// host, or --ssh-user contradicts the user in the URL of a
    `direct` (command-line) target; an inventory host's URL user is its own value, and wins."""
    given = {flag: getattr(aws, flag) for flag in SSH_FLAGS if getattr(aws, flag)}
    if not given:
        return specs
    if not any(s.target.startswith("ssh://") for s in specs) and not (aws.ec2 and aws.via == "ssh"):
        flag = next(iter(given))
        raise InputError(f"--{flag.replace('_', '-')} applies to ssh:// hosts (targets, inventory hosts, "
                         "--ec2 … --via ssh), and none is given")
    out = []
    for spec in specs:
        if not spec.target.startswith("ssh://"):
            out.append(spec)
            continue
        url_user = urlsplit(spec.target).username
        if aws.ssh_user and url_user and url_user != aws.ssh_user and spec in direct:
            raise InputError(f"--ssh-user {aws.ssh_user} and {safe_target(spec.target, quote=False)} name "
                             "different users; give one")
        fill = {field: value for flag, value in given.items()
                if getattr(spec.ssh, field := SSH_FLAGS[flag]) is None}
        out.append(replace(spec, ssh=replace(spec.ssh, **fill)))
    return out


def resolve_specs(opts: TargetOptions, notes: list[str] | None = None) -> list[HostSpec]:
    """Hosts from targets, inventories and --ec2 discovery; duplicate names are an input error.

    `notes` receives run-wide remarks from discovery (instances left out and why)."""
    check_aws_options(opts.aws)
    direct = targets_from_args(list(opts.targets), check_paths=True)
    specs: list[HostSpec] = list(direct)
    names = _Names()
    for spec in direct:
        names.claim(spec.name, "a command-line target")
    specs.extend(inventory_specs(opts.inventories, names))
    specs = with_ssh_options(specs, opts.aws, direct)  # before discovery: a bad combination calls no API
    if opts.aws.ec2:  # after every input file is validated: discovery calls AWS
        for spec in discovered_hosts(opts.aws, notes):
            names.claim(spec.name, f"EC2 instance {spec.labels.get('instance_id', '?')} (--ec2)")
            specs.append(spec)
    specs = with_ami_settings(with_ssm_settings(specs, opts.aws), opts.aws)
    if not specs:
        raise InputError("no targets: give TARGET…, -i INVENTORY or --ec2 FILTER (try `local`)")
    if opts.parallel < 1:
        raise InputError("--parallel must be at least 1")
    return specs


def inventory_specs(paths: Iterable[str], names: _Names | None = None) -> list[HostSpec]:
    """The hosts of every inventory, in order; a name given twice (here or before, in `names`) is an
    InputError naming both places."""
    names = names or _Names()
    specs: list[HostSpec] = []
    for path in paths:
        for spec, line in inventory_hosts(path, check_paths=True):
            names.claim(spec.name, f"{path}:{line}" if line else path, path, line)
            specs.append(spec)
    return specs


class _Names:
    """Host names already given, and where: a name given twice is an error naming both places."""

    def __init__(self) -> None:
        self.where: dict[str, str] = {}

    def claim(self, name: str, where: str, path: str | None = None, line: int | None = None) -> None:
        if name in self.where:
            again = "" if path else f" by {where}"
            raise InputError(f"host name {name!r} given twice{again} (first: {self.where[name]}); a host name "
                             "must be unique across targets, inventories and --ec2", path, line)
        self.where[name] = where


@cache
def builtin_keys() -> frozenset[str]:
    """Host attributes every snapshot can carry: `name`, the snapshot's `host` fields, EC2 labels."""
    text = resources.files("auditor.schemas").joinpath("snapshot.schema.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    host = schema["properties"]["host"].get("properties") or {}
    return frozenset({"name", *host, *BUILTIN_LABELS})


def check_host_keys(keys: Iterable[tuple[str, str]], specs: Sequence[HostSpec]) -> None:
    """Each (option, key) that is not a fact path must be a built-in key or a label some host defines.

    Called after targets are resolved (with --ec2, after discovery, since tags become labels only then)
    and before any host is contacted.
    """
    known = builtin_keys() | {label for spec in specs for label in spec.labels}
    for option, key in keys:
        if key.startswith("facts.") or key in known:
            continue
        labels = sorted({label for spec in specs for label in spec.labels})
        where = f"; labels defined by the targets: {', '.join(labels)}" if labels else "; no target defines labels"
        raise InputError(f"{option}: unknown label {key!r}: not a built-in key ({', '.join(sorted(builtin_keys()))}), "
                         f"not a fact path (facts.…) and no host defines it{where}")
