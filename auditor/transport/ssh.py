"""Run the probe over SSH with paramiko: known_hosts checked, ProxyJump, one exec per run.

Quirks handled here (FIELD-NOTES §9): paramiko's SSHConfig only parses, so HostName/User/Port/
IdentityFile/ProxyJump are applied by hand; a jump is a `direct-tcpip` channel on the previous
hop passed as `sock=`, and every hop's host key is checked; stdout and stderr share one window,
so both are drained together; `exec_command(timeout=)` bounds single reads only, so the wall-clock
deadline is enforced here.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import getpass
import logging
import os
import select
import shlex
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import paramiko
from paramiko.common import cMSG_CHANNEL_REQUEST

from ..errors import AuthFailed, HostKeyRejected, InputError, ProbeTimeout, TransportError, Unreachable
from ..models import CommandResult, HostSpec, ProbeRequest, SSHOptions
from . import jumplimits
from .base import DEFAULT_DEADLINE_S, DEFAULT_MAX_OUTPUT

STDERR_CAP = 64 * 1024
_CHUNK = 64 * 1024
_PIN_LOCK = threading.Lock()  # serialises known_hosts appends between threads (flock covers processes)
# paramiko's transport thread logs a traceback for every failed handshake (e.g. no banner); with no handler
# configured, Python prints it on stderr, where it reads as a crash. The error is mapped to the host's status.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


@dataclass(frozen=True)
class Hop:
    """One SSH connection on the way to the host: bastions first, the target last."""

    alias: str  # the name as written (target host or ProxyJump entry); used for ssh_config lookup
    hostname: str  # where to connect (ssh_config HostName applied)
    port: int
    user: str
    key_files: tuple[str, ...] = ()

    @property
    def known_hosts_name(self) -> str:
        """The name this hop has in known_hosts: `host`, or `[host]:port` when the port is not 22."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"

    @property
    def endpoint(self) -> str:
        """`hostname:port`: what the per-jump-host bounds (jumplimits.py) are keyed by."""
        return f"{self.hostname}:{self.port}"


def parse_ssh_target(target: str) -> tuple[str | None, str, int | None]:
    """`ssh://[user@]host[:port]` → (user, host, port); InputError when malformed."""
    parts = urlsplit(target)
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"bad port in target {target!r}") from None
    if parts.scheme != "ssh" or not parts.hostname:
        raise InputError(f"bad ssh target {target!r}: use ssh://[user@]host[:port]")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.password:
        raise InputError(f"bad ssh target {target!r}: only ssh://[user@]host[:port] is accepted")
    return parts.username or None, parts.hostname, port


def _parse_jump(entry: str) -> tuple[str | None, str, int | None]:
    """A ProxyJump entry `[user@]host[:port]` (or `ssh://…`) → (user, host, port)."""
    entry = entry.strip()
    if not entry.startswith("ssh://"):
        entry = "ssh://" + entry
    try:
        return parse_ssh_target(entry)
    except InputError as exc:
        raise InputError(f"bad ProxyJump entry: {exc.message}") from None


def _expand(path: str) -> str:
    return os.path.expanduser(os.path.expandvars(path))


def load_ssh_config(opts: SSHOptions) -> paramiko.SSHConfig:
    """The ssh_config named by the options, else ~/.ssh/config if present, else an empty one."""
    if opts.ssh_config:
        path = Path(_expand(opts.ssh_config))
        if not path.is_file():
            raise InputError("ssh_config file not found", str(path))
    else:
        path = Path.home() / ".ssh" / "config"
        if not path.is_file():
            return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_path(str(path))
    except (OSError, paramiko.ssh_exception.ConfigParseError) as exc:
        raise InputError(f"cannot parse ssh_config: {exc}", str(path)) from None


