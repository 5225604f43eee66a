"""Hosts from EC2: `--ec2 tag:cluster=ml --ec2 instance-state-name=running …` → HostSpecs.

Paginated DescribeInstances with the server-side filters; availability zone (name or ID) is
filtered here, from the results (moto 5.2 does not match its `availability-zone` filter, and the
AZ ID needs DescribeAvailabilityZones anyway). With `via="ssm"` the instances are joined with
DescribeInstanceInformation: each spec records its agent's PingStatus, so only `Online` instances
are sent commands and the rest get status unreachable with the reason. Labels: az, az_id, ami_id,
instance_type, instance_id, region and every tag (a tag named like a built-in label becomes `tag:NAME`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from ..aws.api import clients as aws_clients
from ..aws.api import pages, request_error
from ..aws.ssm import MAX_TARGET_KEYS, MAX_TARGET_VALUES, SSMSettings, ping_statuses
from ..errors import InputError, TransportError
from ..models import HostSpec, SSHOptions, TransportOptions

SERVER_FILTERS = (
    "image-id", "instance-state-name", "instance-type", "instance-id", "tag-key", "tag-value", "vpc-id",
    "subnet-id", "private-ip-address", "ip-address", "instance-lifecycle", "platform-details",
    "iam-instance-profile.arn", "key-name", "network-interface.group-id", "placement-group-name",
)
CLIENT_FILTERS = ("availability-zone", "availability-zone-id")
BUILTIN_LABELS = ("az", "az_id", "ami_id", "instance_type", "instance_id", "region", "name", "ssm_ping")
_VALUE = re.compile(r"^[^\x00-\x1f\x7f]{1,255}$")
_BAD_NAME = re.compile(r"[\s\x00-\x1f\x7f/]")


@dataclass(frozen=True)
class Ec2Filter:
    """One `--ec2 NAME=V1[,V2…]` filter."""

    name: str
    values: tuple[str, ...]

    @property
    def client_side(self) -> bool:
        return self.name in CLIENT_FILTERS


def parse_filter(text: str) -> Ec2Filter:
    """`tag:cluster=ml`, `image-id=ami-1,ami-2`, `availability-zone=us-east-1b` → Ec2Filter (InputError if bad)."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    values = tuple(v.strip() for v in raw.split(",") if v.strip())
    if not sep or not values:
        raise InputError(f"--ec2 {text!r}: use NAME=VALUE[,VALUE…], e.g. tag:cluster=ml")
    known = name in SERVER_FILTERS or name in CLIENT_FILTERS or (name.startswith("tag:") and len(name) > 4)
    if not known:
        raise InputError(f"--ec2 {text!r}: unknown filter {name!r} (use tag:KEY or one of "
                         f"{', '.join(SERVER_FILTERS + CLIENT_FILTERS)})")
    for value in values:
        if not _VALUE.match(value):
            raise InputError(f"--ec2 {text!r}: bad value {value!r}")
    return Ec2Filter(name, values)


@dataclass(frozen=True)
class Discovery:
    """What to look for and how the hosts will be reached."""

    filters: tuple[Ec2Filter, ...]
    via: str = "ssm"  # ssm | ssh
    ssh_address: str = "private"  # private | public
    ssh: SSHOptions = SSHOptions()
    ssm: SSMSettings = SSMSettings()
    # DescribeInstances MaxResults (5-1000): pages of 1,000, so a 100,000-instance account is 100 bounded
    # responses, never one the size of the fleet
    page_size: int | None = 1000


class Filter(TypedDict):
    """A DescribeInstances filter."""

    Name: str
    Values: list[str]


class Tag(TypedDict, total=False):
    Key: str
    Value: str


class Placement(TypedDict, total=False):
    AvailabilityZone: str


class Instance(TypedDict, total=False):
    """A DescribeInstances instance: the fields discovery reads, by AWS's names."""

    InstanceId: str
    ImageId: str
    InstanceType: str
    Placement: Placement
    Tags: list[Tag]
    PrivateIpAddress: str
    PublicIpAddress: str


def server_filters(filters: tuple[Ec2Filter, ...]) -> list[Filter]:
    """The DescribeInstances filters; instance state defaults to running."""
    out: list[Filter] = [{"Name": f.name, "Values": list(f.values)} for f in filters if not f.client_side]
    if not any(f.name == "instance-state-name" for f in filters):
        out.append({"Name": "instance-state-name", "Values": ["running"]})
    return out


