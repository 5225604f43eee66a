"""The EC2 side of an `ami://` audit: the image, and the one EBS volume made from its root snapshot.

Every volume is created with its tags in the same call (tool, run id, AMI id, expiry), so the IAM policy
can allow CreateVolume only with those tags and Attach/Detach/DeleteVolume only on volumes that carry
them (docs/iam-policy.json); `ami-auditor ami cleanup` finds the ones a killed run left behind by the
same tags. Waits poll DescribeVolumes with their own deadline (boto3's waiters sleep 15 s a round).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from .. import interrupt
from ..aws.api import error_for_aws, pages
from ..errors import TransportError

TOOL_TAG, TOOL = "ami-auditor:tool", "ami-auditor"
RUN_TAG = "ami-auditor:run-id"
AMI_TAG = "ami-auditor:ami-id"
EXPIRES_TAG = "ami-auditor:expires"
DEVICE_NAMES = tuple(f"/dev/sd{c}" for c in "fghijklmnop")  # EC2's recommended names for attached EBS volumes
MAX_TEXT = 256  # image name/description are the image owner's text: bounded before they become labels
_SNAPSHOT_RE = re.compile(r"^snap-[0-9a-f]{8,17}$")


@dataclass(frozen=True)
class Image:
    """What DescribeImages says about the AMI to audit."""

    ami_id: str
    name: str
    creation_date: str
    root_device: str
    root_snapshot: str
    other_snapshots: tuple[str, ...]  # further EBS volumes of the image (not attached: see README)

    def labels(self) -> dict[str, str]:
        return {"ami_id": self.ami_id, "ami_name": self.name, "creation_date": self.creation_date}


def describe_image(ec2: Any, ami_id: str) -> Image:
    """DescribeImages → the root EBS snapshot (TransportError when the image is missing or not EBS-backed)."""
    try:
        images = ec2.describe_images(ImageIds=[ami_id]).get("Images") or []
    except Exception as exc:  # noqa: BLE001 - botocore raises many types; all become the host's error
        raise error_for_aws(exc, "DescribeImages") from None
    if not images:
        raise TransportError(f"DescribeImages: no image {ami_id} visible to this account in this region")
    img = images[0]
    if img.get("State") not in (None, "available"):
        raise TransportError(f"image {ami_id} is {str(img.get('State'))[:40]!r}, not available")
    root = str(img.get("RootDeviceName") or "")
    snapshots: dict[str, str] = {}
    for mapping in img.get("BlockDeviceMappings") or []:
        snap = (mapping.get("Ebs") or {}).get("SnapshotId")
        if snap and _SNAPSHOT_RE.match(str(snap)):
            snapshots[str(mapping.get("DeviceName") or "")] = str(snap)
    root_snap = snapshots.pop(root, None)
    if root_snap is None:
        raise TransportError(f"image {ami_id} has no EBS snapshot for its root device {root[:40]!r} "
                             "(instance-store AMIs cannot be audited by id)")
    return Image(ami_id=ami_id, name=str(img.get("Name") or "")[:MAX_TEXT],
                 creation_date=str(img.get("CreationDate") or "")[:64], root_device=root,
                 root_snapshot=root_snap, other_snapshots=tuple(snapshots.values()))


def instance_placement(ec2: Any, instance_id: str) -> tuple[str, set[str]]:
    """(AZ, device names in use) of the instance the volume will be attached to."""
    try:
        reservations = ec2.describe_instances(InstanceIds=[instance_id]).get("Reservations") or []
    except Exception as exc:  # noqa: BLE001
        raise error_for_aws(exc, "DescribeInstances") from None
    instances = [i for r in reservations for i in r.get("Instances") or []]
    if not instances:
        raise TransportError(f"DescribeInstances: no instance {instance_id}")
    inst = instances[0]
    used = {str(m.get("DeviceName")) for m in inst.get("BlockDeviceMappings") or []}
    used.add(str(inst.get("RootDeviceName") or ""))
    return str((inst.get("Placement") or {}).get("AvailabilityZone") or ""), used


def free_device_name(used: set[str]) -> str:
    """The first of /dev/sdf…sdp the instance does not use (xvdX counts as sdX)."""
    taken = {u.replace("/dev/xvd", "/dev/sd") for u in used}
    for name in DEVICE_NAMES:
        if name not in taken:
            return name
    raise TransportError("the scanning instance has no free device name in /dev/sdf…/dev/sdp")


def tags(run_id: str, ami_id: str, expires: datetime) -> list[dict[str, str]]:
    return [
        {"Key": TOOL_TAG, "Value": TOOL},
        {"Key": RUN_TAG, "Value": run_id},
        {"Key": AMI_TAG, "Value": ami_id},
        {"Key": EXPIRES_TAG, "Value": expires.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")},
        {"Key": "Name", "Value": f"ami-auditor scan of {ami_id}"},
    ]


def _poll(check: Callable[[], bool], deadline: float, what: str, interruptible: bool = True) -> None:
    """Call `check` until it is true; 0.2 s growing to 2 s between calls; TransportError past `deadline`."""
    pause = 0.2
    while not check():
        left = deadline - time.monotonic()
        if left <= 0:
            raise TransportError(f"{what}: not done in time")
        if interruptible:
            interrupt.wait(min(pause, left))
        else:
            time.sleep(min(pause, left))
        pause = min(2.0, pause * 1.5)


class Volumes:
    """Creates, attaches, detaches and deletes the run's volume; each call is one step of the lifecycle."""

    def __init__(self, ec2: Any, run_id: str, expires: datetime):
        self.ec2 = ec2
        self.run_id = run_id
        self.expires = expires

    def create(self, image: Image, az: str) -> str:
        try:
            vol = self.ec2.create_volume(
                AvailabilityZone=az, SnapshotId=image.root_snapshot, VolumeType="gp3",
                TagSpecifications=[{"ResourceType": "volume", "Tags": tags(self.run_id, image.ami_id, self.expires)}])
        except Exception as exc:  # noqa: BLE001
            raise error_for_aws(exc, "CreateVolume") from None
        return str(vol["VolumeId"])

    def describe(self, volume_id: str) -> dict[str, Any] | None:
        try:
            vols = self.ec2.describe_volumes(VolumeIds=[volume_id]).get("Volumes") or []
        except Exception as exc:  # noqa: BLE001
            if "InvalidVolume.NotFound" in str(exc):
                return None
            raise error_for_aws(exc, "DescribeVolumes") from None
        return vols[0] if vols else None

    def wait_state(self, volume_id: str, state: str, deadline: float, interruptible: bool = True) -> None:
        def done() -> bool:
            vol = self.describe(volume_id)
            if vol is None:
                raise TransportError(f"volume {volume_id} vanished while waiting for {state!r}")
            if vol.get("State") == "error":
                raise TransportError(f"volume {volume_id} is in state 'error'")
            if state == "attached":
                return any(a.get("State") == "attached" for a in vol.get("Attachments") or [])
            return vol.get("State") == state
        _poll(done, deadline, f"volume {volume_id} to become {state}", interruptible)

    def attach(self, volume_id: str, instance_id: str, device: str) -> None:
        try:
            self.ec2.attach_volume(VolumeId=volume_id, InstanceId=instance_id, Device=device)
        except Exception as exc:  # noqa: BLE001
            raise error_for_aws(exc, "AttachVolume") from None

    def detach(self, volume_id: str, instance_id: str, device: str) -> None:
        try:
            self.ec2.detach_volume(VolumeId=volume_id, InstanceId=instance_id, Device=device)
        except Exception as exc:  # noqa: BLE001
            if "IncorrectState" in str(exc) or "is in the 'available' state" in str(exc):
                return  # not attached (any more)
            raise error_for_aws(exc, "DetachVolume") from None

    def delete(self, volume_id: str) -> None:
        try:
            self.ec2.delete_volume(VolumeId=volume_id)
        except Exception as exc:  # noqa: BLE001
            if "InvalidVolume.NotFound" in str(exc):
                return
            raise error_for_aws(exc, "DeleteVolume") from None


