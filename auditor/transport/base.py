"""The transport contract: run one typed probe request on a host, within a deadline, with bounded output."""

from __future__ import annotations

from typing import Protocol

from ..models import CommandResult, ProbeRequest

DEFAULT_DEADLINE_S = 60.0
DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024  # bytes of stdout kept; the rest is dropped and `truncated` set


class Transport(Protocol):
    """How to reach one host. Quirks (SSM caps, paramiko windows) stay behind this interface.

    `run` carries out a `ProbeRequest` (built by collect): a shell transport feeds `request.script` to
    `/bin/sh -s -- ARGV...` on the host (argv quoted by the transport, never interpolated into the script);
    a reader that runs no shell (image) reads the typed fields. It never decodes flags back out of argv.
    It returns stdout, stderr and the exit status.
    It raises a `TransportError` subclass (Unreachable, AuthFailed, HostKeyRejected, ProbeTimeout)
    when the host cannot be reached or does not finish before `deadline_s`.
    """

    name: str

    def run(
        self,
        request: ProbeRequest,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> CommandResult: ...

    def close(self) -> None: ...
