"""Audit an AMI by id (`ami://ami-0123…[?region=…]`) from an EC2 instance, without booting it.

DescribeImages → CreateVolume from the root snapshot in the scanner's AZ (tagged) → AttachVolume to the
scanning instance (IMDS, or --attach-to) → the block device (ami_disk) → mounted read-only, journal not
replayed → the `image://` reader on the mount point (nothing in the image is executed) → unmount,
detach, delete. Cleanup runs in `finally` whatever failed, and on SIGINT/SIGTERM (interrupt.py): the
steps check for a stop and unwind, and a run whose worker is still busy (deep in a read) is cleaned up
by the main thread (interrupt.on_stop), never left to wait behind it. A run killed with SIGKILL leaves a
tagged volume that `ami-auditor ami cleanup` deletes once its expiry tag has passed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from dataclasses import replace
from datetime import datetime, timezone
from types import TracebackType
from typing import Any

from .. import interrupt
from ..errors import TransportError
from ..models import AmiSettings, CommandResult, HostSpec, ProbeRequest
from . import ami_aws, ami_disk, imds
from .base import DEFAULT_DEADLINE_S, DEFAULT_MAX_OUTPUT
from .image import ImageTransport

# Device names this process has handed out and not yet given back: `scan ami://A ami://B` attaches two
# volumes to one instance at once, and DescribeInstances does not yet show the other run's attachment.
_RESERVED: set[tuple[str, str]] = set()  # (instance id, device name)
_RESERVED_LOCK = threading.Lock()

SETUP_BUDGET_S = 600.0  # create + attach + device, and again detach + delete: EBS takes seconds to minutes
CLEANUP_BUDGET_S = 300.0


class AmiRun:
    """One AMI audit's resources. Each method is one step; `cleanup` undoes whatever the steps made."""

    def __init__(self, ami_id: str, settings: AmiSettings, region: str | None = None):
        self.ami_id = ami_id
        self.settings = settings
        self.region = region or settings.region
        self.run_id = uuid.uuid4().hex[:12]
        self.deadline = time.monotonic() + SETUP_BUDGET_S
        self.ec2: Any = None
        self.image: ami_aws.Image | None = None
        self.volumes: ami_aws.Volumes | None = None
        self.instance_id = settings.attach_to
        self.az = settings.az
        self.device_name = ""
        self.volume_id: str | None = None
        self.attached = False
        self.device: str | None = None
        self.mountpoint: str | None = None
        self.before: set[str] = set()
        self._cleanup_lock = threading.Lock()

    # --- the steps, in order ---------------------------------------------------------------------
    def connect(self) -> None:
        from ..aws.api import clients as aws_clients

        if self.instance_id is None:  # the scanner itself: IMDS says which instance and where
            here = imds.placement()
            self.instance_id = here.instance_id
            self.az = self.az or here.az
            self.region = self.region or here.region
        (self.ec2,) = aws_clients(self.region, self.settings.profile, "ec2")
        expires = ami_aws.expiry(datetime.now(timezone.utc), SETUP_BUDGET_S * 2 + DEFAULT_DEADLINE_S * 10)
        self.volumes = ami_aws.Volumes(self.ec2, self.run_id, expires)

    def describe(self) -> None:
        self.image = ami_aws.describe_image(self.ec2, self.ami_id)
        az, used = ami_aws.instance_placement(self.ec2, str(self.instance_id))
        if self.az and az and self.az != az:
            raise TransportError(f"--az {self.az}: instance {self.instance_id} is in {az}; the volume must be "
                                 "in the AZ of the instance it is attached to")
        self.az = self.az or az
        with _RESERVED_LOCK:
            mine = {name for inst, name in _RESERVED if inst == self.instance_id}
            self.device_name = ami_aws.free_device_name(used | mine)
            _RESERVED.add((str(self.instance_id), self.device_name))

    def create_volume(self) -> None:
        assert self.volumes and self.image and self.az
        self.volume_id = self.volumes.create(self.image, self.az)

    def wait_available(self) -> None:
        assert self.volumes and self.volume_id
        self.volumes.wait_state(self.volume_id, "available", self.deadline)

    def attach(self) -> None:
        assert self.volumes and self.volume_id
        self.before = ami_disk.block_devices()
        self.attached = True  # before the call: a timeout after AWS accepted it must still detach
        self.volumes.attach(self.volume_id, str(self.instance_id), self.device_name)

    def wait_attached(self) -> None:
        assert self.volumes and self.volume_id
        self.volumes.wait_state(self.volume_id, "attached", self.deadline)

    def find_device(self) -> None:
        assert self.volume_id
        self.device = ami_disk.wait_for_device(self.volume_id, self.device_name, self.before, self.deadline)

    def mount(self) -> None:
        assert self.device
        mountpoint = ami_disk.new_mountpoint(self.run_id)
        try:
            ami_disk.mount_root(self.device, mountpoint)
        except BaseException:
            os.rmdir(mountpoint)
            raise
        self.mountpoint = mountpoint

    STEPS = ("connect", "describe", "create_volume", "wait_available", "attach", "wait_attached",
             "find_device", "mount")

    def prepare(self) -> str:
        """Run every step (checking for SIGINT/SIGTERM between them); the mounted root's path."""
        for step in self.STEPS:
            interrupt.check()
            getattr(self, step)()
        assert self.mountpoint
        return self.mountpoint

    # --- undo ------------------------------------------------------------------------------------
    def unmount(self) -> None:
        if self.mountpoint:
            ami_disk.unmount(self.mountpoint)
            self.mountpoint = None

    def detach(self) -> None:
        if self.attached and self.volumes and self.volume_id:
            self.volumes.detach(self.volume_id, str(self.instance_id), self.device_name)
            self.volumes.wait_state(self.volume_id, "available", time.monotonic() + CLEANUP_BUDGET_S,
                                    interruptible=False)
            self.attached = False

    def delete(self) -> None:
        if self.volumes and self.volume_id:
            self.volumes.delete(self.volume_id)
            self.volume_id = None

    def cleanup(self) -> list[str]:
        """Unmount, detach, delete: each tried even when one before it failed; what could not be done.
        Idempotent and locked: the worker and, on a stop, the main thread may both call it."""
        with self._cleanup_lock:
            problems = []
            for step in ("unmount", "detach", "delete"):
                try:
                    getattr(self, step)()
                except Exception as exc:  # noqa: BLE001 - go on: a later step may still succeed
                    problems.append(f"{step}: {exc}")
            if not self.attached:  # the name is free again (a volume still attached keeps it taken)
                with _RESERVED_LOCK:
                    _RESERVED.discard((str(self.instance_id), self.device_name))
            return problems

    def __enter__(self) -> AmiRun:
        # registered: on a stop, the main thread runs it if this run's worker is still busy reading the volume
        self._registration = interrupt.on_stop(self.cleanup)
        self._registration.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        main = threading.current_thread() is threading.main_thread()
        blocked = {signal.SIGINT, signal.SIGTERM}
        if main:  # a second Ctrl-C must not cut the cleanup short: the signal waits until it is done
            signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            problems = self.cleanup()  # again if the main thread ran it on a stop: whatever is left since
        finally:
            self._registration.__exit__(None, None, None)
            if main:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
        if not problems:
            return
        left = f"volume {self.volume_id} (run {self.run_id}) may be left behind: `ami-auditor ami cleanup` " \
               "deletes it once its expiry tag has passed"
        message = f"cleanup failed ({'; '.join(problems)}); {left}"
        if exc is None or isinstance(exc, TransportError):
            raise TransportError(f"{exc}; {message}" if exc else message) from exc
        sys.stderr.write(f"ami-auditor: {self.ami_id}: {message}\n")  # don't hide a crash or an interrupt


def ami_id_of(target: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(target).netloc


class AmiTransport:
    """`ami://ami-…`: the image:// audit of the AMI's root volume, mounted on this instance for the run."""

    name = "ami"

    def __init__(self, spec: HostSpec):
        self.spec = spec
        self.settings: AmiSettings = spec.options.ami or AmiSettings()
        self.region: str | None = spec.options.region or self.settings.region

    def run(
        self,
        request: ProbeRequest,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> CommandResult:
        with AmiRun(ami_id_of(self.spec.target), self.settings, self.region) as run:
            root = run.prepare()
            result = ImageTransport(HostSpec(self.spec.name, f"image://{root}")).run(
                request, deadline_s, max_output)
            assert run.image
            labels = run.image.labels()
        return replace(result, labels=labels)

    def close(self) -> None:
        """Nothing held between runs (each run cleans up after itself)."""
