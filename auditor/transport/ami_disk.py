"""The block-device side of an `ami://` audit: find the attached volume, find its root filesystem, mount
it read-only without replaying its journal, unmount it.

- Device: on Nitro instances an EBS volume is an NVMe disk whose serial is the volume id without its
  dash (`vol0123…`, /sys/block/nvmeXn1/device/serial); on Xen ones it appears under the requested name
  (`/dev/sdf`, or `/dev/xvdf`). A name match only counts for a disk that was not there before the attach.
- Layout: the whole disk, or an MBR/GPT partition table read here (bounded reads of the untrusted disk;
  no udev or partition-device nodes needed, so it works in containers too). Each partition's filesystem
  is told by its superblock magic: ext2/3/4 and XFS are mounted; an LVM physical volume is refused
  (activating an untrusted image's volume group on the scanner is not something to do implicitly);
  others are skipped.
- Mount: through a read-only loop device over the partition's byte range (`mount -o loop,offset=,
  sizelimit=`, freed by the kernel at unmount), `ro,noload` for ext (no journal replay) and
  `ro,norecovery,nouuid` for XFS (no log recovery; a clone of the scanner's own root is still mountable),
  plus `nodev,nosuid,noexec`. The first filesystem with an `etc/` directory is the root.
Everything runs as argv lists (no shell); the only values in them are kernel device names checked
against a pattern, integers and a directory this code made.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import interrupt
from ..errors import TransportError

MOUNT_BASE = "/run/ami-auditor"  # every mount point of a run is a directory below it (`ami cleanup` looks here)
_SYS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_KERNEL_NAME = re.compile(r"^[a-z][a-z0-9]{1,31}$")
_DEVICE_NAME = re.compile(r"^/dev/(?:sd|xvd)([a-z]{1,2})$")
MAX_PARTITIONS = 128
SECTOR = 512
Reader = Callable[[int, int], bytes]  # (offset, length) → bytes


@dataclass(frozen=True)
class Part:
    """A region of the disk that may hold a filesystem: number 0 is the whole disk."""

    number: int
    offset: int
    size: int | None  # bytes; None: to the end of the disk
    fstype: str  # ext | xfs | lvm | btrfs | swap | other


def block_devices(sys_block: str = "/sys/block") -> set[str]:
    try:
        return {n for n in os.listdir(sys_block) if _KERNEL_NAME.match(n)}
    except OSError:
        return set()


def _read_small(path: str, limit: int = 256) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("ascii", "replace").strip()
    except OSError:
        return ""


def find_device(volume_id: str, device_name: str, before: set[str], sys_block: str = "/sys/block",
                dev: str = "/dev") -> str | None:
    """/dev/NAME of the attached volume, or None while it has not appeared."""
    serial = volume_id.replace("-", "")
    now = block_devices(sys_block)
    for name in sorted(n for n in now if n.startswith("nvme")):
        if _read_small(os.path.join(sys_block, name, "device", "serial")) == serial:
            return os.path.join(dev, name)
    m = _DEVICE_NAME.match(device_name)
    if m:
        for name in (f"xvd{m.group(1)}", f"sd{m.group(1)}"):
            if name in now and name not in before:
                return os.path.join(dev, name)
    return None


def wait_for_device(volume_id: str, device_name: str, before: set[str], deadline: float) -> str:
    """Poll sysfs until the volume shows up as a block device (TransportError past the deadline)."""
    pause = 0.1
    while True:
        found = find_device(volume_id, device_name, before)
        if found:
            return found
        left = deadline - time.monotonic()
        if left <= 0:
            raise TransportError(f"volume {volume_id} is attached as {device_name} but no block device "
                                 "with its serial or name appeared on this machine")
        interrupt.wait(min(pause, left))
        pause = min(1.0, pause * 1.5)


def device_reader(path: str) -> Reader:
    def read(offset: int, length: int) -> bytes:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY)
        try:
            return os.pread(fd, length, offset)
        finally:
            os.close(fd)
    return read


def fstype_at(read: Reader, offset: int) -> str:
    """Which filesystem (if any) starts at `offset`, by its superblock magic."""
    head = read(offset, 4096)
    if head[:4] == b"XFSB":
        return "xfs"
    for sector in range(4):  # LVM2 label: "LABELONE" in one of the first four sectors, type "LVM2 001"
        label = head[sector * SECTOR: sector * SECTOR + 32]
        if label[:8] == b"LABELONE" and label[24:32] == b"LVM2 001":
            return "lvm"
    if len(head) >= 1082 and struct.unpack_from("<H", head, 1080)[0] == 0xEF53:
        return "ext"
    if head[4086:4096] in (b"SWAPSPACE2", b"SWAP-SPACE"):
        return "swap"
    if read(offset + 0x10040, 8) == b"_BHRfS_M":
        return "btrfs"
    return "other"


def _gpt(read: Reader) -> list[tuple[int, int, int]] | None:
    """GPT partitions as (number, offset, size), or None without a GPT header (512- or 4096-byte sectors)."""
    for sector in (SECTOR, 4096):
        header = read(sector, 92)
        if header[:8] != b"EFI PART" or len(header) < 92:
            continue
        entries_lba, count, entry_size = struct.unpack_from("<QII", header, 72)
        if not 128 <= entry_size <= 4096 or entry_size % 8:
            raise TransportError("GPT header with an unusable partition entry size")
        count = min(count, MAX_PARTITIONS)
        table = read(entries_lba * sector, count * entry_size)
        parts = []
        for i in range(min(count, len(table) // entry_size)):
            entry = table[i * entry_size:(i + 1) * entry_size]
            if entry[:16] == bytes(16):
                continue
            first, last = struct.unpack_from("<QQ", entry, 32)
            if last >= first > 0:
                parts.append((i + 1, first * sector, (last - first + 1) * sector))
        return parts
    return None


def _mbr(read: Reader) -> list[tuple[int, int, int]] | None:
    """Primary MBR partitions (extended ones skipped), or None without an MBR signature."""
    block = read(0, SECTOR)
    if len(block) < SECTOR or block[510:512] != b"\x55\xaa":
        return None
    parts = []
    for i in range(4):
        ptype = block[446 + i * 16 + 4]
        start, sectors = struct.unpack_from("<II", block, 446 + i * 16 + 8)
        if ptype in (0x00, 0x05, 0x0F, 0x85, 0xEE) or not start or not sectors:
            continue
        parts.append((i + 1, start * SECTOR, sectors * SECTOR))
    return parts


def layout(read: Reader) -> list[Part]:
    """The disk's filesystems: the whole disk when it holds one, else each partition's."""
    whole = fstype_at(read, 0)
    if whole in ("ext", "xfs", "lvm", "btrfs"):
        return [Part(0, 0, None, whole)]
    table = _gpt(read)
    if table is None:
        table = _mbr(read) or []
    return [Part(n, off, size, fstype_at(read, off)) for n, off, size in table]


def _run(argv: list[str], what: str, timeout: float = 120.0) -> None:
    exe = shutil.which(argv[0], path=_SYS_PATH)
    if exe is None:
        raise TransportError(f"{what}: {argv[0]} not found (util-linux)")
    try:
        done = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env={"PATH": _SYS_PATH, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        raise TransportError(f"{what}: timed out") from None
    if done.returncode != 0:
        raise TransportError(f"{what}: {(done.stderr or done.stdout).strip()[:300]}")


def mount_options(part: Part) -> str:
    journal = "ro,noload" if part.fstype == "ext" else "ro,norecovery,nouuid"
    region = f"offset={part.offset}" + (f",sizelimit={part.size}" if part.size else "")
    return f"{journal},nodev,nosuid,noexec,loop,{region}"


def mount(device: str, part: Part, mountpoint: str) -> None:
    _run(["mount", "-t", "ext4" if part.fstype == "ext" else "xfs", "-o", mount_options(part), device, mountpoint],
         f"mount {device} partition {part.number}")


def unmount(mountpoint: str) -> None:
    """Unmount (lazily when busy) and remove the mount point."""
    try:
        _run(["umount", mountpoint], f"umount {mountpoint}")
    except TransportError:
        _run(["umount", "-l", mountpoint], f"umount -l {mountpoint}")
    os.rmdir(mountpoint)


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def new_mountpoint(run_id: str, base: str = MOUNT_BASE) -> str:
    os.makedirs(base, mode=0o700, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{run_id}-", dir=base)


def mount_root(device: str, mountpoint: str, read: Reader | None = None) -> Part:
    """Mount the disk's root filesystem at `mountpoint`; the Part used. Refuses LVM, names what it saw."""
    parts = layout(read or device_reader(device))
    seen = []
    for part in parts:
        seen.append(f"{part.number}:{part.fstype}")
        if part.fstype not in ("ext", "xfs"):
            continue
        interrupt.check()
        mount(device, part, mountpoint)
        if _is_dir(os.path.join(mountpoint, "etc")):
            return part
        unmount_only(mountpoint)
    if any(p.fstype == "lvm" for p in parts):
        raise TransportError(f"{device}: the root filesystem is on LVM (partitions {', '.join(seen)}): not "
                             "activated on the scanner; activate the volume group yourself, mount it read-only "
                             "and audit it as image:///path")
    shown = ", ".join(seen) or "no partition table and no filesystem"
    raise TransportError(f"{device}: no ext2/3/4 or XFS root filesystem with an etc/ directory ({shown})")


def unmount_only(mountpoint: str) -> None:
    _run(["umount", mountpoint], f"umount {mountpoint}")


def leftover_mounts(base: str = MOUNT_BASE, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """Mount points below `base` (from runs that were killed), deepest first."""
    found = []
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4:
                    point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
                    if point.startswith(base.rstrip("/") + "/"):
                        found.append(point)
    except OSError:
        return []
    return sorted(found, key=len, reverse=True)
