"""Audit an unbooted root filesystem (a mounted AMI snapshot) from this machine.

The image is untrusted data: it is read in Python through `ImageFS`, which resolves every path inside
the image root as chroot would (links re-rooted, `..` clamped, loops refused, regular files only,
bounded reads) and reports links that lead out of it. The probe script is not run; the same sections
are produced by the image room (`auditor.image.sections`), framed with the request's nonce. Nothing in the
image is executed; runtime sections (kernel state, cgroups, CPU, network) are not applicable.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import InputError, TransportError
from ..image.fs import ImageFS
from ..image.sections import ImageSections
from ..models import CommandResult, HostSpec, ProbeRequest
from .base import DEFAULT_DEADLINE_S, DEFAULT_MAX_OUTPUT


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
    """Reads a mounted root filesystem in-process, confined to its root."""

    name = "image"

    def __init__(self, spec: HostSpec):
        self.spec = spec
        self.root = image_root(spec.target)

    def run(
        self,
        request: ProbeRequest,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> CommandResult:
        """Fingerprints `request.binaries` (with `exec_versions` each binary says its version was refused:
        an image's binaries are never run) and frames the sections with `request.nonce`; the script is
        not run."""
        started = time.monotonic()
        try:
            with ImageFS(self.root, deadline=started + deadline_s) as fs:
                text = ImageSections(fs, request.nonce, list(request.binaries), request.exec_versions).text()
        except OSError as exc:
            raise TransportError(f"image {self.root}: {exc.strerror or exc}") from exc
        data = text.encode("utf-8", "replace")
        return CommandResult(
            stdout=data[:max_output].decode("utf-8", "replace"),
            stderr="",
            exit_status=0,
            duration_s=time.monotonic() - started,
            truncated=len(data) > max_output,
        )

    def close(self) -> None:
        """Nothing held between runs."""
