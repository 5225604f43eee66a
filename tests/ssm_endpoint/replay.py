"""Replay mode: every simulated instance answers with one recorded real probe output, re-framed with the
command's nonce and carrying the instance's own identity (instance id, AMI, type, AZ, AZ ID, region,
hostname, machine-id, boot id). No host runs anything: a fleet of 10,000 or 100,000 instances costs the
endpoint one gzip per invocation.

The recording is the ami-auditor document's real output (`recorded_document_output()`: the probe run
on this machine, or any captured document output); only its identity sections are rewritten, so every
other fact is what a real host printed.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from auditor.collect import framing
from auditor.transport.ssm_document import FOOTER, HEADER, decode_output

# Runner: (script, env, timeout_s) -> (stdout, stderr, exit status), as server.Runner
Runner = Callable[[str, dict[str, str], float], tuple[str, str, int]]
_SCRIPT_NONCE = re.compile(r"^SSM_nonce='?([0-9a-f]{32})'?$", re.M)
IMDS_KEYS = (("instance_id", "instance-id"), ("ami_id", "ami-id"), ("instance_type", "instance-type"),
             ("az", "placement/availability-zone"), ("az_id", "placement/availability-zone-id"),
             ("region", "placement/region"))


@dataclass(frozen=True)
class Identity:
    """What differs between instances of one image: EC2's view of it."""

    instance_id: str
    ami_id: str = "ami-0123456789abcdef0"
    instance_type: str = "m6i.large"
    az: str = "us-east-1a"
    az_id: str = "use1-az1"
    region: str = "us-east-1"


class Replay:
    """A recorded document output, decoded once; `runner(identity)` answers as that instance would."""

    def __init__(self, document_output: str):
        decoded = decode_output(document_output)
        if not decoded.framed or decoded.truncated:
            raise ValueError("replay needs a whole ami-auditor document output")
        first = next(m for m in map(framing.START_RE.match, decoded.stdout.split("\n")) if m)
        self.nonce, self.raw, self.exit_status = first.group("nonce"), decoded.stdout, decoded.exit_status

    def section(self, name: str, body: str, text: str) -> str:
        """`text` with section `name` replaced by `body` (rc 0), or with it added when the recording lacks it."""
        pattern = re.compile(rf"^{re.escape(framing.start_marker(self.nonce, name))}\n.*?\n"
                             rf"@@AMI-AUDITOR-END {self.nonce} {name} rc=\d+@@\n", re.M | re.S)
        new = framing.section_text(self.nonce, name, body)
        replaced, n = pattern.subn(lambda _: new, text, count=1)
        return replaced if n else new + text

    def answer(self, identity: Identity, nonce: str) -> str:
        """The document output this instance prints for a command carrying `nonce`."""
        imds = "\n".join(f"{key}={getattr(identity, attr)}" for attr, key in IMDS_KEYS)
        text = self.section("imds", imds, self.raw)
        digest = hashlib.sha256(identity.instance_id.encode()).hexdigest()
        text = re.sub(r"^hostname=.*$", f"hostname=ip-{int(digest[:6], 16) % 250}-{identity.instance_id[2:]}",
                      text, count=1, flags=re.M)
        text = re.sub(r"^machine_id=.*$", f"machine_id={digest[:32]}", text, count=1, flags=re.M)
        text = re.sub(r"^boot_id=.*$", f"boot_id={digest[32:40]}-{digest[40:44]}-{digest[44:48]}-"
                      f"{digest[48:52]}-{digest[52:64]}", text, count=1, flags=re.M)
        text = text.replace(f" {self.nonce} ", f" {nonce} ").replace(f"DONE {self.nonce}@@", f"DONE {nonce}@@")
        raw = text + f"@@AMI-AUDITOR-EXIT {self.exit_status}@@\n"
        payload = base64.b64encode(gzip.compress(raw.encode(), compresslevel=6, mtime=0)).decode()
        return f"{HEADER} gzip-base64\n{payload}\n{FOOTER}\n"

    def runner(self, identity: Identity) -> Runner:
        def run(script: str, env: dict[str, str], timeout: float) -> tuple[str, str, int]:
            m = _SCRIPT_NONCE.search(script)
            nonce = env.get("SSM_nonce") or (m.group(1) if m else None)
            if not nonce:
                return "", "replay: the command carries no nonce", 1
            return self.answer(identity, nonce), "", 0

        return run
