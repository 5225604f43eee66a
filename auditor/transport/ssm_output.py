"""One SSM invocation's result as a host outcome: a CommandResult, or a TransportError naming why not.

Input is an invocation as GetCommandInvocation shapes it (`Status`, `StatusDetails`, `ResponseCode`,
`StandardOutputContent`, `StandardErrorContent`, `ExecutionElapsedTime`); a ListCommandInvocations
row with details is reshaped to that (`from_row`), and output read from S3 is passed beside it. The
document's framing is undone by `ssm_document.decode_output`; a cut or capped stream says so in stderr.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

from ..errors import AuthFailed, ProbeTimeout, TransportError, Unreachable
from ..models import CommandResult
from .base import DEFAULT_MAX_OUTPUT
from .ssm_document import Decoded, MalformedOutput, decode_output

Outcome = CommandResult | TransportError
TERMINAL = {"success", "cancelled", "timedout", "failed"}
MAX_S3_OUTPUT_BYTES = 32 * 1024 * 1024  # bytes of an S3 output object read at most (the rest is never fetched)
ERROR_MARK = "\n----------ERROR-------\n"  # how the agent joins a plugin's stdout and stderr in `Output`
_ELAPSED = re.compile(r"^PT(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?$")


class Invocation(TypedDict, total=False):
    """GetCommandInvocation's answer: the fields read here, by AWS's names (botocore parses them to these types;
    a listed row without a status, reshaped by from_row, has None)."""

    Status: str | None
    StatusDetails: str | None
    ResponseCode: int
    StandardOutputContent: str
    StandardErrorContent: str
    ExecutionElapsedTime: str
    StandardOutputUrl: str


class Plugin(TypedDict, total=False):
    """One `CommandPlugins` entry of a ListCommandInvocations row (Details=True)."""

    Output: str
    ResponseCode: int
    ResponseStartDateTime: datetime
    ResponseFinishDateTime: datetime
    StandardOutputUrl: str


class InvocationRow(TypedDict, total=False):
    """A ListCommandInvocations row: the fields read here."""

    InstanceId: str
    Status: str
    StatusDetails: str
    CommandPlugins: list[Plugin]


class CommandInfo(TypedDict, total=False):
    """A ListCommands `Commands` entry: the fields read here."""

    Status: str
    StatusDetails: str
    TargetCount: int


@dataclass(frozen=True)
class Reading:
    """What turning output into an outcome depends on: the run's settings and the size limits."""

    s3_bucket: str | None = None
    targeted: bool = False
    max_errors: str = "10%"
    max_output: int = DEFAULT_MAX_OUTPUT  # decompressed probe output kept per host
    s3_limit: int = MAX_S3_OUTPUT_BYTES


def norm(text: str | None) -> str:
    return (text or "").replace(" ", "").lower()


def terminal(inv: Invocation | InvocationRow) -> bool:
    return norm(inv.get("Status")) in TERMINAL


def elapsed_s(text: str | None) -> float:
    """`PT1M2.5S` → 62.5 (0.0 when absent or unparsable)."""
    m = _ELAPSED.match(text or "")
    if not m:
        return 0.0
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def from_row(row: InvocationRow) -> Invocation:
    """A ListCommandInvocations row (Details=True) in GetCommandInvocation's shape. Its plugin `Output`
    keeps only 2,500 characters (stdout, then the agent's ERROR mark and stderr)."""
    plugin: Plugin = (row.get("CommandPlugins") or [{}])[0]
    out, _, err = str(plugin.get("Output") or "").partition(ERROR_MARK)
    started, finished = plugin.get("ResponseStartDateTime"), plugin.get("ResponseFinishDateTime")
    took = (finished - started).total_seconds() if isinstance(started, datetime) and isinstance(finished, datetime) \
        else 0.0
    return {"Status": row.get("Status"), "StatusDetails": row.get("StatusDetails"),
            "ResponseCode": plugin.get("ResponseCode", -1), "StandardOutputContent": out,
            "StandardErrorContent": err, "ExecutionElapsedTime": f"PT{max(0.0, took):.3f}S",
            "StandardOutputUrl": plugin.get("StandardOutputUrl") or ""}


