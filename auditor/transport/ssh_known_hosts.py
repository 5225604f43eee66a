"""known_hosts for the SSH transport: where the file is, its parsed keys (shared, re-read on change), the
policy for a key it lacks (reject, or trust on first use and pin it)."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import paramiko

from ..errors import HostKeyRejected
from ..models import SSHOptions
from .ssh_route import expand_path

_PIN_LOCK = threading.Lock()  # serialises known_hosts appends between threads (flock covers processes)


def known_hosts_path(opts: SSHOptions, config: paramiko.SSHConfig | None = None, alias: str = "") -> Path:
    """spec.ssh.known_hosts, else ssh_config UserKnownHostsFile, else ~/.ssh/known_hosts."""
    if opts.known_hosts:
        return Path(expand_path(opts.known_hosts))
    if config is not None:
        files = config.lookup(alias).get("userknownhostsfile")
        if files:
            return Path(expand_path(files.split()[0]))
    return Path.home() / ".ssh" / "known_hosts"


_KNOWN_LOCK = threading.Lock()
_KNOWN: dict[str, tuple[tuple[int, int, int, int], paramiko.HostKeys]] = {}


def known_host_keys(path: Path) -> paramiko.HostKeys:
    """The parsed known_hosts file, shared read-only by every connection of the run and parsed again only
    when the file changes (device, inode, size, mtime): a fleet scan no longer re-parses every host's
    keys for every host (4.7 ms per host at 20 hosts, growing with the fleet)."""
    st = path.stat()
    stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    key = str(path)
    with _KNOWN_LOCK:  # parsed under the lock: the first connections of a run do not all parse it at once
        cached = _KNOWN.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        keys = paramiko.HostKeys(key)
        _KNOWN[key] = (stamp, keys)
    return keys


def describe_key(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.fingerprint}"


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown key: reject, or (trust_on_first_use) accept and append it to the known_hosts file."""

    def __init__(self, path: Path, tofu: bool):
        self.path = path
        self.tofu = tofu

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if not self.tofu:
            raise HostKeyRejected(
                f"host key for {hostname} ({describe_key(key)}) is not in {self.path}: "
                "verify it and add it, or enable trust_on_first_use"
            )
        pin_host_key(self.path, hostname, key)
        client.get_host_keys().add(hostname, key.get_name(), key)


def pin_host_key(path: Path, hostname: str, key: paramiko.PKey) -> None:
    """Append `hostname keytype base64` to a known_hosts file (created 0600, dir 0700 if new)."""
    line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
    with _PIN_LOCK:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                if fh.tell() > 0:
                    with open(path, "rb") as check:
                        check.seek(-1, os.SEEK_END)
                        if check.read(1) != b"\n":
                            fh.write("\n")
                fh.write(line)
                fh.flush()
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
