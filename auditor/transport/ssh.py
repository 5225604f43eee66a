"""Run the probe over SSH with paramiko: the connection (every hop's, reused across runs) and one exec.

The rest of the room, one job a module (FIELD-NOTES §9): ssh_route.py turns a target and ssh_config into
hops (paramiko's SSHConfig only parses, so HostName/User/Port/IdentityFile/ProxyJump are applied by
hand); ssh_known_hosts.py checks and pins host keys; ssh_channel.py feeds stdin and drains stdout and
stderr together (one shared window) within the wall-clock deadline, which `exec_command(timeout=)` does
not enforce. Here: a jump is a `direct-tcpip` channel on the previous hop passed as `sock=`, and every
hop's host key is checked. The registry imports `SSHTransport` from this module.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

import paramiko

from ..errors import AuthFailed, InputError, ProbeTimeout, TransportError, Unreachable
from ..models import CommandResult, HostSpec, ProbeRequest
from . import jumplimits
from .base import DEFAULT_DEADLINE_S, DEFAULT_MAX_OUTPUT
from .ssh_channel import Deadline, build_command, map_connect_error, pump, send_signal
from .ssh_known_hosts import HostKeyPolicy, known_host_keys, known_hosts_path, pin_host_key
from .ssh_route import Hop, load_ssh_config, parse_ssh_target, resolve_route

__all__ = ["Hop", "SSHTransport", "build_command", "known_host_keys", "known_hosts_path", "load_ssh_config",
           "parse_ssh_target", "pin_host_key", "resolve_route"]

# paramiko's transport thread logs a traceback for every failed handshake (e.g. no banner); with no handler
# configured, Python prints it on stderr, where it reads as a crash. The error is mapped to the host's status.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class SSHTransport:
    """Reaches `ssh://[user@]host[:port]` with paramiko; one connection (per hop) reused across runs."""

    name = "ssh"

    def __init__(self, spec: HostSpec):
        self.spec = spec
        self.opts = spec.ssh
        self.config = load_ssh_config(self.opts)
        self.hops = resolve_route(spec, self.config)
        self.target = self.hops[-1]
        self.known_hosts = known_hosts_path(self.opts, self.config, self.target.alias)
        self.use_sudo = self.opts.sudo if self.opts.sudo is not None else self.target.user != "root"
        self._clients: list[paramiko.SSHClient] = []
        self._jump_slots: list[threading.BoundedSemaphore] = []  # connection slots held on jump hosts

    # -- connecting -------------------------------------------------------------------------------

    def connect(self, deadline: float | None = None) -> paramiko.Transport:
        """Open (or reuse) the connection through every hop; map failures to TransportError kinds.

        `deadline` (a time.monotonic() value) caps every connect/banner/auth wait, so a host that
        accepts TCP but never answers cannot hold a scan past its per-host deadline."""
        live = self._clients[-1].get_transport() if self._clients else None
        if live is not None and live.is_active():
            return live
        self._disconnect()
        try:
            for i, hop in enumerate(self.hops):
                timeout = self._timeout(deadline)
                # a jump host's sshd drops connections past MaxStartups unauthenticated ones: bound them
                # (waiting for a slot is queueing, not connecting: bounded by the deadline, not connect_timeout)
                gate = jumplimits.handshake_slot(hop.endpoint) if i < len(self.hops) - 1 else None
                wait = None if deadline is None else max(0.1, deadline - time.monotonic())
                if gate is not None and not gate.acquire(timeout=wait):
                    raise Unreachable(f"{hop.user}@{hop.endpoint}: no free handshake slot on the jump host before the "
                                      f"deadline ({jumplimits.MAX_HANDSHAKES} at once, below sshd's MaxStartups)")
                timeout = self._timeout(deadline)
                try:
                    sock = self._open_tunnel(self.hops[i - 1], hop, timeout) if i else self._open_socket(hop, timeout)
                    self._clients.append(self._connect_hop(hop, sock, self._timeout(deadline)))
                finally:
                    if gate is not None:
                        gate.release()
        except BaseException:
            self._disconnect()
            raise
        transport = self._clients[-1].get_transport()
        assert transport is not None
        return transport

    def _timeout(self, deadline: float | None) -> float:
        """connect_timeout, or less when the per-host deadline comes first (at least 0.1 s)."""
        if deadline is None:
            return self.opts.connect_timeout
        return max(0.1, min(self.opts.connect_timeout, deadline - time.monotonic()))

    def _open_socket(self, hop: Hop, timeout: float) -> socket.socket:
        """TCP to the first hop, with TCP_NODELAY: without it Nagle + delayed ACKs delay every channel
        request/reply (docs/performance.md)."""
        where = f"{hop.user}@{hop.hostname}:{hop.port}"
        try:
            infos = socket.getaddrinfo(hop.hostname, hop.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise Unreachable(f"{where}: cannot resolve {hop.hostname}: {exc.strerror}") from None
        last: OSError | None = None
        for family, kind, proto, _, addr in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(timeout)
                sock.connect(addr)
                return sock
            except OSError as exc:
                sock.close()
                last = exc
        if isinstance(last, (socket.timeout, TimeoutError)):
            raise Unreachable(f"{where}: timed out connecting")
        reason = last.strerror if last is not None and last.strerror else str(last)
        raise Unreachable(f"{where}: {reason}")

    def _open_tunnel(self, via: Hop, hop: Hop, timeout: float) -> paramiko.Channel:
        transport = self._clients[-1].get_transport()
        assert transport is not None
        try:
            return transport.open_channel(
                "direct-tcpip",
                (hop.hostname, hop.port),
                ("127.0.0.1", 0),
                timeout=timeout,
            )
        except paramiko.ChannelException as exc:
            raise Unreachable(
                f"jump host {via.alias} could not reach {hop.hostname}:{hop.port}: {exc.text}"
            ) from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise Unreachable(
                f"jump host {via.alias} could not open a tunnel to {hop.hostname}: {exc}"
            ) from None

    def _connect_hop(self, hop: Hop, sock: socket.socket | paramiko.Channel, timeout: float) -> paramiko.SSHClient:
        where = f"{hop.user}@{hop.hostname}:{hop.port}"
        for key_file in hop.key_files:
            if not os.path.isfile(key_file):
                raise AuthFailed(f"{where}: identity file not found: {key_file}")
        client = paramiko.SSHClient()
        known = None
        if self.known_hosts.is_file():
            try:
                known = known_host_keys(self.known_hosts)
            except (OSError, paramiko.SSHException) as exc:
                raise InputError(f"cannot read known_hosts: {exc}", str(self.known_hosts)) from None
            # only this host's entries, under the name paramiko looks up: the same check as loading the
            # whole file into the client, without parsing every other host's keys again (O(1), not O(fleet));
            # a key also @revoked for it is left out, so the policy sees it and refuses it
            name = hop.hostname if hop.port == 22 else f"[{hop.hostname}]:{hop.port}"
            for key_type, key in known.for_host(name).items():
                client.get_host_keys().add(name, key_type, key)
        client.set_missing_host_key_policy(HostKeyPolicy(self.known_hosts, self.opts.trust_on_first_use, known))
        started = time.monotonic()
        try:
            client.connect(
                hop.hostname,
                port=hop.port,
                username=hop.user,
                key_filename=list(hop.key_files) or None,  # type: ignore[arg-type]  # paramiko takes a list too
                allow_agent=True,
                look_for_keys=not hop.key_files,
                sock=sock,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                channel_timeout=timeout,
            )
        except BaseException as exc:
            transport = client.get_transport()
            keyed = transport is not None and transport.host_key is not None  # key exchange finished
            # paramiko gives up waiting for the banner with "No existing session" (its negotiation wait
            # ends as the banner wait does), which names nothing; say what happened instead
            silent = transport is not None and not transport.remote_version
            client.close()
            if silent and isinstance(exc, paramiko.SSHException) and not isinstance(exc, TransportError):
                waited = time.monotonic() - started
                if waited < timeout * 0.9:  # not the banner wait running out: the server hung up first
                    raise Unreachable(f"{where}: the connection was closed before the SSH banner (after "
                                      f"{waited:.1f}s): the port accepts TCP connections, then hangs up") from None
                raise Unreachable(f"{where}: no SSH banner within {timeout:.1f}s: the port accepts TCP "
                                  "connections but does not speak SSH") from None
            raise map_connect_error(exc, hop, where, self.known_hosts, keyed) from None
        return client

    # -- running ----------------------------------------------------------------------------------

    def run(
        self,
        request: ProbeRequest,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> CommandResult:
        """Feed `request.script` to `[sudo -n] /bin/sh -s -- ARGV` in one exec; the deadline covers connecting too
        (not the wait for a free connection slot on a jump host, which comes first: jumplimits.py)."""
        self._hold_jump_slots()
        started = time.monotonic()
        deadline = started + deadline_s
        transport = self.connect(deadline)
        try:
            chan = transport.open_session(timeout=self._timeout(deadline))
            chan.exec_command(build_command(list(request.argv), self.use_sudo))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise TransportError(f"{self.spec.name}: cannot start the probe: {exc}") from None
        try:
            out, err, truncated = pump(chan, request.script.encode(), deadline, max_output)
        except Deadline:
            send_signal(chan, "TERM")
            chan.close()
            raise ProbeTimeout(f"{self.spec.name}: probe did not finish within {deadline_s:g}s") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            chan.close()
            self.close()
            raise Unreachable(f"{self.spec.name}: connection lost during the probe: {exc}") from None
        status = chan.recv_exit_status()
        chan.close()
        stderr = err.decode("utf-8", "replace")
        if status == -1:  # closed without an exit status: never a finished probe
            self._no_exit_status(transport, len(out), stderr, deadline)
        if self.use_sudo and status == 1 and not out and "sudo: a password is required" in stderr:
            raise AuthFailed(f"{self.spec.name}: `sudo -n` needs a password for {self.target.user}")
        return CommandResult(
            stdout=out.decode("utf-8", "replace"),
            stderr=stderr,
            exit_status=status,
            duration_s=time.monotonic() - started,
            truncated=truncated,
        )

    def _no_exit_status(self, transport: paramiko.Transport, received: int, stderr: str, deadline: float) -> None:
        """The channel closed without an exit status: the host (or its sshd) died mid-probe, or the probe
        was killed by a signal (OpenSSH then sends `exit-signal`, which paramiko ignores). Either way the
        output is partial, so the host must not read as collected."""
        until = min(deadline, time.monotonic() + 1.0)  # paramiko closes the channels before the transport
        while transport.is_active() and time.monotonic() < until:
            time.sleep(0.02)
        tail = f"; stderr: {stderr.strip()[-200:]}" if stderr.strip() else ""
        if not transport.is_active():
            self.close()
            raise Unreachable(f"{self.spec.name}: connection lost during the probe after {received} bytes of "
                              f"output: the host went down or its sshd died{tail}")
        raise TransportError(f"{self.spec.name}: the probe was killed before it finished (no exit status, "
                             f"{received} bytes of output){tail}")

    def _hold_jump_slots(self) -> None:
        """Take a connection slot on every jump host on the way (once per transport; close() returns them)."""
        if self._jump_slots:
            return
        for hop in self.hops[:-1]:
            slot = jumplimits.connection_slot(hop.endpoint)
            slot.acquire()
            self._jump_slots.append(slot)

    def _disconnect(self) -> None:
        """Close the target connection, then the jump hosts'."""
        while self._clients:
            self._clients.pop().close()

    def close(self) -> None:
        """Close every connection and give back the jump hosts' connection slots."""
        self._disconnect()
        while self._jump_slots:
            self._jump_slots.pop().release()

    def __enter__(self) -> SSHTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

