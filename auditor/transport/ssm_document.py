"""The purpose-built SSM document that embeds the probe, and the framing of its output (pure).

The document (schema 2.2, one `aws:runShellScript` step) carries the probe gzip-compressed and
base64-encoded (SSM refuses a document over 64 KB; the probe text alone is over 45 KB), so no `{{ … }}` in
the probe can be mistaken for a document parameter; the host needs base64 and gzip (coreutils and gzip are
in every supported AMI's minimal install). Its parameters:
- `binaries`: space-separated bare names or clean absolute paths (no `.`/`..` segments, no `//`, no
  trailing `/`; `allowedPattern` admits nothing else, all shell-inert) with `interpolationType: ENV_VAR`
  (the agent exports `SSM_binaries`; agents older than 3.3.2746 fall back to substituting it into a
  single-quoted string, which the pattern keeps inert);
- `nonce`: the run's framing nonce (32 lowercase hex, `probeargs.NONCE_PATTERN`), fed to the probe as
  the first line of its stdin (`AMI_NONCE=…`), never as an argument; same ENV_VAR style;
- `execVersions`: `yes` lets the probe run `--version` of root-only binaries (`--exec-versions`), `no`
  (default) never runs them; same ENV_VAR style;
- `deepCpu`: `yes` samples the hottest core's kernel stacks with perf (`--deep-cpu`), `no` (default);
  same ENV_VAR style;
- `executionTimeout`: seconds, used as the step's `timeoutSeconds`.

The script prints `HEADER`, then the probe's stdout (plus an exit-status trailer) gzip-compressed and
base64-encoded on one line, then `FOOTER`. SSM keeps only the first 24,000 characters of stdout, so a
missing footer means the output was cut; `decode_output` then returns what the partial gzip stream
still yields, marked truncated.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import shlex
import textwrap
import zlib
from dataclasses import dataclass
from typing import Any

from ..aws.ssm import DOCUMENT_NAME as DOCUMENT_NAME  # re-exported: the document is named once
from ..probeargs import CLEAN_PATH, DEEP_CPU_FLAG, EXEC_VERSIONS_FLAG, NAME, NONCE_PATTERN
from .base import DEFAULT_MAX_OUTPUT

STEP_NAME = "probe"
HEADER = "AMI-AUDITOR-SSM/1"
FOOTER = "AMI-AUDITOR-SSM/1 end"
# the wrapper's `$?`: anything between the mark's words is read, then checked (a host prints what it likes)
EXIT_MARK = re.compile(r"\n?@@AMI-AUDITOR-EXIT ([^@\n]*)@@\n?$")
_STATUS = re.compile(r"^[0-9]{1,3}$")
_ITEM = rf"({NAME}|{CLEAN_PATH})"
# bare names or clean absolute paths only; plain groups (portable to the service's regex engine), and no
# nested ambiguity: segments start with distinct characters and stop at `/` or ` ` (linear matching)
BINARIES_PATTERN = rf"^ *({_ITEM}( +{_ITEM})*)? *$".replace("(?:", "(")
_NONCE_RE = re.compile(NONCE_PATTERN)
EXEC_VERSIONS_PATTERN = r"^(yes|no)$"
TIMEOUT_PATTERN = r"^([1-9][0-9]{0,4}|1[0-6][0-9]{4}|17[0-1][0-9]{3}|172[0-7][0-9]{2}|172800)$"
_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
STDOUT_CAP = 24_000  # GetCommandInvocation.StandardOutputContent keeps this many characters
STDERR_CAP = 8_000

_PROBE_FN = """\
ami_auditor_probe() {{
  {{ printf 'AMI_NONCE=%s\\n' "$SSM_nonce"; base64 -d <<'AMI_AUDITOR_PROBE_B64' | gzip -dc
{b64}
AMI_AUDITOR_PROBE_B64
  }} | /bin/sh -s -- "$@"
  echo "@@AMI-AUDITOR-EXIT $?@@"
}}"""

_MAIN = f"""\
set -f
set -- $SSM_binaries
set +f
if [ "$SSM_execVersions" = yes ]; then set -- {EXEC_VERSIONS_FLAG} "$@"; fi
if [ "${{SSM_deepCpu:-no}}" = yes ]; then set -- {DEEP_CPU_FLAG} "$@"; fi
if command -v gzip >/dev/null 2>&1; then
  echo "{HEADER} gzip-base64"
  ami_auditor_probe "$@" | gzip -c | base64 | tr -d '\\n'
  echo