def status_error(inv: Invocation) -> TransportError | None:
    """Map a terminal invocation that produced no usable output to a host status; AWS's detail kept."""
    status, details, code = inv.get("Status"), inv.get("StatusDetails"), inv.get("ResponseCode")
    stderr = (inv.get("StandardErrorContent") or "").strip()
    text = f"SSM {status}/{details} (ResponseCode {code})" + (f": {stderr[-300:]}" if stderr else "")
    d = norm(details)
    if d in ("undeliverable", "deliverytimedout"):
        return Unreachable(text)
    if d == "executiontimedout" or (norm(status) == "timedout" and d != "deliverytimedout"):
        return ProbeTimeout(text)
    if d == "accessdenied":
        return AuthFailed(text)
    if code == -1 and d not in ("terminated", "cancelled", "canceled"):
        return Unreachable(text + " — the command never ran")
    return TransportError(text)


def decode(text: str, reading: Reading) -> Decoded | TransportError:
    """`decode_output`, where any failure is this host's named error: one host's hostile output must
    never stop the rest of the fleet's scan."""
    try:
        return decode_output(text, reading.max_output)
    except Exception as exc:  # noqa: BLE001 - host-controlled bytes: whatever breaks is that host's failure
        return TransportError(f"SSM output rejected: {exc}" if isinstance(exc, MalformedOutput)
                              else f"SSM output could not be decoded: {type(exc).__name__}: {str(exc)[:200]}")


def complete(text: str, reading: Reading) -> Decoded | TransportError | None:
    """The decoded output when it is whole (framed, footer and gzip end seen, not capped), its error when
    it cannot be decoded, else None: a whole (or broken) output needs no invocation status to be final."""
    decoded = decode(text, reading)
    if isinstance(decoded, TransportError):
        return decoded
    return decoded if decoded.framed and not decoded.truncated and not decoded.capped else None


def result_of(decoded: Decoded, stderr: str = "", duration_s: float = 0.0) -> CommandResult:
    return CommandResult(stdout=decoded.stdout, stderr=stderr, exit_status=decoded.exit_status,
                         duration_s=duration_s, truncated=decoded.truncated)


def outcome(inv: Invocation, reading: Reading, s3_text: str | None = None, s3_capped: bool = False,
            note: str = "") -> Outcome:
    """The host outcome of a terminal invocation; `s3_text`: its full stdout read from S3 (else the
    invocation's own, cut at 24,000 characters); `note`: a remark for stderr (e.g. why S3 was not read)."""
    stdout = inv.get("StandardOutputContent") or ""
    stderr = (inv.get("StandardErrorContent") or "") + note
    decoded = decode(stdout if s3_text is None else s3_text, reading)
    status = norm(inv.get("Status"))
    if isinstance(decoded, TransportError):
        return decoded if status in ("success", "failed") else status_error(inv) or decoded
    if s3_capped:
        stderr += (f"\n[ami-auditor] S3 output object is over the {reading.s3_limit} byte limit; read only its "
                   "first part (output truncated)")
    if decoded.capped:
        stderr += (f"\n[ami-auditor] probe output is over the {reading.max_output} byte limit once decompressed; "
                   "kept only its first part (output truncated)")
    usable = decoded.framed and bool(decoded.stdout.strip())
    if status != "success" and (status != "failed" or not usable):
        err = status_error(inv) or TransportError(f"SSM status {inv.get('Status')}")
        if reading.targeted and norm(inv.get("StatusDetails")) == "terminated":
            err = TransportError(f"{err} — not run: SSM stopped sending the command once more than "
                                 f"MaxErrors={reading.max_errors} invocations had failed")
        return err
    if not decoded.framed:
        return TransportError(f"SSM output was not produced by the ami-auditor wrapper: {stdout[:120]!r}")
    if decoded.truncated and not (decoded.capped or s3_capped) and s3_text is None:
        stderr += (f"\n[ami-auditor] SSM kept only {len(stdout)} characters of output"
                   + ("" if reading.s3_bucket else "; set --ssm-s3-bucket to read it in full"))
    elif decoded.truncated and not (decoded.capped or s3_capped):
        stderr += "\n[ami-auditor] the S3 output object ends before the wrapper's end mark (output truncated)"
    return result_of(decoded, stderr, elapsed_s(inv.get("ExecutionElapsedTime")))
