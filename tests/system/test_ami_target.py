"""ami://ami-… end to end: EC2 calls against moto's server on loopback, real disk images (ext4 on the
whole disk; XFS in partition 2 of a GPT disk, as AMIs are laid out; from the fleet's debootstrapped
Debian root), real loop devices and kernel mounts, the image:// reader. The one stand-in is where moto
cannot follow — the attached volume appearing as a block device: tests/ami_support.LoopAttach maps it
to a read-only loop device over the disk image built for the volume's snapshot (it first checks with
EC2 that the volume really is attached to the scanner).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from auditor import cli
from auditor.context import Env
from auditor.models import AmiSettings, HostSpec, TransportOptions
from auditor.run.live_hosts import collect_host
from auditor.transport import ami_disk
from auditor.transport.ami import AmiRun
from auditor.transport.image import ImageTransport
from tests.ami_support import (
    IMDS,
    LoopAttach,
    ext4_image,
    gpt_image,
    loops_of,
    lvm_image,
    make_ami,
    scanner_instance,
    tool_volumes,
    tools_or_skip,
)
from tests.paths import ROOT
from tests.ssm_endpoint import AwsStandIns
from tests.unit.test_image_transport import make_root

REGION = "us-east-1"
MARKER = Path("/tmp/ami-auditor-image-kubelet-ran")  # the image's kubelet creates it if it is ever run
BINARIES = ["kubelet", "ecs-init", "sshd"]


@pytest.fixture(scope="module")
def aws() -> Iterator[AwsStandIns]:
    tools_or_skip()
    with AwsStandIns() as a:
        yield a


@pytest.fixture(scope="module")
def scanner(aws: AwsStandIns) -> str:
    return scanner_instance(aws.ec2)


@pytest.fixture
def attach(aws: AwsStandIns, scanner: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopAttach]:
    double = LoopAttach(aws.ec2, scanner)
    monkeypatch.setattr(ami_disk, "wait_for_device", double)
    yield double
    double.release()


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small root (os-release, enabled ecs.service, dpkg db, a booby-trapped kubelet) as ext4."""
    tools_or_skip()
    base = tmp_path_factory.mktemp("small")
    return ext4_image(make_root(base / "root"), base / "small.ext4")


def settings(scanner: str, **kw: Any) -> AmiSettings:
    return AmiSettings(region=REGION, attach_to=scanner, **kw)


def ami_spec(ami: str, scanner: str) -> HostSpec:
    return HostSpec(ami, f"ami://{ami}", options=TransportOptions(ami=settings(scanner)))


def assert_nothing_left(aws: AwsStandIns, attach: LoopAttach) -> None:
    """No tagged volume in EC2, no mount below /run/ami-auditor, no loop device over the 'EBS' device."""
    assert tool_volumes(aws.ec2) == []
    assert ami_disk.leftover_mounts() == []
    for loop in attach.loops:
        assert loops_of(Path(loop)) == [], f"the mount's loop device over {loop} was not freed"


# --- the real thing: the debootstrapped root, as whole-disk ext4 and as XFS on a GPT-partitioned disk ----

