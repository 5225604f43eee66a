"""known_hosts for the SSH transport: where the file is, its parsed keys (shared, re-read on change), the
policy for a key it lacks (reject, or trust on first use and pin it)."""

from __future__ import annotations

import binascii
import contextlib
import fcntl
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

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


@dataclass(frozen=True)
class KnownHosts:
    """A known_hosts file as OpenSSH reads it: plain keys, `@revoked` keys, `@cert-authority` host patterns, and
    the lines skipped (one bad line costs only its own hosts, as in OpenSSH, never the whole file)."""

    keys: paramiko.HostKeys
    revoked: tuple[tuple[tuple[str, ...], paramiko.PKey], ...] = ()
    authorities: tuple[tuple[int, tuple[str, ...]], ...] = ()  # (line, host patterns)
    skipped: tuple[str, ...] = ()

    def for_host(self, name: str) -> dict[str, paramiko.PKey]:
        """The keys known for `name` (paramiko's lookup: plain and hashed names), less any revoked for it."""
        return {kind: key for kind, key in (self.keys.lookup(name) or {}).items() if not self.is_revoked(name, key)}

    def is_revoked(self, name: str, key: paramiko.PKey) -> bool:
        return any(key == bad and _matches(name, patterns) for patterns, bad in self.revoked)

    def authority_lines(self, name: str) -> list[int]:
        return [line for line, patterns in self.authorities if _matches(name, patterns)]


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    """OpenSSH's host pattern list: hashed `|1|salt|hash`, wildcards `*`/`?`, `!` negation wins."""
    hit = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern.removeprefix("!")
        found = False
        if pattern.startswith("|1|"):
            with contextlib.suppress(ValueError, AssertionError, binascii.Error):
                found = paramiko.HostKeys.hash_host(name, pattern) == pattern
        else:
            wild = re.escape(pattern.lower()).replace(r"\*", ".*").replace(r"\?", ".")  # no [classes]: `[host]:port`
            found = re.fullmatch(wild, name.lower()) is not None
        if found and negated:
            return False
        hit = hit or found
    return hit


def parse_known_hosts(text: str) -> KnownHosts:
    keys = paramiko.HostKeys()
    revoked: list[tuple[tuple[str, ...], paramiko.PKey]] = []
    authorities: list[tuple[int, tuple[str, ...]]] = []
    skipped: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        marker = ""
        if line.startswith("@"):
            marker, _, line = line.partition(" ")
            line = line.strip()
            if marker not in ("@revoked", "@cert-authority"):
                skipped.append(f"line {number}: unknown marker {marker[:40]}")
                continue
        try:
            entry = HostKeyEntry.from_line(line, number)
        except (InvalidHostKey, paramiko.SSHException, ValueError) as exc:
            skipped.append(f"line {number}: {type(exc).__name__}")
            continue
        if entry is None or entry.key is None:  # too few fields or a key type paramiko cannot use
            continue
        if marker == "@revoked":
            revoked.append((tuple(entry.hostnames), entry.key))
        elif marker == "@cert-authority":
            authorities.append((number, tuple(entry.hostnames)))
        else:
            for name in entry.hostnames:
                keys.add(name, entry.key.get_name(), entry.key)
    return KnownHosts(keys, tuple(revoked), tuple(authorities), tuple(skipped))


_KNOWN_LOCK = threading.Lock()
_KNOWN: dict[str, tuple[tuple[int, int, int, int], KnownHosts]] = {}


def known_host_keys(path: Path) -> KnownHosts:
    """The parsed known_hosts file, shared read-only by every connection of the run and parsed again only
    when the file changes (device, inode, size, mtime): parsing it per connection would cost each host
    time that grows with the file, so with the fleet."""
    st = path.stat()
    stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    key = str(path)
    with _KNOWN_LOCK:  # parsed under the lock: the first connections of a run do not all parse it at once
        cached = _KNOWN.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        known = parse_known_hosts(path.read_text(encoding="utf-8", errors="replace"))
        _KNOWN[key] = (stamp, known)
    return known


def describe_key(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.fingerprint}"


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown key: reject, or (trust_on_first_use) accept and append it to the known_hosts file. A key
    `@revoked` for the host is refused, and so is a host known_hosts vouches for only by `@cert-authority`
    (host certificates are not supported), trust on first use or not."""

    def __init__(self, path: Path, tofu: bool, known: KnownHosts | None = None):
        self.path = path
        self.tofu = tofu
        self.known = known or KnownHosts(paramiko.HostKeys())

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if self.known.is_revoked(hostname, key):
            raise HostKeyRejected(f"host key for {hostname} ({describe_key(key)}) is marked @revoked in {self.path}: "
                                  "refused")
        authorities = self.known.authority_lines(hostname)
        if authorities:
            raise HostKeyRejected(
                f"host key for {hostname} ({describe_key(key)}) is vouched for only by @cert-authority (line "
                f"{', '.join(map(str, authorities[:3]))} of {self.path}); host certificates are not supported: "
                "add the host's key itself")
        if not self.tofu:
            skipped = self.known.skipped
            skipped_note = f" (lines skipped as unreadable: {'; '.join(skipped[:3])})" if skipped else ""
            raise HostKeyRejected(
                f"host key for {hostname} ({describe_key(key)}) is not in {self.path}{skipped_note}: "
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
