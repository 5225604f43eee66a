"""Build (once) and cache the Debian base roots (bullseye, bookworm, trixie) that fleet hosts overlay.

The base is debootstrapped into a temporary directory next to its final place and renamed only
when complete, so an interrupted build is never reused. A file lock serialises concurrent builders.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

RELEASE = "bookworm"
# The Debian releases a fleet host can be built from, with the systemd major version each ships.
SYSTEMD_MAJOR = {"bullseye": 247, "bookworm": 252, "trixie": 257}
RELEASES = tuple(SYSTEMD_MAJOR)
DEFAULT_CACHE = Path("/var/cache/ami-auditor-fleet")
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "iproute2",
    "procps",
    "python3",
    "ethtool",
    "kmod",
    "less",
)
# Units that could touch the host's network config (the containers share its network namespace),
# or only add background noise to a test fleet.
MASKED_UNITS = (
    "systemd-networkd.service",
    "systemd-networkd.socket",
    "systemd-networkd-wait-online.service",
    "systemd-resolved.service",
    "systemd-timesyncd.service",
    "systemd-sysctl.service",
    "systemd-udevd.service",
    "systemd-udev-trigger.service",
    "networking.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "getty@tty1.service",
    "console-getty.service",
)
STAMP = ".ami-auditor-fleet-base"
# Bump when the customisation below changes, so old caches are rebuilt.
BASE_VERSION = "1"


def cache_dir() -> Path:
    """Where base roots are cached: `$AMI_AUDITOR_FLEET_CACHE` or /var/cache/ami-auditor-fleet."""
    return Path(os.environ.get("AMI_AUDITOR_FLEET_CACHE") or DEFAULT_CACHE)


def base_path(release: str = RELEASE) -> Path:
    """The final (complete) location of the base root for `release`."""
    return cache_dir() / f"base-{release}"


def apt_mirror(release: str = RELEASE) -> str:
    """The Debian mirror this host's apt uses (deb822 `URIs:` or one-line `deb URI suite`).

    Any non-security Debian stanza names the mirror (one mirror serves every release); that it
    really serves `release` is checked before debootstrap (`check_mirror`).
    """
    _check_release(release)
    candidates: list[str] = []
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text()):
            fields = dict(
                (m.group(1).lower(), m.group(2).strip())
                for m in re.finditer(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M)
            )
            suites = fields.get("suites", "").split()
            if "deb" in fields.get("types", "").split() and any(_debian_suite(s) for s in suites):
                candidates += fields.get("uris", "").split()
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]:
        if path.exists():
            for m in re.finditer(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", path.read_text(), re.M):
                if _debian_suite(m.group(2)):
                    candidates.append(m.group(1))
    for uri in candidates:
        if "security" not in uri:
            return uri
    raise RuntimeError("no Debian mirror found in /etc/apt/sources.list{,.d/}")


def _debian_suite(suite: str) -> bool:
    """True for a Debian release suite (`bookworm`, `bookworm-updates`, `stable`...), not `-security`."""
    base = suite.split("-", 1)[0]
    return (base in RELEASES or base in ("stable", "oldstable", "testing")) and not suite.endswith("-security")


def _check_release(release: str) -> None:
    if release not in RELEASES:
        raise ValueError(f"unknown fleet release {release!r}; one of {', '.join(RELEASES)}")


def check_mirror(mirror: str, release: str, timeout: float = 30.0) -> None:
    """Fail early, naming the mirror, when it does not serve `dists/<release>/InRelease`."""
    url = f"{mirror.rstrip('/')}/dists/{release}/InRelease"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - the host's own apt mirror
            resp.read(64)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"the apt mirror {mirror} does not serve Debian {release} ({url}: {e})") from e


def _log(msg: str) -> None:
    print(f"[fleet] {msg}", file=sys.stderr, flush=True)


def _customise(root: Path) -> None:
    """Make the root a neutral template: no identity, no network side effects, key-only sshd."""
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc/machine-id").write_text("")  # filled per host
    dbus_id = root / "var/lib/dbus/machine-id"
    if dbus_id.exists() or dbus_id.is_symlink():
        dbus_id.unlink()
    os.symlink("/etc/machine-id", dbus_id)
    system = root / "etc/systemd/system"
    for unit in MASKED_UNITS:
        link = system / unit
        if link.exists() or link.is_symlink():
            link.unlink()
        os.symlink("/dev/null", link)
    for wants in system.glob("*.wants/*"):
        if wants.name in MASKED_UNITS:
            wants.unlink()
    conf = root / "etc/systemd/journald.conf.d"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "ami-auditor-fleet.conf").write_text("[Journal]\nStorage=volatile\nRuntimeMaxUse=16M\n")
    sshd = root / "etc/ssh/sshd_config.d"
    sshd.mkdir(parents=True, exist_ok=True)
    (sshd / "10-ami-auditor-fleet.conf").write_text(
        "# ami-auditor test fleet: key authentication only\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\n"
        "UseDNS no\n"
        "MaxStartups 100:30:200\n"
    )
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)
    (root / STAMP).write_text(f"version={BASE_VERSION}\nbuilt={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")


def base_is_current(path: Path) -> bool:
    """True when `path` is a complete base built with the current customisation."""
    stamp = path / STAMP
    return stamp.is_file() and f"version={BASE_VERSION}\n" in stamp.read_text()


def ensure_base(release: str = RELEASE) -> Path:
    """Return the cached base root of `release`, debootstrapping it first when missing or stale."""
    _check_release(release)
    final = base_path(release)
    if base_is_current(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if base_is_current(final):  # another process built it while we waited
            return final
        for stale in final.parent.glob(f".{final.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
        mirror = apt_mirror(release)
        check_mirror(mirror, release)
        started = time.monotonic()
        _log(f"debootstrapping {release} base into {tmp} (mirror from apt sources)")
        cmd = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            release,
            str(tmp),
            mirror,
        ]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tail = "\n".join(proc.stdout.splitlines()[-30:])
            raise RuntimeError(f"debootstrap failed ({proc.returncode}):\n{tail}")
        (tmp / "var/cache/apt/archives").mkdir(parents=True, exist_ok=True)
        for deb in (tmp / "var/cache/apt/archives").glob("*.deb"):
            deb.unlink()
        _customise(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
        _log(f"base root ready at {final} in {time.monotonic() - started:.0f} s")
        return final


if __name__ == "__main__":
    for name in sys.argv[1:] or [RELEASE]:
        print(ensure_base(name))