@pytest.fixture(scope="module")
def debian(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The fleet's base root plus a booby-trapped kubelet (an overlay), and two disks built from it."""
    tools_or_skip()
    from tests.fleet.builder import ensure_base

    work = tmp_path_factory.mktemp("debian")
    root, upper, scratch = work / "root", work / "upper", work / "work"
    for d in (root, upper, scratch):
        d.mkdir()
    # copy-on-write over the cached base (as the fleet's hosts are): no 260 MB copy
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={ensure_base()},upperdir={upper},workdir={scratch}", str(root)], check=True)
    try:
        kubelet = root / "usr/local/bin/kubelet"
        kubelet.write_text(f"#!/bin/sh\ntouch {MARKER}\necho 'Kubernetes v1.29.3'\n")
        kubelet.chmod(0o755)
        disks = {"dir": root, "ext4": ext4_image(root, work / "whole.ext4"),
                 "gpt-xfs": gpt_image(root, work / "gpt-xfs.img", fstype="xfs")}
        yield disks
    finally:
        subprocess.run(["umount", str(root)], check=True)
        shutil.rmtree(work, ignore_errors=True)  # ~1 GB of disk images: not left for pytest's tmp retention


@pytest.mark.parametrize("kind", ["ext4", "gpt-xfs"])
def test_ami_audit_has_the_same_facts_as_image_on_its_directory(
        kind: str, debian: dict[str, Path], aws: AwsStandIns, scanner: str, attach: LoopAttach) -> None:
    MARKER.unlink(missing_ok=True)
    ami, snap = make_ami(aws.ec2, name=f"debian-12-{kind}")
    attach.disks[snap] = debian[kind]
    got = collect_host(ami_spec(ami, scanner), BINARIES)
    assert got.status == "ok", got.error
    want = collect_host(HostSpec(ami, f"image://{debian['dir']}"), BINARIES)
    assert want.status == "ok", want.error
    assert got.snapshot and want.snapshot
    assert got.snapshot["facts"] == want.snapshot["facts"]
    assert got.snapshot["errors"] == want.snapshot["errors"]
    assert got.snapshot["host"] == want.snapshot["host"]
    assert "openssh-server" in {p["name"] for p in got.snapshot["facts"]["packages"]["items"]}
    image = aws.ec2.describe_images(ImageIds=[ami])["Images"][0]
    assert got.snapshot["labels"] == {"ami_id": ami, "ami_name": f"debian-12-{kind}",
                                      "creation_date": image["CreationDate"]}
    kubelet = next(b for b in got.snapshot["facts"]["binaries"] if b["name"] == "kubelet")
    assert kubelet["sha256"] and kubelet["version"] is None
    assert not MARKER.exists(), "a binary inside the image was executed"
    assert len(attach.calls) == 1
    assert_nothing_left(aws, attach)


# --- lifecycle: every step's failure, signals, killed runs -----------------------------------------------

def test_lifecycle_calls_and_tags(aws: AwsStandIns, scanner: str, attach: LoopAttach, small_disk: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ami, snap = make_ami(aws.ec2)
    attach.disks[snap] = small_disk
    seen: dict[str, Any] = {}
    real_mount = AmiRun.mount

    def mount_and_look(self: AmiRun) -> None:
        real_mount(self)
        vol = aws.ec2.describe_volumes(VolumeIds=[self.volume_id])["Volumes"][0]
        seen.update(vol=vol, mountinfo=Path("/proc/self/mountinfo").read_text(), mountpoint=self.mountpoint)

    monkeypatch.setattr(AmiRun, "mount", mount_and_look)
    got = collect_host(ami_spec(ami, scanner), BINARIES)
    assert got.status == "ok", got.error
    vol = seen["vol"]
    tags = {t["Key"]: t["Value"] for t in vol["Tags"]}
    assert tags["ami-auditor:tool"] == "ami-auditor" and tags["ami-auditor:ami-id"] == ami
    assert len(tags["ami-auditor:run-id"]) == 12
    expires = datetime.strptime(tags["ami-auditor:expires"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert timedelta(0) < expires - datetime.now(timezone.utc) < timedelta(hours=2)
    assert vol["SnapshotId"] == snap and vol["AvailabilityZone"] == "us-east-1a" and vol["State"] == "in-use"
    assert vol["Attachments"][0]["Device"] == "/dev/sdf"  # the scanner's root is /dev/sda1: sdf is free
    line = next(ln for ln in seen["mountinfo"].splitlines() if f" {seen['mountpoint']} " in ln)
    opts = line.split()[5].split(",")
    assert "ro" in opts and {"nosuid", "nodev", "noexec"} <= set(opts)
    assert "norecovery" in line.split(" - ")[1]  # ext4 reports `noload` as norecovery: no journal replay
    assert_nothing_left(aws, attach)


STEPS = [*AmiRun.STEPS, "audit"]


@pytest.mark.parametrize("step", STEPS)
def test_a_failure_after_any_step_leaves_no_volume(step: str, aws: AwsStandIns, scanner: str,
                                                   attach: LoopAttach, small_disk: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step really runs, then fails: whatever it made (volume, attachment, mount) is undone."""
    from auditor.errors import TransportError

    ami, snap = make_ami(aws.ec2)
    attach.disks[snap] = small_disk
    cls: Any = ImageTransport if step == "audit" else AmiRun
    name = "run" if step == "audit" else step
    real = getattr(cls, name)

    def then_fail(self: Any, *args: Any, **kw: Any) -> Any:
        real(self, *args, **kw)
        raise TransportError(f"injected after {step}")

    monkeypatch.setattr(cls, name, then_fail)
    got = collect_host(ami_spec(ami, scanner), BINARIES)
    assert got.status == "error" and got.error == f"injected after {step}", got.error
    assert_nothing_left(aws, attach)


@pytest.mark.parametrize("what", ["no filesystem", "lvm"])
def test_a_disk_without_a_usable_root_is_refused_and_cleaned_up(what: str, tmp_path: Path, aws: AwsStandIns,
                                                                scanner: str, attach: LoopAttach) -> None:
    disk = lvm_image(tmp_path / "lvm.img") if what == "lvm" else tmp_path / "zeros.img"
    if what != "lvm":
        with open(disk, "wb") as f:
            f.truncate(16 * 1024 * 1024)
    ami, snap = make_ami(aws.ec2)
    attach.disks[snap] = disk
    got = collect_host(ami_spec(ami, scanner), BINARIES)
    assert got.status == "error"
    assert ("root filesystem is on LVM" in got.error and "image:///path" in got.error) if what == "lvm" \
        else "no ext2/3/4 or XFS root filesystem" in got.error, got.error
    assert_nothing_left(aws, attach)


def test_a_failed_cleanup_says_so_and_ami_cleanup_removes_the_volume(
        aws: AwsStandIns, scanner: str, attach: LoopAttach, small_disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from auditor.errors import TransportError

    ami, snap = make_ami(aws.ec2)
    attach.disks[snap] = small_disk

    def refuse(self: AmiRun) -> None:
        raise TransportError("DetachVolume: injected")

    monkeypatch.setattr(AmiRun, "detach", refuse)
    got = collect_host(ami_spec(ami, scanner), BINARIES)
    assert got.status == "error" and "may be left behind" in got.error and "ami cleanup" in got.error
    (left,) = tool_volumes(aws.ec2)
    assert left["State"] == "in-use" and left["VolumeId"] in got.error
    monkeypatch.undo()
    out = io.StringIO()
    assert cli.main(["ami", "cleanup", "--region", REGION, "--dry-run"], Env(out, io.StringIO())) == 0
    assert "0 volume(s) would be deleted" in out.getvalue()  # not expired yet: a running scan could own it
    out = io.StringIO()
    assert cli.main(["ami", "cleanup", "--region", REGION, "--all"], Env(out, io.StringIO())) == 0
    assert f"deleted {left['VolumeId']}" in out.getvalue() and f"detached from {scanner}" in out.getvalue()
    assert_nothing_left(aws, attach)


@pytest.mark.parametrize(("sig", "step", "code"), [
    (signal.SIGTERM, "create_volume", 143), (signal.SIGTERM, "wait_attached", 143), (signal.SIGTERM, "mount", 143),
    (signal.SIGINT, "attach", 130),
])
def test_sigterm_and_sigint_during_a_scan_delete_the_volume(
        sig: int, step: str, code: int, aws: AwsStandIns, scanner: str, attach: LoopAttach, small_disk: Path,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal is really delivered to this process while `ami-auditor scan` runs (the step runs in a
    worker thread, as in any scan); the scan stops at the next step, cleans up and exits 143/130."""
    ami, snap = make_ami(aws.ec2)
    attach.disks[snap] = small_disk
    real = getattr(AmiRun, step)

    def then_signal(self: AmiRun) -> None:
        real(self)
        os.kill(os.getpid(), sig)
        time.sleep(0.5)  # the main thread handles it meanwhile

    monkeypatch.setattr(AmiRun, step, then_signal)
    before = signal.getsignal(signal.SIGTERM)  # the test fleet, when booted, has its own SIGTERM handler
    err = io.StringIO()
    code_got = cli.main(["scan", f"ami://{ami}", "--region", REGION, "--attach-to", scanner,
                         "--format", "json", "--out", str(tmp_path / "out")], Env(io.StringIO(), err))
    assert code_got == code, err.getvalue()
    assert ("terminated" if sig == signal.SIGTERM else "interrupted") in err.getvalue()
    assert_nothing_left(aws, attach)
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored after the command


def test_sigterm_while_the_reader_is_stuck_cleans_up_from_the_main_thread(
        aws: AwsStandIns, scanner: str, attach: LoopAttach, small_disk: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader blocks where no stop check reaches it (stand-in: the image read waits on an event, as a
    read stuck in the kernel would); SIGTERM still ends the scan within 2 s and the volume is deleted by
    the main thread instead of waiting behind the reader."""
    import threading

    ami, snap = make_ami(aws.ec2)
    attach.disks[snap] = small_disk
    stuck, release = threading.Event(), threading.Event()
    sent: list[float] = []

    def read_forever(self: ImageTransport, *args: Any, **kw: Any) -> None:
        stuck.set()
        release.wait(20)
        raise RuntimeError("released")

    def signal_when_stuck() -> None:
        if stuck.wait(60):
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(ImageTransport, "run", read_forever)
    threading.Thread(target=signal_when_stuck, daemon=True).start()
    err = io.StringIO()
    try:
        code = cli.main(["scan", f"ami://{ami}", "--region", REGION, "--attach-to", scanner,
                         "--format", "json", "--out", str(tmp_path / "out")], Env(io.StringIO(), err))
        took = time.monotonic() - sent[0]
        assert code == 143, err.getvalue()
        assert_nothing_left(aws, attach)  # unmounted, detached, deleted while the reader was still stuck
        assert not release.is_set()
    finally:
        release.set()  # the stuck worker (a daemon thread) ends
    assert took < 3.0, f"{took:.1f} s from SIGTERM to the end of the scan"


KILLED_RUN = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from auditor import cli
    from auditor.transport import ami_disk
    from auditor.transport.ami import AmiRun
    from tests.ami_support import LoopAttach
    import boto3
    ready, disk, snap, scanner, ami = sys.argv[1:6]
    double = LoopAttach(boto3.client("ec2", region_name="us-east-1"), scanner)
    double.disks[snap] = Path(disk)
    ami_disk.wait_for_device = double
    real = AmiRun.mount
    def mount_then_hang(self):
        real(self)
        Path(ready).write_text(self.mountpoint)
        time.sleep(600)
    AmiRun.mount = mount_then_hang
    cli.main(["scan", "ami://" + ami, "--region", "us-east-1", "--attach-to", scanner])
""")


def test_ami_cleanup_after_a_killed_run(aws: AwsStandIns, scanner: str, small_disk: Path, tmp_path: Path) -> None:
    """SIGKILL (no cleanup possible) while the volume is attached and mounted; `ami cleanup` unmounts it
    on this machine, detaches and deletes it."""
    ami, snap = make_ami(aws.ec2)
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(ready), str(small_disk), snap, scanner, ami],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.1)
        mountpoint = ready.read_text()
    finally:
        proc.kill()
        proc.wait()
    (left,) = tool_volumes(aws.ec2)
    assert left["State"] == "in-use" and mountpoint in ami_disk.leftover_mounts()
    out = io.StringIO()
    assert cli.main(["ami", "cleanup", "--region", REGION, "--all"], Env(out, io.StringIO())) == 0
    assert f"unmounted {mountpoint}" in out.getvalue() and f"deleted {left['VolumeId']}" in out.getvalue()
    assert tool_volumes(aws.ec2) == [] and ami_disk.leftover_mounts() == [] and not os.path.exists(mountpoint)
    for loop in loops_of(small_disk):  # the killed process's stand-in loop device (no EBS detach here)
        subprocess.run(["losetup", "-d", loop], check=True)


def test_ami_cleanup_deletes_only_expired_tagged_volumes(aws: AwsStandIns, scanner: str) -> None:
    ec2 = aws.ec2
    now = datetime.now(timezone.utc)

    def volume(expires: str | None, tool: bool = True) -> str:
        tags = [{"Key": "Name", "Value": "x"}]
        if tool:
            tags.append({"Key": "ami-auditor:tool", "Value": "ami-auditor"})
        if expires is not None:
            tags.append({"Key": "ami-auditor:expires", "Value": expires})
        return ec2.create_volume(AvailabilityZone="us-east-1a", Size=1,
                                 TagSpecifications=[{"ResourceType": "volume", "Tags": tags}])["VolumeId"]

    fmt = "%Y-%m-%dT%H:%M:%SZ"
    expired = volume((now - timedelta(minutes=1)).strftime(fmt))
    expired_attached = volume((now - timedelta(hours=3)).strftime(fmt))
    ec2.attach_volume(VolumeId=expired_attached, InstanceId=scanner, Device="/dev/sdg")
    unreadable = volume("tomorrow")
    running = volume((now + timedelta(hours=1)).strftime(fmt))
    foreign = volume((now - timedelta(hours=1)).strftime(fmt), tool=False)
    out = io.StringIO()
    assert cli.main(["ami", "cleanup", "--region", REGION, "--dry-run"], Env(out, io.StringIO())) == 0
    assert "3 volume(s) would be deleted" in out.getvalue()
    assert {v["VolumeId"] for v in tool_volumes(ec2)} == {expired, expired_attached, unreadable, running}
    out = io.StringIO()
    assert cli.main(["ami", "cleanup", "--region", REGION], Env(out, io.StringIO())) == 0
    assert f"deleted {expired_attached} of run ? (detached from {scanner})" in out.getvalue()
    left = {v["VolumeId"] for v in ec2.describe_volumes(VolumeIds=[running, foreign])["Volumes"]}
    assert left == {running, foreign}
    assert {v["VolumeId"] for v in tool_volumes(ec2)} == {running}
    for vid in (running, foreign):
        ec2.delete_volume(VolumeId=vid)


# --- scanner identity (IMDS), CLI, diff ----------------------------------------------------------------

def test_scan_from_the_scanning_instance_uses_imds(aws: AwsStandIns, scanner: str, attach: LoopAttach,
                                                   small_disk: Path, tmp_path: Path) -> None:
    ami, snap = make_ami(aws.ec2, name="web-2026.11.30")
    attach.disks[snap] = small_disk
    out = tmp_path / "out"
    with IMDS(scanner, "us-east-1a") as imds:
        code = cli.main(["scan", f"ami://{ami}", "--binary", "kubelet", "--format", "json", "--out", str(out)],
                        Env(io.StringIO(), io.StringIO()))
    assert imds.requests[:4] == ["PUT /latest/api/token", "GET /latest/meta-data/instance-id",
                                 "GET /latest/meta-data/placement/availability-zone",
                                 "GET /latest/meta-data/placement/region"]
    assert code in (0, 1)
    report = json.loads((out / "report.json").read_text())
    (host,) = report["hosts"]
    assert host["status"] == "ok" and host["target"] == f"ami://{ami}"
    assert host["labels"]["ami_id"] == ami and host["labels"]["ami_name"] == "web-2026.11.30"
    assert_nothing_left(aws, attach)


def test_az_must_be_the_attached_instances(aws: AwsStandIns, scanner: str, attach: LoopAttach) -> None:
    ami, _ = make_ami(aws.ec2)
    spec = HostSpec(ami, f"ami://{ami}", options=TransportOptions(ami=settings(scanner, az="us-east-1b")))
    got = collect_host(spec, BINARIES)
    assert got.status == "error" and "is in us-east-1a" in got.error
    assert_nothing_left(aws, attach)


def test_bad_ami_targets_are_bad_input() -> None:
    for target in ("ami://ami-xyz", "ami://i-0123456789abcdef0", "ami://ami-0123456789abcdef0?zone=x",
                   "ami://ami-0123456789abcdef0/path", "ami://ami-0123456789abcdef0?region=moon"):
        err = io.StringIO()
        assert cli.main(["scan", target], Env(io.StringIO(), err)) == 2, target
        assert "ami" in err.getvalue()


def test_diff_of_two_amis(aws: AwsStandIns, scanner: str, attach: LoopAttach, tmp_path: Path) -> None:
    old_root = make_root(tmp_path / "old")
    new_root = make_root(tmp_path / "new")
    (old_root / "etc/systemd/system/multi-user.target.wants/ecs.service").unlink()  # the fix: disabled
    (new_root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12.8"\n')
    old, old_snap = make_ami(aws.ec2, "base-old")
    new, new_snap = make_ami(aws.ec2, "base-new")
    attach.disks[old_snap] = ext4_image(old_root, tmp_path / "old.ext4")
    attach.disks[new_snap] = gpt_image(new_root, tmp_path / "new.img")
    out = io.StringIO()
    code = cli.main(["diff", f"ami://{old}", f"ami://{new}", "--region", REGION, "--attach-to", scanner, "--json"],
                    Env(out, io.StringIO()))
    assert code == 1
    paths = {d["path"]: d for d in json.loads(out.getvalue())}
    assert any("ecs.service" in p for p in paths), sorted(paths)
    assert paths["facts.os.pretty_name"]["actual"] == "Debian GNU/Linux 12.8"
    assert len(attach.calls) == 2
    assert_nothing_left(aws, attach)


def test_two_amis_in_one_scan_get_different_device_names(aws: AwsStandIns, scanner: str, attach: LoopAttach,
                                                         small_disk: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Both runs describe the scanner before either attaches: without the process-wide reservation both
    would pick /dev/sdf (EC2 refuses the second attach with "already in use")."""
    import threading

    amis = [make_ami(aws.ec2, f"parallel-{i}") for i in range(2)]
    for _, snap in amis:
        attach.disks[snap] = small_disk
    both_described = threading.Barrier(2, timeout=60)
    real = AmiRun.describe

    def describe_together(self: AmiRun) -> None:
        real(self)
        both_described.wait()

    monkeypatch.setattr(AmiRun, "describe", describe_together)
    from auditor.transport import ami as ami_module

    reserved_before = set(ami_module._RESERVED)  # a test whose detach failed keeps its name reserved
    out = tmp_path / "out"
    code = cli.main(["collect", *(f"ami://{a}" for a, _ in amis), "--region", REGION, "--attach-to", scanner,
                     "--parallel", "2", "-o", str(out)], Env(io.StringIO(), io.StringIO()))
    assert code == 0
    devices = [device for _, device in attach.calls]
    assert len(devices) == 2 and len(set(devices)) == 2, devices
    assert_nothing_left(aws, attach)
    assert reserved_before == ami_module._RESERVED


def test_off_ec2_without_attach_to_says_what_to_give(aws: AwsStandIns, attach: LoopAttach) -> None:
    """AwsStandIns turns IMDS off (AWS_EC2_METADATA_DISABLED=true), as on a laptop: nothing is created."""
    ami, _ = make_ami(aws.ec2)
    spec = HostSpec(ami, f"ami://{ami}", options=TransportOptions(ami=AmiSettings(region=REGION)))
    got = collect_host(spec, BINARIES)
    assert got.status == "error" and "--az and --attach-to" in got.error
    assert attach.calls == [] and tool_volumes(aws.ec2) == []
