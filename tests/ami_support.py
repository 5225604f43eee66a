"""Helpers for the ami:// tests: real disk images (ext4, XFS, GPT-partitioned) built from a root
directory, the loop-device seam that stands in for "the attached EBS volume appears as a block device",
and an IMDSv2 stand-in on loopback.

What is real: the EC2 calls (boto3 → moto's server over HTTP), the disk images and filesystems, the
loop devices, the kernel mounts, the image:// reader. What is not: moto cannot attach a block device,
so `LoopAttach` replaces `ami_disk.wait_for_device` — the one step between "AttachVolume says attached"
and "a block device with the volume's serial appears" — by a read-only loop device over the disk image
the test built for the volume's snapshot. (`ami_disk.find_device`, which that step calls on a real
instance, is tested on its own against a sysfs tree in test_ami_disk.py.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from auditor.transport import ami_disk

MiB = 1024 * 1024
SECTOR = 512


def tools_or_skip() -> None:
    """Root, loop devices and mkfs for ext4 and XFS are needed (CI installs xfsprogs and fdisk)."""
    if os.geteuid() != 0:
        pytest.skip("ami:// mount tests need root (loop devices, mount)")
    for tool in ("losetup", "mkfs.ext4", "mkfs.xfs", "sfdisk", "mount"):
        if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
            pytest.skip(f"{tool} not installed")
    if not os.path.exists("/dev/loop-control"):
        pytest.skip("no /dev/loop-control")


def run(*argv: str, input: str | None = None) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, input=input).stdout


def tree_size(root: Path) -> int:
    return int(run("du", "-sb", str(root)).split()[0])


def ext4_image(root: Path, out: Path, size: int | None = None) -> Path:
    """A whole-disk ext4 filesystem holding `root` (mkfs.ext4 -d copies the tree, owners and times kept)."""
    size = size or max(64 * MiB, tree_size(root) * 3 // 2 + 32 * MiB)
    with open(out, "wb") as f:
        f.truncate(size)
    run("mkfs.ext4", "-q", "-F", "-d", str(root), str(out))
    return out


def _fill_xfs(root: Path, target: str, offset: int = 0, size: int | None = None) -> None:
    """mkfs.xfs has no "from a directory": mount the new filesystem read-write and copy the tree in."""
    mnt = Path(target).parent / f".xfs-fill-{os.getpid()}"
    mnt.mkdir()
    opts = f"loop,offset={offset}" + (f",sizelimit={size}" if size else "")
    run("mount", "-t", "xfs", "-o", opts, target, str(mnt))
    try:
        run("cp", "-a", f"{root}/.", str(mnt))
    finally:
        run("umount", str(mnt))
        mnt.rmdir()


def gpt_image(root: Path, out: Path, fstype: str = "ext4") -> Path:
    """A GPT disk like an AMI's: partition 1 a small BIOS-boot area (no filesystem), partition 2 the root."""
    first = 2048 * SECTOR + 8 * MiB
    fs_size = max(320 * MiB if fstype == "xfs" else 64 * MiB, tree_size(root) * 3 // 2 + 64 * MiB)
    total = first + fs_size + 2 * MiB
    with open(out, "wb") as f:
        f.truncate(total)
    run("sfdisk", "-q", str(out), input=(
        "label: gpt\n"
        f"start=2048, size={8 * MiB // SECTOR}, type=21686148-6449-6E6F-744E-656564454649\n"
        f"start={first // SECTOR}, size={fs_size // SECTOR}, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n"))
    if fstype == "ext4":
        run("mkfs.ext4", "-q", "-F", "-d", str(root), "-E", f"offset={first}", str(out), f"{fs_size // 1024}k")
    else:
        loop = run("losetup", "--find", "--show", "--offset", str(first), "--sizelimit", str(fs_size),
                   str(out)).strip()
        try:
            run("mkfs.xfs", "-q", "-f", loop)
        finally:
            run("losetup", "-d", loop)
        _fill_xfs(root, str(out), first, fs_size)
    return out


def lvm_image(out: Path) -> Path:
    """A GPT disk whose one partition carries an LVM2 physical-volume label (the label bytes as LVM writes
    them at sector 1; no volume group behind it: the transport must refuse before it would look further)."""
    first = 2048 * SECTOR
    with open(out, "wb") as f:
        f.truncate(first + 16 * MiB + MiB)
    run("sfdisk", "-q", str(out), input=f"label: gpt\nstart=2048, size={16 * MiB // SECTOR}, "
                                        "type=E6D6D379-F507-44C2-A23C-238F2A3DF928\n")
    with open(out, "r+b") as f:
        f.seek(first + SECTOR)
        f.write(b"LABELONE" + (1).to_bytes(8, "little") + bytes(8) + b"LVM2 001")
    return out


def loops_of(path: Path) -> list[str]:
    """Loop devices backed by `path` (directly), e.g. ones a failed run left behind."""
    out = run("losetup", "-j", str(path))
    return [line.split(":", 1)[0] for line in out.splitlines() if line.strip()]


def our_mounts() -> list[str]:
    return ami_disk.leftover_mounts()


class LoopAttach:
    """Stands in for the kernel making a block device of the attached volume (see module docstring).

    Called where the transport waits for the device: checks with EC2 (moto) that the volume really is
    attached to the scanner, then returns a read-only loop device over the disk image built for the
    snapshot the volume was created from."""

    def __init__(self, ec2: Any, scanner: str):
        self.ec2 = ec2
        self.scanner = scanner
        self.disks: dict[str, Path] = {}  # snapshot id → disk image
        self.loops: list[str] = []
        self.calls: list[tuple[str, str]] = []

    def __call__(self, volume_id: str, device_name: str, before: set[str], deadline: float) -> str:
        vol = self.ec2.describe_volumes(VolumeIds=[volume_id])["Volumes"][0]
        attached = [a for a in vol.get("Attachments") or [] if a["State"] == "attached"]
        assert [(a["InstanceId"], a["Device"]) for a in attached] == [(self.scanner, device_name)], vol
        self.calls.append((volume_id, device_name))
        loop = run("losetup", "--find", "--show", "--read-only", str(self.disks[vol["SnapshotId"]])).strip()
        self.loops.append(loop)
        return loop

    def release(self) -> None:
        """Detach the loop devices this double made (the real EBS detach has no loop to free)."""
        for loop in self.loops:
            subprocess.run(["losetup", "-d", loop], capture_output=True)
        self.loops.clear()


def make_ami(ec2: Any, name: str = "golden-2026.11") -> tuple[str, str]:
    """Register an AMI in moto; (ami id, its root snapshot id)."""
    ami = ec2.register_image(Name=name, RootDeviceName="/dev/xvda", Architecture="x86_64")["ImageId"]
    image = ec2.describe_images(ImageIds=[ami])["Images"][0]
    root = next(m for m in image["BlockDeviceMappings"] if m["DeviceName"] == image["RootDeviceName"])
    return ami, root["Ebs"]["SnapshotId"]


def scanner_instance(ec2: Any, az: str = "us-east-1a") -> str:
    return ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1,
                             Placement={"AvailabilityZone": az})["Instances"][0]["InstanceId"]


