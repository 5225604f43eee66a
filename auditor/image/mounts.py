"""Which filesystems mounted under an image root are not the image's own (mountinfo, read once per image):
ImageFS refuses to read them, so a pseudo filesystem or a bind of the scanner's own disk is never taken
for the image's content."""

from __future__ import annotations

import re

PSEUDO_FS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "tmpfs", "ramfs", "cgroup", "cgroup2", "securityfs", "debugfs",
    "tracefs", "bpf", "mqueue", "hugetlbfs", "fusectl", "configfs", "pstore", "autofs", "binfmt_misc",
    "efivarfs", "selinuxfs", "nsfs",
})


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def foreign_mounts(root: str, mountinfo: str = "/proc/self/mountinfo") -> dict[str, str]:
    """Mount points below `root` that are not the image's own filesystems → why they are not read.

    Accepted: a disk filesystem mounted at its own root whose device is mounted nowhere outside the
    image (an image's /var partition). Refused: pseudo filesystems (proc, sysfs, tmpfs, …), bind mounts
    of a subdirectory, and devices also mounted outside the image (a bind of the scanner's own disk).
    """
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            rows = [line.split() for line in f]
    except OSError:
        return {}
    prefix = root.rstrip("/") + "/"
    mounts: dict[str, tuple[str, str, str]] = {}
    outside: set[str] = set()
    for cols in rows:
        if "-" not in cols[6:] or len(cols) < 9:
            continue
        sep = cols.index("-", 6)
        device, mroot, point, fstype = cols[2], _unescape(cols[3]), _unescape(cols[4]), cols[sep + 1]
        if point.startswith(prefix):
            mounts[point] = (device, mroot, fstype)
        elif point != root:
            outside.add(device)
    out = {}
    for point, (device, mroot, fstype) in mounts.items():
        if fstype in PSEUDO_FS:
            out[point] = f"a {fstype} filesystem is mounted here"
        elif mroot != "/":
            out[point] = f"a bind mount of {mroot} is mounted here"
        elif device in outside:
            out[point] = "a filesystem that is also mounted outside the image is mounted here"
    return out
