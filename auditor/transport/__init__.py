"""Transports by URL scheme: local, ssh://, ssm://, image://, ami://. A typed registry, no magic."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from ..errors import InputError
from ..models import HostSpec
from .base import Transport


def _local(spec: HostSpec) -> Transport:
    from .local import LocalTransport

    return LocalTransport(spec)


def _ssh(spec: HostSpec) -> Transport:
    from .ssh import SSHTransport

    return SSHTransport(spec)


def _ssm(spec: HostSpec) -> Transport:
    from .ssm import SSMTransport

    # one host only (`ssm://i-…` given alone): fleets of ssm:// hosts go through the batch (run/live_hosts.collect_ssm)
    return SSMTransport(spec)


def _image(spec: HostSpec) -> Transport:
    from .image import ImageTransport

    return ImageTransport(spec)


def _ami(spec: HostSpec) -> Transport:
    from .ami import AmiTransport

    return AmiTransport(spec)


TRANSPORTS: dict[str, Callable[[HostSpec], Transport]] = {
    "local": _local,
    "ssh": _ssh,
    "ssm": _ssm,
    "image": _image,
    "ami": _ami,
}


def scheme_of(target: str) -> str:
    """`local` → local; `ssh://h` → ssh; anything else must name a known scheme."""
    if target == "local":
        return "local"
    scheme = urlsplit(target).scheme
    if scheme not in TRANSPORTS:
        raise InputError(
            f"unknown target {target!r}: use local, ssh://[user@]host[:port], ssm://i-…, image:///path, ami://ami-…"
        )
    return scheme


# Schemes collected as one fleet batch (run/live_hosts.collect_ssm: one SendCommand per ≤ 50 instances, or one
# tag-targeted command) rather than host by host through `open_transport`.
BATCHED_SCHEMES = frozenset({"ssm"})


def batched(target: str) -> bool:
    """Whether `target` is collected in its scheme's fleet batch; an unknown scheme is not (it fails host by
    host, named, in `open_transport`)."""
    try:
        return scheme_of(target) in BATCHED_SCHEMES
    except InputError:
        return False


def open_transport(spec: HostSpec) -> Transport:
    """Make the transport that reaches `spec.target`."""
    return TRANSPORTS[scheme_of(spec.target)](spec)
