"""ami_disk on its own: which block device is the attached volume (a sysfs tree written here, laid out as
on Nitro and Xen instances), and which partition holds which filesystem (real disk images)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from auditor.transport import ami_disk
from tests.ami_support import ext4_image, gpt_image, lvm_image, run, tools_or_skip
from tests.paths import ROOT
from tests.unit.test_image_transport import make_root

VOL = "vol-0123456789abcdef0"


def sysfs(tmp_path: Path, disks: dict[str, str | None]) -> str:
    """/sys/block with one directory per disk; NVMe ones carry device/serial (EBS: the volume id, no dash)."""
    block = tmp_path / "sys/block"
    for name, serial in disks.items():
        (block / name / "device").mkdir(parents=True)
        if serial is not None:
            (block / name / "device/serial").write_text(serial.ljust(20) + "\n")  # NVMe pads serials
    return str(block)


def test_nitro_volume_is_found_by_its_nvme_serial(tmp_path: Path) -> None:
    block = sysfs(tmp_path, {"nvme0n1": "vol0aaaaaaaaaaaaaaaa", "nvme1n1": "vol0123456789abcdef0", "loop0": None})
    assert ami_disk.find_device(VOL, "/dev/sdf", {"nvme0n1"}, block, "/dev") == "/dev/nvme1n1"
    assert ami_disk.find_device("vol-0ffffffffffffffff", "/dev/sdf", {"nvme0n1"}, block, "/dev") is None


def test_xen_volume_is_found_by_name_only_when_it_is_new(tmp_path: Path) -> None:
    block = sysfs(tmp_path, {"xvda": None, "xvdf": None})
    assert ami_disk.find_device(VOL, "/dev/sdf", {"xvda"}, block, "/dev") == "/dev/xvdf"
    # a disk of that name that was there before the attach is not ours: never mounted
    assert ami_disk.find_device(VOL, "/dev/sdf", {"xvda", "xvdf"}, block, "/dev") is None
    assert ami_disk.find_device(VOL, "/dev/sdg", {"xvda"}, block, "/dev") is None


def test_layouts_of_real_disks(tmp_path: Path) -> None:
    tools_or_skip()
    root = make_root(tmp_path / "root")
    whole = ami_disk.layout(ami_disk.device_reader(str(ext4_image(root, tmp_path / "w.ext4"))))
    assert whole == [ami_disk.Part(0, 0, None, "ext")]
    gpt = ami_disk.layout(ami_disk.device_reader(str(gpt_image(root, tmp_path / "g.img"))))
    assert [(p.number, p.fstype) for p in gpt] == [(1, "other"), (2, "ext")]
    assert gpt[1].offset == 2048 * 512 + 8 * 1024 * 1024
    lvm = ami_disk.layout(ami_disk.device_reader(str(lvm_image(tmp_path / "l.img"))))
    assert [(p.number, p.fstype) for p in lvm] == [(1, "lvm")]
    mbr = tmp_path / "mbr.img"
    with open(mbr, "wb") as f:
        f.truncate(80 * 1024 * 1024)
    run("sfdisk", "-q", str(mbr), input="label: dos\nstart=2048, size=4096, type=83\nstart=8192, type=83\n")
    part = ami_disk.layout(ami_disk.device_reader(str(mbr)))
    assert [(p.number, p.offset, p.fstype) for p in part] == [(1, 2048 * 512, "other"), (2, 8192 * 512, "other")]


def test_hostile_partition_tables_are_bounded() -> None:
    """A GPT header claiming 2^32 entries reads at most 128; an absurd entry size is refused."""
    disk = bytearray(64 * 1024)
    header = b"EFI PART" + bytes(64) + struct.pack("<QII", 2, 0xFFFFFFFF, 128)
    disk[512:512 + len(header)] = header
    reads: list[int] = []

    def read(offset: int, length: int) -> bytes:
        reads.append(length)
        return bytes(disk[offset:offset + length])

    assert ami_disk.layout(read) == []
    assert max(reads) <= 128 * 128
    disk[512 + 84:512 + 88] = struct.pack("<I", 1 << 20)
    with pytest.raises(Exception, match="entry size"):
        ami_disk.layout(read)


def test_mount_options_never_replay_a_journal() -> None:
    ext = ami_disk.mount_options(ami_disk.Part(2, 1048576, 4096, "ext"))
    xfs = ami_disk.mount_options(ami_disk.Part(0, 0, None, "xfs"))
    assert ext.startswith("ro,noload,") and "offset=1048576,sizelimit=4096" in ext
    assert xfs.startswith("ro,norecovery,nouuid,") and "sizelimit" not in xfs
    for opts in (ext, xfs):
        assert {"nodev", "nosuid", "noexec", "loop"} <= set(opts.split(","))


def test_iam_policy_limits_volume_actions_to_the_tools_own_tags() -> None:
    """docs/iam-policy.json: CreateVolume only with the tags the code sends, Attach/Detach/Delete only on
    volumes carrying the tool tag, CreateTags only as part of CreateVolume, attach only to scanners."""
    import json
    from datetime import datetime, timezone

    from auditor.transport import ami_aws

    policy = json.loads((ROOT / "docs/iam-policy.json").read_text())
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    create = by_sid["AmiCreateOnlyTaggedVolumes"]
    sent = [t["Key"] for t in ami_aws.tags("run", "ami-0123456789abcdef0", datetime.now(timezone.utc))]
    assert sorted(create["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"]) == sorted(sent)
    assert create["Condition"]["StringEquals"] == {f"aws:RequestTag/{ami_aws.TOOL_TAG}": ami_aws.TOOL}
    own = by_sid["AmiAttachDetachDeleteOnlyItsOwnVolumes"]
    assert own["Resource"].endswith(":volume/*")
    assert own["Condition"]["StringEquals"] == {f"aws:ResourceTag/{ami_aws.TOOL_TAG}": ami_aws.TOOL}
    assert by_sid["AmiTagVolumesOnlyWhenCreating"]["Condition"]["StringEquals"] == {"ec2:CreateAction": "CreateVolume"}
    for s in policy["Statement"]:
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        if {"ec2:AttachVolume", "ec2:DetachVolume", "ec2:DeleteVolume", "ec2:CreateTags"} & set(actions):
            assert "Condition" in s and s["Resource"] != "*", s["Sid"]
