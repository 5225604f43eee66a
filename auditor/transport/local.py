"""Run the probe on this machine with /bin/sh (no network, no cloud account)."""

from __future__ import annotations

import subprocess
import time

from ..errors import ProbeTimeout
from ..models import CommandResult, HostSpec, ProbeRequest
from .base import DEFAULT_DEADLINE_S, DEFAULT_MAX_OUTPUT


class LocalTransport:
    """Runs the request's script with `/bin/sh -s -- ARGV` as the current user."""

    name = "local"

    def __init__(self, spec: HostSpec | None = None, shell: str = "/bin/sh"):
        self.spec = spec
        self.shell = shell

    def run(
        self,
        request: ProbeRequest,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> CommandResult:
        started = time.monotonic()
        try:
            proc = subprocess.run(
                [self.shell, "-s", "--", *request.argv],
                input=request.script.encode(),
                capture_output=True,
                timeout=deadline_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ProbeTimeout(f"probe did not finish within {deadline_s:.0f}s") from exc
        out = proc.stdout
        truncated = len(out) > max_output
        return CommandResult(
            stdout=out[:max_output].decode("utf-8", "replace"),
            stderr=proc.stderr[-65536:].decode("utf-8", "replace"),
            exit_status=proc.returncode,
            duration_s=time.monotonic() - started,
            truncated=truncated,
        )

    def close(self) -> None:
        """Nothing to release."""
