"""How many scanned hosts may use one SSH jump host (bastion / ProxyJump) at once.

Every host reached through a ProxyJump opens its own SSH connection to the jump host. sshd's
`MaxStartups` (OpenSSH default `10:30:100`) starts dropping new connections at random once 10 are
still unauthenticated, so a scan with `--parallel 64` behind one bastion would lose hosts to it. Per
jump host (`hostname:port`) this module bounds:

- handshakes: connections between TCP connect and authenticated (default 8, below MaxStartups' 10);
- connections: connections open at once (default 32), however large `--parallel` is.

A host waits for a connection slot before its `--deadline` starts (the wait ends when another host
through that bastion finishes, itself bounded by its deadline); the handshake wait is inside it.
"""

from __future__ import annotations

import threading

MAX_HANDSHAKES = 8
MAX_CONNECTIONS = 32

_lock = threading.Lock()
_handshakes: dict[str, threading.BoundedSemaphore] = {}
_connections: dict[str, threading.BoundedSemaphore] = {}


def _slot(table: dict[str, threading.BoundedSemaphore], key: str, size: int) -> threading.BoundedSemaphore:
    with _lock:
        sem = table.get(key)
        if sem is None:
            sem = table[key] = threading.BoundedSemaphore(size)
        return sem


def handshake_slot(key: str) -> threading.BoundedSemaphore:
    """The semaphore bounding unauthenticated connections to jump host `key` (`host:port`)."""
    return _slot(_handshakes, key, MAX_HANDSHAKES)


def connection_slot(key: str) -> threading.BoundedSemaphore:
    """The semaphore bounding open connections to jump host `key` (`host:port`)."""
    return _slot(_connections, key, MAX_CONNECTIONS)


def reset(handshakes: int = MAX_HANDSHAKES, connections: int = MAX_CONNECTIONS) -> None:
    """Forget every jump host's slots and use these bounds from now on (tests, long-lived callers)."""
    global MAX_HANDSHAKES, MAX_CONNECTIONS
    with _lock:
        MAX_HANDSHAKES, MAX_CONNECTIONS = handshakes, connections
        _handshakes.clear()
        _connections.clear()
