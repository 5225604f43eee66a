"""A `ProbeRequest` for a test script that is not the probe (transport tests run `echo`, `sleep`...)."""

from __future__ import annotations

from collections.abc import Sequence

from auditor.models import ProbeRequest

TEST_NONCE = "0" * 32  # the scripts these requests carry print no sections: the nonce frames nothing


def shell_request(script: str, argv: Sequence[str] = ()) -> ProbeRequest:
    """Run `script` with `argv` as a shell transport runs the probe (no flags decoded, nothing added)."""
    return ProbeRequest(script=script, nonce=TEST_NONCE, binaries=(), argv=tuple(argv))
