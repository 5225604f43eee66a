"""One exec on an open SSH session: the quoted command, stdin fed and stdout/stderr drained together
within the deadline (paramiko's shared window; `exec_command(timeout=)` bounds single reads only), the
signal sent when the deadline passes, and what paramiko raised mapped to the host's status."""

from __future__ import annotations

import contextlib
import errno
import select
import shlex
import socket
import time
from pathlib import Path

import paramiko
from paramiko.common import cMSG_CHANNEL_REQUEST

from ..errors import AuthFailed, HostKeyRejected, TransportError, Unreachable
from .ssh_known_hosts import describe_key
from .ssh_route import Hop

STDERR_CAP = 64 * 1024
_CHUNK = 64 * 1024


def build_command(args: list[str], sudo: bool) -> str:
    """`[sudo -n] /bin/sh -s -- ARG...` with every argument shell-quoted (never interpolated)."""
    words = ["sudo", "-n"] if sudo else []
    words += ["/bin/sh", "-s", "--"]
    return " ".join(words + [shlex.quote(str(a)) for a in args])



class Deadline(Exception):
    """The run's wall-clock deadline passed while the probe was still running."""


def pump(
    chan: paramiko.Channel, stdin: bytes, deadline: float, max_output: int
) -> tuple[bytes, bytes, bool]:
    """Send stdin and drain stdout and stderr together until EOF + exit status, or the deadline."""
    out = bytearray()
    err = bytearray()
    truncated = False
    sent = 0
    if not stdin:
        chan.shutdown_write()
    while True:
        progressed = False
        if sent < len(stdin) and chan.send_ready():
            try:
                sent += chan.send(stdin[sent : sent + _CHUNK])
            except OSError:  # the remote closed stdin (e.g. sudo refused): drop the rest
                sent = len(stdin)
            if sent >= len(stdin):
                with contextlib.suppress(OSError, EOFError):
                    chan.shutdown_write()
            progressed = True
        while chan.recv_ready():
            data = chan.recv(_CHUNK)
            room = max_output - len(out)
            if len(data) > room:
                truncated = True
                data = data[: max(room, 0)]
            out += data
            progressed = True
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(_CHUNK)
            if len(err) > STDERR_CAP:
                del err[: len(err) - STDERR_CAP]
            progressed = True
        if chan.exit_status_ready() and (chan.eof_received or chan.closed):
            if not chan.recv_ready() and not chan.recv_stderr_ready():
                return bytes(out), bytes(err), truncated
        elif chan.closed and not chan.recv_ready() and not chan.recv_stderr_ready():
            return bytes(out), bytes(err), truncated  # closed without an exit status (-1)
        left = deadline - time.monotonic()
        if left <= 0:
            raise Deadline
        if not progressed:
            wait = 0.01 if sent < len(stdin) else min(left, 0.2)
            select.select([chan], [], [], wait)


def send_signal(chan: paramiko.Channel, name: str) -> None:
    """Best effort RFC 4254 `signal` request: OpenSSH then signals the session's process group."""
    with contextlib.suppress(Exception):
        msg = paramiko.Message()
        msg.add_byte(cMSG_CHANNEL_REQUEST)
        msg.add_int(chan.remote_chanid)
        msg.add_string("signal")
        msg.add_boolean(False)
        msg.add_string(name)
        transport = chan.get_transport()
        assert transport is not None  # an open channel has its transport
        transport._send_user_message(msg)  # type: ignore[attr-defined]  # noqa: SLF001 - no public API


def map_connect_error(
    exc: BaseException, hop: Hop, where: str, known_hosts: Path, keyed: bool
) -> BaseException:
    """Turn what paramiko/socket raised while connecting into Unreachable / AuthFailed / HostKeyRejected."""
    if isinstance(exc, TransportError):
        return exc
    if isinstance(exc, paramiko.BadHostKeyException):
        return HostKeyRejected(
            f"host key for {hop.known_hosts_name} CHANGED: server offers {describe_key(exc.key)}, "
            f"{known_hosts} has {describe_key(exc.expected_key)}. Possible man in the middle; if the "
            "change is expected, remove the old line"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return AuthFailed(f"{where}: authentication failed: {exc}")
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return Unreachable(f"{where}: connection refused or no route to host")
    if isinstance(exc, socket.gaierror):
        return Unreachable(f"{where}: cannot resolve {hop.hostname}: {exc.strerror}")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return Unreachable(f"{where}: timed out connecting")
    if isinstance(exc, OSError):
        reason = errno.errorcode.get(exc.errno or 0, "") if exc.errno else ""
        return Unreachable(f"{where}: {exc.strerror or exc} {reason}".rstrip())
    if isinstance(exc, EOFError):
        return Unreachable(f"{where}: connection closed during the handshake")
    if isinstance(exc, paramiko.SSHException):
        if keyed:  # host key accepted, so this went wrong during authentication
            return AuthFailed(f"{where}: authentication failed: {exc}")
        return Unreachable(f"{where}: SSH handshake failed: {exc}")
    return exc

