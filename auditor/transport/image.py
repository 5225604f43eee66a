"""Audit an unbooted root filesystem (a mounted AMI snapshot) from this machine.

The probe runs here with `--root DIR`: it reads files below DIR with this machine's tools, never
executes the image's own binaries, and reports runtime sections (kernel state, cgroups, CPU, network)
as not applicable.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import InputError
from ..models import CommandResult, HostSpec
from .base import DEFAULT_DEADLINE_S, DEFAULT_MAX_OUTPUT
from .local import LocalTransport


def image_root(target: str) -> Path:
    """`image:///mnt/root` → /mnt/root (must be an existing directory that looks like a root fs)."""
    parts = urlsplit(target)
    if parts.netloc:
        raise InputError(f"image target {target!r}: use image:///absolute/path (three slashes)")
    root = Path(unquote(parts.path))
    if not root.is_absolute() or ".." in root.parts:
        raise InputError(f"image target {target!r}: path must be absolute and clean")
    if not (root / "etc").is_dir():
        raise InputError(f"image target {target!r}: {root} has no etc/ (not a root filesystem)")
    return root


class ImageTransport:
    """Runs the probe locally against a mounted root filesystem."""

    name = "image"

    def __init__(self, spec: HostSpec):
        self.spec = spec
        self.root = image_root(spec.target)
        self._local = LocalTransport(spec)

    def run(
        self,
        script: str,
        args: list[str],
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> CommandResult:
        return self._local.run(script, ["--root", str(self.root), *args], deadline_s, max_output)

    def close(self) -> None:
        self._local.close()