def tool_volumes(ec2: Any) -> list[dict[str, Any]]:
    return ec2.describe_volumes(Filters=[{"Name": "tag:ami-auditor:tool", "Values": ["ami-auditor"]}])["Volumes"]


class IMDS:
    """An IMDSv2 stand-in on 127.0.0.1: PUT /latest/api/token, then GETs with the token header only."""

    def __init__(self, instance_id: str, az: str, region: str = "us-east-1"):
        self.answers = {"/latest/meta-data/instance-id": instance_id,
                        "/latest/meta-data/placement/availability-zone": az,
                        "/latest/meta-data/placement/region": region}
        self.token = "t0k3n"
        self.requests: list[str] = []
        imds = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:  # noqa: N802
                imds.requests.append(f"PUT {self.path}")
                ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
                self._send(200 if ok else 400, imds.token if ok else "")

            def do_GET(self) -> None:  # noqa: N802
                imds.requests.append(f"GET {self.path}")
                if self.headers.get("X-aws-ec2-metadata-token") != imds.token:
                    self._send(401, "")
                elif self.path in imds.answers:
                    self._send(200, imds.answers[self.path])
                else:
                    self._send(404, "")

            def _send(self, code: int, body: str) -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> IMDS:
        self.thread.start()
        self.saved = {k: os.environ.get(k) for k in ("AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_DISABLED")}
        os.environ["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = f"http://127.0.0.1:{self.server.server_address[1]}"
        os.environ.pop("AWS_EC2_METADATA_DISABLED", None)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
