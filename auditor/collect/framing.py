"""Section framing with a per-run nonce (pure; no I/O).

Every run of the probe gets a fresh random nonce chosen by the scanner. The probe learns it from the
first line of the script it is sent (`AMI_NONCE=<hex>`; never from argv, which other users on the host
can read in /proc), and prints every marker with it:

    @@AMI-AUDITOR-SECTION <nonce> <name>@@
    ... section body (host content) ...
    @@AMI-AUDITOR-END <nonce> <name> rc=<N>@@
    @@AMI-AUDITOR-DONE <nonce>@@

A host cannot know the nonce before the run, so text it plants in a file the probe prints can never
open, close or replace a section. Producers of section text other than the shell probe (the offline
image reader) use the builders below so the format has one definition.
"""

from __future__ import annotations

import re
import secrets

NONCE_HEX_LEN = 32
NONCE_RE = re.compile(rf"^[0-9a-f]{{{NONCE_HEX_LEN}}}$")
_SCRIPT_HEAD = re.compile(rf"^AMI_NONCE=([0-9a-f]{{{NONCE_HEX_LEN}}})\n")


def new_nonce() -> str:
    """A fresh 128-bit nonce, lowercase hex."""
    return secrets.token_hex(NONCE_HEX_LEN // 2)


def with_nonce(script: str, nonce: str) -> str:
    """The probe script prefixed with the line that hands it the nonce."""
    if not NONCE_RE.match(nonce):
        raise ValueError("nonce must be 32 lowercase hex characters")
    return f"AMI_NONCE={nonce}\n{script}"


def nonce_of(script: str) -> str | None:
    """The nonce a script produced by `with_nonce` carries (None when it carries none)."""
    m = _SCRIPT_HEAD.match(script)
    return m.group(1) if m else None


SECTION_NAME = r"[a-z_]{1,64}"
START_RE = re.compile(rf"^@@AMI-AUDITOR-SECTION (?P<nonce>[0-9a-f]{{{NONCE_HEX_LEN}}}) (?P<name>{SECTION_NAME})@@$")
END_RE = re.compile(
    rf"^@@AMI-AUDITOR-END (?P<nonce>[0-9a-f]{{{NONCE_HEX_LEN}}}) (?P<name>{SECTION_NAME}) rc=(?P<rc>\d{{1,3}})@@$")
# A command the probe checked failed inside a section (probe.sh `fail`): the reason, one line, host text
# folded; taken out of the section's body, so no parser ever reads it as data.
FAILED_RE = re.compile(rf"^@@AMI-AUDITOR-FAILED (?P<nonce>[0-9a-f]{{{NONCE_HEX_LEN}}}) (?P<reason>.{{0,2000}})@@$")
DONE_RE = re.compile(rf"^@@AMI-AUDITOR-DONE (?P<nonce>[0-9a-f]{{{NONCE_HEX_LEN}}})@@$")


def start_marker(nonce: str, name: str) -> str:
    return f"@@AMI-AUDITOR-SECTION {nonce} {name}@@"


def end_marker(nonce: str, name: str, rc: int) -> str:
    return f"@@AMI-AUDITOR-END {nonce} {name} rc={rc}@@"


def failed_marker(nonce: str, reason: str) -> str:
    """A FAILED line (probe.sh `fail`): `reason` folded to one line and cut to what FAILED_RE takes."""
    return f"@@AMI-AUDITOR-FAILED {nonce} {' '.join(reason.split())[:2000]}@@"


def done_marker(nonce: str) -> str:
    return f"@@AMI-AUDITOR-DONE {nonce}@@"


def section_text(nonce: str, name: str, body: str, rc: int = 0) -> str:
    """One complete section as the probe prints it (body, a newline, then the end marker on its own line)."""
    return f"{start_marker(nonce, name)}\n{body}\n{end_marker(nonce, name, rc)}\n"