else
  echo "{HEADER} plain"
  ami_auditor_probe "$@"
fi
echo "{FOOTER}"
exit 0"""

_DOC_FALLBACK = "\n".join(
    f"if [ -z \"${{SSM_{name}+x}}\" ]; then SSM_{name}='{{{{ {name} }}}}'; fi"
    for name in ("binaries", "nonce", "execVersions", "deepCpu"))


def probe_sha256(script: str) -> str:
    return hashlib.sha256(script.encode()).hexdigest()


def wrapper_script(probe: str, binaries: list[str] | None = None, nonce: str | None = None,
                   exec_versions: bool = False, deep_cpu: bool = False) -> str:
    """The shell text SSM runs. With `binaries` (AWS-RunShellScript mode) they, the framing `nonce`,
    `exec_versions` and `deep_cpu` are set here, quoted; without, they come from the document's parameters."""
    packed = gzip.compress(probe.encode(), compresslevel=9, mtime=0)  # mtime 0: the same probe, the same document
    b64 = "\n".join(textwrap.wrap(base64.b64encode(packed).decode(), 76))
    if binaries is None:
        head = _DOC_FALLBACK
    else:
        if nonce is None or not _NONCE_RE.match(nonce):
            raise ValueError("AWS-RunShellScript mode needs the run's framing nonce")
        head = "\n".join(["SSM_binaries=" + shlex.quote(" ".join(binaries)), "SSM_nonce=" + shlex.quote(nonce),
                          "SSM_execVersions=" + ("yes" if exec_versions else "no"),
                          "SSM_deepCpu=" + ("yes" if deep_cpu else "no")])
    return "\n".join(["#!/bin/sh", f"# ami-auditor probe sha256:{probe_sha256(probe)}", head,
                      _PROBE_FN.format(b64=b64), _MAIN]) + "\n"


def document_content(probe: str, default_binaries: list[str]) -> dict[str, Any]:
    """The SSM Command document (schema 2.2) that runs `probe`."""
    return {
        "schemaVersion": "2.2",
        "description": f"ami-auditor read-only host probe (sha256:{probe_sha256(probe)}). Prints one "
                       "compressed snapshot; changes nothing on the instance.",
        "parameters": {
            "binaries": {
                "type": "String",
                "description": "Space-separated key binaries to fingerprint (names or absolute paths).",
                "default": " ".join(default_binaries),
                "allowedPattern": BINARIES_PATTERN,
                "interpolationType": "ENV_VAR",
            },
            "nonce": {
                "type": "String",
                "description": "This run's framing nonce (32 hex), chosen by ami-auditor; handed to the probe "
                               "on stdin. Required: no default, so a command without one is refused.",
                "allowedPattern": NONCE_PATTERN,
                "interpolationType": "ENV_VAR",
            },
            "execVersions": {
                "type": "String",
                "description": "yes: run `--version` of root-owned, root-only-writable binaries; no (default): "
                               "never run any binary.",
                "default": "no",
                "allowedPattern": EXEC_VERSIONS_PATTERN,
                "interpolationType": "ENV_VAR",
            },
            "deepCpu": {
                "type": "String",
                "description": "yes: sample the hottest core's kernel stacks with perf for 0.5 s (--deep cpu); "
                               "no (default): do not.",
                "default": "no",
                "allowedPattern": EXEC_VERSIONS_PATTERN,
                "interpolationType": "ENV_VAR",
            },
            "executionTimeout": {
                "type": "String",
                "description": "Seconds the probe may run before SSM stops it.",
                "default": "120",
                "allowedPattern": TIMEOUT_PATTERN,
            },
        },
        "mainSteps": [{
            "action": "aws:runShellScript",
            "name": STEP_NAME,
            "precondition": {"StringEquals": ["platformType", "Linux"]},
            "inputs": {
                "timeoutSeconds": "{{ executionTimeout }}",
                "runCommand": wrapper_script(probe).splitlines(),
            },
        }],
    }