def resolve_route(spec: HostSpec, config: paramiko.SSHConfig | None = None) -> list[Hop]:
    """The hops to reach `spec` (bastions first), with ssh_config and SSHOptions applied.

    Precedence for the target: URL user/port > spec.ssh > ssh_config > defaults (local user, 22).
    A ProxyJump (spec.ssh.proxy_jump, else ssh_config's) may list several comma-separated hops;
    each is looked up in ssh_config by its own name (a hop's own ProxyJump is not followed).
    Jump hosts use their ssh_config IdentityFile, then spec.ssh.identity_file.
    """
    opts = spec.ssh
    config = config if config is not None else load_ssh_config(opts)
    url_user, host, url_port = parse_ssh_target(spec.target)
    found = config.lookup(host)
    extra_keys = (_expand(opts.identity_file),) if opts.identity_file else ()
    target = Hop(
        alias=host,
        hostname=found.get("hostname", host),
        port=_port(url_port or opts.port or found.get("port") or 22, host),
        user=url_user or opts.user or found.get("user") or getpass.getuser(),
        key_files=extra_keys or tuple(_expand(p) for p in found.get("identityfile", [])),
    )
    jump = opts.proxy_jump or found.get("proxyjump")
    hops: list[Hop] = []
    if jump and jump.strip().lower() != "none":
        for entry in jump.split(","):
            j_user, j_host, j_port = _parse_jump(entry)
            j_found = config.lookup(j_host)
            own = tuple(_expand(p) for p in j_found.get("identityfile", []))
            hops.append(
                Hop(
                    alias=j_host,
                    hostname=j_found.get("hostname", j_host),
                    port=_port(j_port or j_found.get("port") or 22, j_host),
                    user=j_user or j_found.get("user") or getpass.getuser(),
                    key_files=own + tuple(k for k in extra_keys if k not in own),
                )
            )
    return [*hops, target]


def _port(value: int | str, host: str) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise InputError(f"bad port {value!r} for {host}") from None
    if not 0 < port < 65536:
        raise InputError(f"bad port {port} for {host}")
    return port


def build_command(args: list[str], sudo: bool) -> str:
    """`[sudo -n] /bin/sh -s -- ARG...` with every argument shell-quoted (never interpolated)."""
    words = ["sudo", "-n"] if sudo else []
    words += ["/bin/sh", "-s", "--"]
    return " ".join(words + [shlex.quote(str(a)) for a in args])


def known_hosts_path(opts: SSHOptions, config: paramiko.SSHConfig | None = None, alias: str = "") -> Path:
    """spec.ssh.known_hosts, else ssh_config UserKnownHostsFile, else ~/.ssh/known_hosts."""
    if opts.known_hosts:
        return Path(_expand(opts.known_hosts))
    if config is not None:
        files = config.lookup(alias).get("userknownhostsfile")
        if files:
            return Path(_expand(files.split()[0]))
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


def _describe(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.fingerprint}"


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown key: reject, or (trust_on_first_use) accept and append it to the known_hosts file."""

    def __init__(self, path: Path, tofu: bool):
        self.path = path
        self.tofu = tofu

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if not self.tofu:
            raise HostKeyRejected(
                f"host key for {hostname} ({_describe(key)}) is not in {self.path}: "
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
        """TCP to the first hop, with TCP_NODELAY: without it Nagle + delayed ACKs cost ~40 ms per
        channel request/reply over loopback (measured ~95 ms vs ~14 ms per run)."""
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
        if self.known_hosts.is_file():
            try:
                known = known_host_keys(self.known_hosts)
            except (OSError, paramiko.SSHException) as exc:
                raise InputError(f"cannot read known_hosts: {exc}", str(self.known_hosts)) from None
            # only this host's entries, under the name paramiko looks up: the same check as loading the
            # whole file into the client, without parsing every other host's keys again (O(1), not O(fleet))
            name = hop.hostname if hop.port == 22 else f"[{hop.hostname}]:{hop.port}"
            for key_type, key in (known.lookup(name) or {}).items():
                client.get_host_keys().add(name, key_type, key)
        client.set_missing_host_key_policy(_HostKeyPolicy(self.known_hosts, self.opts.trust_on_first_use))
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
                raise Unreachable(f"{where}: no SSH banner within {timeout:.1f}s: the port accepts TCP "
                                  "connections but does not speak SSH") from None
            raise _map_connect_error(exc, hop, where, self.known_hosts, keyed) from None
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
            out, err, truncated = _pump(chan, request.script.encode(), deadline, max_output)
        except _Deadline:
            _signal(chan, "TERM")
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


class _Deadline(Exception):
    pass


def _pump(
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
            raise _Deadline
        if not progressed:
            wait = 0.01 if sent < len(stdin) else min(left, 0.2)
            select.select([chan], [], [], wait)


def _signal(chan: paramiko.Channel, name: str) -> None:
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


def _map_connect_error(
    exc: BaseException, hop: Hop, where: str, known_hosts: Path, keyed: bool
) -> BaseException:
    """Turn what paramiko/socket raised while connecting into Unreachable / AuthFailed / HostKeyRejected."""
    if isinstance(exc, TransportError):
        return exc
    if isinstance(exc, paramiko.BadHostKeyException):
        return HostKeyRejected(
            f"host key for {hop.known_hosts_name} CHANGED: server offers {_describe(exc.key)}, "
            f"{known_hosts} has {_describe(exc.expected_key)}. Possible man in the middle; if the "
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