def _expired(vol: dict[str, Any], now: datetime) -> bool:
    """A volume whose expiry tag is past, missing or unreadable is an orphan."""
    value = next((t.get("Value") for t in vol.get("Tags") or [] if t.get("Key") == EXPIRES_TAG), None)
    try:
        when = datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return True
    return when <= now


def tagged_volumes(ec2: Any) -> list[dict[str, Any]]:
    """Every volume this tool made that still exists (DescribeVolumes by the tool tag, all pages)."""
    out: list[dict[str, Any]] = []
    tagged = [{"Name": f"tag:{TOOL_TAG}", "Values": [TOOL]}]
    for page in pages(ec2, "describe_volumes", "DescribeVolumes", Filters=tagged):
        out.extend(page.get("Volumes") or [])
    return out


def orphans(ec2: Any, now: datetime | None = None, include_unexpired: bool = False) -> list[dict[str, Any]]:
    """Tagged volumes past their expiry (all tagged volumes with include_unexpired)."""
    now = now or datetime.now(timezone.utc)
    return [v for v in tagged_volumes(ec2) if include_unexpired or _expired(v, now)]


def delete_orphan(ec2: Any, vol: dict[str, Any], deadline_s: float = 300.0) -> str:
    """Detach (when attached) and delete one orphan volume; a line saying what was done."""
    volumes = Volumes(ec2, run_id="", expires=datetime.now(timezone.utc))
    vid = str(vol["VolumeId"])
    deadline = time.monotonic() + deadline_s
    attached = [a for a in vol.get("Attachments") or [] if a.get("State") in ("attaching", "attached")]
    for a in attached:
        volumes.detach(vid, str(a.get("InstanceId")), str(a.get("Device")))
    if attached or vol.get("State") != "available":
        volumes.wait_state(vid, "available", deadline, interruptible=False)
    volumes.delete(vid)
    run = next((t.get("Value") for t in vol.get("Tags") or [] if t.get("Key") == RUN_TAG), "?")
    via = f" (detached from {', '.join(str(a.get('InstanceId')) for a in attached)})" if attached else ""
    return f"deleted {vid} of run {run}{via}"


def expiry(now: datetime, seconds: float) -> datetime:
    return now + timedelta(seconds=seconds)