def document_json(probe: str, default_binaries: list[str]) -> str:
    return json.dumps(document_content(probe, default_binaries), indent=2) + "\n"


def document_probe_sha256(content: str) -> str | None:
    """The probe hash recorded in an installed document's description (None if not ours)."""
    try:
        doc = json.loads(content)
    except ValueError:
        return None
    m = re.search(r"sha256:([0-9a-f]{64})", str(doc.get("description", "")) if isinstance(doc, dict) else "")
    return m.group(1) if m else None


class MalformedOutput(ValueError):
    """Framed output no wrapper of ours prints (a payload that is not base64, an exit mark that is no
    status): the host's output is rejected by name, never read as a cut stream or a pass."""


@dataclass(frozen=True)
class Decoded:
    """The probe's own stdout and exit status recovered from the SSM output."""

    stdout: str
    exit_status: int
    truncated: bool
    framed: bool  # False: the output did not come from our wrapper at all
    capped: bool = False  # the output went past `max_output` (decompressed); only the first part was kept


def decode_output(text: str, max_output: int = DEFAULT_MAX_OUTPUT) -> Decoded:
    """Undo the wrapper's framing and compression; a cut stream yields its readable prefix.

    Raises MalformedOutput for framed output no wrapper prints (not base64, an exit mark that is no status).
    Never more than `max_output` bytes are inflated (a gzip bomb yields its first `max_output` bytes,
    marked truncated and capped), streaming, so a small hostile object never becomes a huge allocation.
    """
    capped = False
    lines = text.split("\n", 2)
    if not lines[0].startswith(HEADER + " "):
        return Decoded(text, -1, False, False)
    mode = lines[0][len(HEADER) + 1:].strip()
    rest = "\n".join(lines[1:])
    complete = rest.rstrip("\n").endswith(FOOTER)
    body = rest.rstrip("\n")[: -len(FOOTER)] if complete else rest
    if mode == "gzip-base64":
        payload = "".join(body.split())
        payload = payload[: len(payload) // 4 * 4]
        try:  # a non-ASCII character raises ValueError, other garbage binascii.Error (a subclass)
            raw = base64.b64decode(payload, validate=True)
        except ValueError:
            bad = next((c for c in payload if c not in _B64), "?")
            raise MalformedOutput(f"payload is not base64 (character {bad!r})") from None
        inflater = zlib.decompressobj(wbits=31)
        try:
            out = inflater.decompress(raw, max_output)  # bounded: at most max_output bytes come out
        except zlib.error:
            out, complete = b"", False
        capped = len(out) >= max_output and not inflater.eof
        complete = complete and inflater.eof
        probe_out = out.decode("utf-8", "replace")
    else:
        capped = len(body) > max_output
        probe_out = body[:max_output]
    m = EXIT_MARK.search(probe_out)
    if m and not capped:
        status = m.group(1)
        if not _STATUS.match(status) or int(status) > 255:
            raise MalformedOutput(f"exit mark is not a shell status (0-255): {status[:20]!r}"
                                  + (f" ({len(status)} characters)" if len(status) > 20 else ""))
        return Decoded(probe_out[: m.start()] + "\n", int(status), not complete, True)
    return Decoded(probe_out, -1, True, True, capped)
