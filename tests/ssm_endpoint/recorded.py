"""One real output of the ami-auditor SSM document's script, recorded on this machine, for instances
that answer with it (`canned_runner`) instead of running a probe each."""

from __future__ import annotations

import os
import subprocess

from auditor.collect.probe import DEFAULT_BINARIES, probe_script
from auditor.transport.ssm_document import wrapper_script
from tests.framing_fixtures import FIXTURE_NONCE


def recorded_document_output() -> str:
    """What the document's script prints here, with its parameters set as the agent would set them
    (framed with FIXTURE_NONCE; `canned_runner` re-frames it with each command's nonce)."""
    env = {"SSM_binaries": " ".join(DEFAULT_BINARIES), "SSM_nonce": FIXTURE_NONCE, "SSM_execVersions": "no",
           "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
    return subprocess.run(["/bin/sh", "-c", wrapper_script(probe_script())], capture_output=True, text=True,
                          env=env, check=True).stdout
