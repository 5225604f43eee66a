"""Kernel release, cmdline, THP, huge pages and the chosen sysctls."""

from __future__ import annotations

import re

from debian.debian_support import Version

from ...facttypes import Kernel, KernelInstalledRow
from ..sections import UnparsableOutput, kv_lines, to_int

_BRACKETED = re.compile(r"\[([^\]]+)\]")


def selected(value: str | None) -> str | None:
    """`always [madvise] never` → `madvise` (the kernel marks the active choice in brackets)."""
    if not value:
        return None
    m = _BRACKETED.search(value)
    return m.group(1) if m else value.strip()


COUNTERS = frozenset({"fs.file-nr", "net.netfilter.nf_conntrack_count"})  # /proc/sys files that count, not set
_RELEASE = re.compile(r"^\d+\.\d+")  # 6.1.0-27-cloud-amd64, 5.10.228-219.884.amzn2.x86_64


_RELEASE_NUMBERS = re.compile(r"^\d[\d.-]*\d")  # 6.1.0-27 of 6.1.0-27-cloud-amd64, 5.10.228-219.884 of ….amzn2.x86_64


def release_order(release: str | None) -> Version | None:
    """The numbers that order kernel releases (the flavour after them, `-cloud-amd64`, `.el9.x86_64`, does not),
    compared as dpkg compares versions; None when a release does not start with them."""
    m = _RELEASE_NUMBERS.match(release or "")
    try:
        return Version(m.group(0)) if m else None
    except ValueError:
        return None


def _against_running(rows: list[KernelInstalledRow], running: str | None) -> list[KernelInstalledRow]:
    """Mark the running kernel, and each kernel the next boot would move to (newer numbers than the running one;
    null when either release has none to compare, or the running one is unknown)."""
    now = release_order(running)
    for row in rows:
        order = release_order(row.get("release"))
        row["running"] = None if running is None else row.get("release") == running
        row["newer_than_running"] = None if now is None or order is None else order > now
    return rows


def parse_installed(text: str) -> list[KernelInstalledRow]:
    """`release R` and `nvidia R` lines (the `kernels` section) → one row per installed kernel."""
    releases: dict[str, bool] = {}
    nvidia: set[str] = set()
    for line in text.splitlines():
        kind, _, value = line.partition(" ")
        if kind == "release" and value:
            releases[value] = False
        elif kind == "nvidia" and value:
            nvidia.add(value)
        elif line.strip():
            raise UnparsableOutput(f"kernels section line {line[:60]!r} is not `release R` or `nvidia R`")
    return [{"release": r, "nvidia_module": r in nvidia} for r in sorted(releases)]


def parse_kernel(text: str, sysctl_text: str = "", kernels_text: str = "") -> Kernel:
    kv = kv_lines(text)
    sysctls: dict[str, str] = {}
    counters: dict[str, str] = {}
    for line in sysctl_text.splitlines():
        if ":" in line:
            path, value = line.split(":", 1)
            key = path.strip().replace("/", ".")
            (counters if key in COUNTERS else sysctls)[key] = " ".join(value.split())
    release = kv.get("release") or None
    if release and not _RELEASE.match(release):
        raise UnparsableOutput(f"uname -r printed {release[:60]!r}, not a kernel release")
    return {
        "release": release,
        "version": kv.get("version") or None,
        "machine": kv.get("machine") or None,
        "cmdline": kv.get("cmdline") or None,
        "thp_enabled": selected(kv.get("thp_enabled")),
        "thp_defrag": selected(kv.get("thp_defrag")),
        "hugepages_total": to_int(kv.get("hugepages_total")),
        "mem_total_kb": to_int(kv.get("mem_total_kb")),
        "nvidia_driver": kv.get("nvidia_driver") or None,
        "sysctls": sysctls,
        "sysctl_counters": counters,
        "installed": _against_running(parse_installed(kernels_text), release),
    }