def tag_targets(filters: tuple[Ec2Filter, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """SendCommand `Targets` equivalent to these filters (InputError when SSM cannot express them).

    Only `tag:KEY=…` filters (≤ 5 keys, ≤ 50 values each) and the default `instance-state-name=running`
    translate: any other filter would let SSM run the probe on instances discovery filtered out.
    """
    tags = tuple((f.name, f.values) for f in filters if f.name.startswith("tag:"))
    others = [f"{f.name}={','.join(f.values)}" for f in filters
              if not f.name.startswith("tag:") and (f.name, f.values) != ("instance-state-name", ("running",))]
    if not tags or others:
        raise InputError("--ssm-targets sends SSM the --ec2 tag:KEY=… filters as Targets; SSM cannot express "
                         + (f"{', '.join(others)} (drop --ssm-targets to send instance ids)" if others
                            else "a scan without a tag filter"))
    if len(tags) > MAX_TARGET_KEYS:
        raise InputError(f"--ssm-targets: SSM takes at most {MAX_TARGET_KEYS} tag keys, not {len(tags)}")
    for name, values in tags:
        if len(values) > MAX_TARGET_VALUES:
            raise InputError(f"--ssm-targets: SSM takes at most {MAX_TARGET_VALUES} values for {name}")
    return tags


def describe_instances(ec2: Any, filters: list[Filter], page_size: int | None = None) -> Iterator[Instance]:
    """Every instance matching `filters`, page by page as they are read: a caller keeps only what it needs
    of each (a parsed description is ~9 KB even as moto renders it; 100,000 of them held at once were ~0.9 GB,
    what `discover` keeps of each is ~2 KB)."""
    for page in pages(ec2, "describe_instances", "DescribeInstances", page_size, request_error, Filters=filters):
        for reservation in page.get("Reservations", []):
            yield from reservation.get("Instances", [])


def az_ids(ec2: Any) -> dict[str, str]:
    """AZ name → AZ ID (use1-az1…), the name that means the same place in every account."""
    try:
        zones = ec2.describe_availability_zones(AllAvailabilityZones=False)["AvailabilityZones"]
    except Exception:  # noqa: BLE001 - AZ IDs are a label nicety; discovery goes on without them
        return {}
    return {z["ZoneName"]: z["ZoneId"] for z in zones if z.get("ZoneId")}


def _tags(instance: Instance) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in instance.get("Tags") or []}


def labels_of(instance: Instance, zone_ids: dict[str, str], region: str) -> dict[str, str]:
    """az, az_id, ami_id, instance_type, instance_id, region and the instance's tags."""
    az = (instance.get("Placement") or {}).get("AvailabilityZone", "")
    labels = {"az": az, "az_id": zone_ids.get(az, ""), "ami_id": instance.get("ImageId", ""),
              "instance_type": instance.get("InstanceType", ""), "instance_id": instance["InstanceId"],
              "region": region}
    for key, value in _tags(instance).items():
        labels[f"tag:{key}" if key in BUILTIN_LABELS else key] = value
    return {k: v for k, v in labels.items() if v != ""}


def _matches(labels: dict[str, str], filters: tuple[Ec2Filter, ...]) -> bool:
    keys = {"availability-zone": "az", "availability-zone-id": "az_id"}
    return all(labels.get(keys[f.name]) in f.values for f in filters if f.client_side)


@dataclass(frozen=True)
class Found:
    """What discovery keeps of one instance's description: its labels, Name tag and addresses."""

    instance_id: str
    labels: dict[str, str]
    name_tag: str = ""
    private_ip: str = ""
    public_ip: str = ""


def found(instance: Instance, zone_ids: dict[str, str], region: str) -> Found:
    return Found(instance["InstanceId"], labels_of(instance, zone_ids, region), _tags(instance).get("Name", ""),
                 instance.get("PrivateIpAddress") or "", instance.get("PublicIpAddress") or "")


def host_names(instances: list[Found]) -> dict[str, str]:
    """Instance id → display name: its Name tag when that is unique and clean, else the instance id."""
    names = {i.instance_id: i.name_tag for i in instances}
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    ids = set(names)
    return {iid: name if name and counts[name] == 1 and not _BAD_NAME.search(name) and name not in ids else iid
            for iid, name in names.items()}


def discover(d: Discovery, clients: tuple[Any, Any] | None = None) -> tuple[list[HostSpec], list[str]]:
    """HostSpecs for the matching instances, and notes about instances left out (no address for SSH)."""
    ec2, ssm = clients or aws_clients(d.ssm.region, d.ssm.profile, "ec2", "ssm")
    region = ec2.meta.region_name
    zone_ids = az_ids(ec2)
    # each page reduced to what discovery keeps as it is read: never every instance's whole description
    kept = [f for f in (found(i, zone_ids, region) for i in describe_instances(ec2, server_filters(d.filters),
                                                                              d.page_size))
            if _matches(f.labels, d.filters)]
    names = host_names(kept)
    ping: dict[str, str] = {}
    if d.via == "ssm" and kept:
        try:
            ping = ping_statuses(ssm, [f.instance_id for f in kept])
        except TransportError as exc:
            raise TransportError(f"EC2 discovery: {exc}") from None
    specs: list[HostSpec] = []
    notes: list[str] = []
    settings = replace(d.ssm, region=region)
    for f in kept:
        iid, labels = f.instance_id, f.labels
        if d.via == "ssm":
            state = ping.get(iid, "NotManaged")
            labels["ssm_ping"] = state
            specs.append(HostSpec(names[iid], f"ssm://{iid}?region={region}", labels,
                                  options=TransportOptions(region=region, ssm=settings, ssm_ping=state)))
            continue
        address = f.private_ip if d.ssh_address == "private" else f.public_ip
        if not address:
            notes.append(f"{names[iid]} ({iid}) has no {d.ssh_address} IP address; left out")
            continue
        user = f"{d.ssh.user}@" if d.ssh.user else ""
        specs.append(HostSpec(names[iid], f"ssh://{user}{address}", labels, ssh=d.ssh))
    return specs, notes
