"""The transport contract: run one script on a host, within a deadline, with bounded output."""

from __future__ import annotations

from typing import Protocol

from ..models import CommandResult

DEFAULT_DEADLINE_S = 60.0
DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024  # bytes of stdout kept; the rest is dropped and `truncated` set


class Transport(Protocol):
    """How to reach one host. Quirks (SSM caps, paramiko windows) stay behind this interface.

    `run` feeds `script` to `/bin/sh -s -- ARGS...` on the host (args are quoted by the transport,
    never interpolated into the script), and returns stdout, stderr and the exit status.
    It raises a `TransportError` subclass (Unreachable, AuthFailed, HostKeyRejected, ProbeTimeout)
    when the host cannot be reached or does not finish before `deadline_s`.
    """

    name: str

    def run(
        self,
        script: str,
        args: list[str],
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> CommandResult: ...

    def close(self) -> None: ...
