"""The transport registry says which targets are collected in a fleet batch (run/live_hosts.collect_hosts asks it
instead of matching an `ssm://` prefix)."""

from __future__ import annotations

import pytest

from auditor.transport import BATCHED_SCHEMES, TRANSPORTS, batched


@pytest.mark.parametrize(("target", "expected"), [
    ("ssm://i-0123456789abcdef0", True),
    ("ssm://i-0123456789abcdef0?region=eu-west-1", True),
    ("SSM://i-0123456789abcdef0", True),  # a URL scheme is case-insensitive
    ("ssh://root@10.0.0.1", False),
    ("local", False),
    ("image:///mnt/root", False),
    ("ami://ami-0123456789abcdef0", False),
    ("gopher://x", False),  # unknown: collected host by host, where open_transport names the error
])
def test_batched_follows_the_registry(target: str, expected: bool) -> None:
    assert batched(target) is expected


def test_every_batched_scheme_is_registered() -> None:
    assert set(TRANSPORTS) >= BATCHED_SCHEMES
