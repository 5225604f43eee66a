"""Run the probe through AWS Systems Manager Run Command (boto3), one SendCommand per ≤ 50 instances,
or (settings.targets, `--ssm-targets`) ONE SendCommand with tag `Targets`, MaxConcurrency and MaxErrors.

Quirks handled here (FIELD-NOTES §8): botocore does not check SendCommand's 50-id limit, so batches
are cut here; only instances whose agent is `Online` are sent a command (one unmanaged id fails a
whole SendCommand); `TimeoutSeconds` (delivery) and `executionTimeout` are always set; polling is our
own (jittered, growing interval, a deadline) — not the ~100 s waiter; a missing invocation right
after SendCommand means "not yet"; StandardOutputContent keeps 24,000 characters, so the document
compresses its output and a cut stream is detected (full output read from S3 when a bucket is set);
throttling is retried by botocore's adaptive mode. Tag-targeted commands: SSM resolves the tag itself,
so an expected instance it never invoked is found out with ListCommands once the command is terminal,
and instances it invoked that discovery did not return are left out of the results (a note names them).
"""

from __future__ import annotations

import contextlib
import functools
import math
import random
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote, urlsplit

from ..aws.api import THROTTLING, error_for_aws
from ..aws.api import clients as aws_clients
from ..aws.api import error_code as _aws_error
from ..aws.ssm import (
    MAX_IDS_PER_COMMAND,
    MAX_TARGET_KEYS,
    MAX_TARGET_VALUES,
    RUN_SHELL_SCRIPT,
    SSMSettings,
    chunks,
    ping_statuses,
    rate_count,
)
from ..collect.framing import new_nonce, nonce_of
from ..collect.probe import DEEP_CPU_FLAG, EXEC_VERSIONS_FLAG, split_probe_args
from ..errors import AuthFailed, ProbeTimeout, TransportError, Unreachable
from ..models import CommandResult, HostSpec
from .base import DEFAULT_DEADLINE_S, DEFAULT_MAX_OUTPUT
from .ssm_document import decode_output, document_probe_sha256, probe_sha256, wrapper_script

MAX_DELIVERY_TIMEOUT_S = 2_592_000
MIN_DELIVERY_TIMEOUT_S = 30  # SendCommand TimeoutSeconds minimum
MAX_S3_OUTPUT_BYTES = 32 * 1024 * 1024  # bytes of an S3 output object read at most (the rest is never fetched)
Outcome = CommandResult | TransportError


def settings_of(spec: HostSpec) -> SSMSettings:
    """The spec's SSM settings (HostSpec.options["ssm"]), with a target's `?region=` winning."""
    base = spec.options.get("ssm")
    base = base if isinstance(base, SSMSettings) else SSMSettings()
    region = spec.options.get("region")
    return replace(base, region=region) if region and region != base.region else base


def instance_id_of(spec: HostSpec) -> str:
    return urlsplit(spec.target).netloc


_ELAPSED = re.compile(r"^PT(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?$")


def elapsed_s(text: str | None) -> float:
    """`PT1M2.5S` → 62.5 (0.0 when absent or unparsable)."""
    m = _ELAPSED.match(text or "")
    if not m:
        return 0.0
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def _norm(text: str | None) -> str:
    return (text or "").replace(" ", "").lower()


TERMINAL = {"success", "cancelled", "timedout", "failed"}


def status_error(inv: dict[str, Any]) -> TransportError | None:
    """Map a terminal invocation that produced no usable output to a host status; AWS's detail kept."""
    status, details, code = inv.get("Status"), inv.get("StatusDetails"), inv.get("ResponseCode")
    stderr = (inv.get("StandardErrorContent") or "").strip()
    text = f"SSM {status}/{details} (ResponseCode {code})" + (f": {stderr[-300:]}" if stderr else "")
    d = _norm(details)
    if d in ("undeliverable", "deliverytimedout"):
        return Unreachable(text)
    if d == "executiontimedout" or (_norm(status) == "timedout" and d != "deliverytimedout"):
        return ProbeTimeout(text)
    if d == "accessdenied":
        return AuthFailed(text)
    if code == -1 and d not in ("terminated", "cancelled", "canceled"):
        return Unreachable(text + " — the command never ran")
    return TransportError(text)


@dataclass
class Sent:
    """One sent command: the instances still awaited, when to give up, and (Targets mode) what SSM did."""

    ids: set[str]
    deadline: float
    targeted: bool = False
    known: frozenset[str] = frozenset()  # Targets mode: every instance discovery returned
    extra: set[str] = field(default_factory=set)  # Targets mode: invoked, but not returned by discovery
    rounds: int = 0  # polling rounds that read the invocation list


class SSMBatch:
    """One run of a script on many instances that share settings (region, profile, document, bucket).

    Framing: every SendCommand carries its own fresh nonce (document parameter `nonce`, or set inline in
    AWS-RunShellScript mode) and each result records it. A script that already carries one (`with_nonce`,
    the single-host path) keeps it. Instances of one command share its nonce; none can see another's output.
    """

    s3_limit = MAX_S3_OUTPUT_BYTES
    max_output = DEFAULT_MAX_OUTPUT  # decompressed probe output kept per host

    def __init__(self, settings: SSMSettings, script: str, args: list[str], deadline_s: float,
                 clients: tuple[Any, Any] | None = None, sleep: Callable[[float], None] = time.sleep):
        self.settings = settings
        self.fixed_nonce = nonce_of(script)
        self.script = script.split("\n", 1)[1] if self.fixed_nonce else script
        flags, self.args = split_probe_args(args)
        self.exec_versions = EXEC_VERSIONS_FLAG in flags
        self.deep_cpu = DEEP_CPU_FLAG in flags
        self.nonces: dict[str, str] = {}  # command id → the nonce it was sent with
        self.deadline_s = deadline_s
        self.exec_timeout = max(1, math.ceil(deadline_s))
        self.delivery_timeout = max(MIN_DELIVERY_TIMEOUT_S, self.exec_timeout)
        self.ssm, self.s3 = clients or aws_clients(settings.region, settings.profile, "ssm", "s3")
        self.sleep = sleep
        self.poll_error = ""
        self.notes: list[str] = []

    # -- the steps ------------------------------------------------------------------------------

    def run(self, instance_ids: list[str], known_ping: dict[str, str] | None = None) -> dict[str, Outcome]:
        """Every instance id gets an outcome: a CommandResult or a TransportError (never raises).

        `known_ping`: PingStatus already learnt (EC2 discovery joins it); the rest is looked up.
        """
        out: dict[str, Outcome] = {}
        ping = dict(known_ping or {})
        self.until = time.monotonic() + self.deadline_s
        try:
            self.check_document()
            ping.update(ping_statuses(self.ssm, [i for i in instance_ids if i not in ping]))
        except TransportError as exc:
            return dict.fromkeys(instance_ids, exc)
        online = []
        for iid in instance_ids:
            state = ping.get(iid)
            if state == "Online":
                online.append(iid)
            else:
                managed = state and state != "NotManaged"
                why = f"SSM agent {state}" if managed else "not a managed instance (no SSM agent registered)"
                out[iid] = Unreachable(f"{why}; no command sent")
        grace = max(10.0, self.deadline_s / 4)
        pending: dict[str, Sent] = {}
        if self.settings.targets and online:
            waves = self.waves(len(online))
            try:
                command_id = self.throttled(lambda: self.send_targets(waves))
            except Exception as exc:  # noqa: BLE001
                out.update(dict.fromkeys(online, error_for_aws(exc, "SendCommand")))
            else:
                pending[command_id] = Sent(set(online), time.monotonic() + waves * self.deadline_s + grace,
                                           targeted=True, known=frozenset(instance_ids))
        else:
            for batch in chunks(online):
                try:
                    command_id = self.throttled(functools.partial(self.send, batch))
                except Exception as exc:  # noqa: BLE001 - the batch's hosts get the error, the rest go on
                    out.update(dict.fromkeys(batch, error_for_aws(exc, "SendCommand")))
                    continue
                pending[command_id] = Sent(set(batch), time.monotonic() + self.deadline_s + grace)
        out.update(self.poll(pending))
        return out

    def throttled(self, call: Callable[[], str]) -> str:
        """`call()` (a SendCommand), retried with jittered backoff while SSM throttles it and the deadline
        allows; then its error stands."""
        delay = 0.5
        while True:
            try:
                return call()
            except Exception as exc:
                if _aws_error(exc)[0] not in THROTTLING or time.monotonic() + delay > self.until:
                    raise
            self.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, 4.0)

    def waves(self, expected: int) -> int:
        """How many rounds of MaxConcurrency instances the expected targets take (≥ 1)."""
        return max(1, math.ceil(expected / rate_count(self.settings.max_concurrency, expected, at_least=1)))

    def check_document(self) -> None:
        """The installed document must embed this very script (else its output would not parse)."""
        if self.settings.document is None:
            return
        try:
            doc = self.ssm.get_document(Name=self.settings.document, DocumentFormat="JSON")
        except Exception as exc:  # noqa: BLE001
            err = error_for_aws(exc, f"GetDocument {self.settings.document}")
            if "InvalidDocument" in str(err):
                err = TransportError(f"{err} — create it with `ami-auditor ssm install-document`")
            raise err from None
        have, want = document_probe_sha256(doc.get("Content") or ""), probe_sha256(self.script)
        if have != want:
            raise TransportError(
                f"SSM document {self.settings.document} runs probe sha256:{(have or 'unknown')[:12]}, this "
                f"ami-auditor needs sha256:{want[:12]}: run `ami-auditor ssm install-document`"
            )

    def send(self, instance_ids: list[str]) -> str:
        """SendCommand for ≤ 50 instance ids; returns the command id."""
        assert 0 < len(instance_ids) <= MAX_IDS_PER_COMMAND
        nonce = self.fixed_nonce or new_nonce()
        command_id = self.ssm.send_command(InstanceIds=instance_ids,
                                           **self.command_kwargs(self.delivery_timeout, nonce))["Command"]["CommandId"]
        self.nonces[command_id] = nonce
        return command_id

    def send_targets(self, waves: int) -> str:
        """ONE SendCommand with the tag Targets, MaxConcurrency and MaxErrors; returns the command id.

        Delivery timeout covers the waves MaxConcurrency makes: a queued invocation must still start.
        """
        targets = [{"Key": key, "Values": list(values)} for key, values in self.settings.targets]
        assert 0 < len(targets) <= MAX_TARGET_KEYS and all(len(t["Values"]) <= MAX_TARGET_VALUES for t in targets)
        delivery = min(MAX_DELIVERY_TIMEOUT_S, max(self.delivery_timeout, waves * self.exec_timeout))
        nonce = self.fixed_nonce or new_nonce()
        kwargs = self.command_kwargs(delivery, nonce)
        command_id = self.ssm.send_command(Targets=targets, MaxConcurrency=self.settings.max_concurrency,
                                           MaxErrors=self.settings.max_errors, **kwargs)["Command"]["CommandId"]
        self.nonces[command_id] = nonce
        return command_id

    def command_kwargs(self, delivery_timeout: int, nonce: str) -> dict[str, Any]:
        """SendCommand's arguments other than what it targets: document, parameters (with this command's
        framing nonce), timeouts, S3."""
        kwargs: dict[str, Any] = {"TimeoutSeconds": delivery_timeout, "Comment": "ami-auditor probe (read-only)"}
        if self.settings.document is None:
            kwargs["DocumentName"] = RUN_SHELL_SCRIPT
            commands = wrapper_script(self.script, self.args, nonce, self.exec_versions,
                                      self.deep_cpu).splitlines()
            kwargs["Parameters"] = {"commands": commands, "executionTimeout": [str(self.exec_timeout)]}
        else:
            kwargs["DocumentName"] = self.settings.document
            kwargs["DocumentVersion"] = "$DEFAULT"
            kwargs["Parameters"] = {"binaries": [" ".join(self.args)], "nonce": [nonce],
                                    "execVersions": ["yes" if self.exec_versions else "no"],
                                    "executionTimeout": [str(self.exec_timeout)]}
            if self.deep_cpu:  # only when asked: a document installed before deepCpu existed still works
                kwargs["Parameters"]["deepCpu"] = ["yes"]
        if self.settings.s3_bucket:
            kwargs["OutputS3BucketName"] = self.settings.s3_bucket
            kwargs["OutputS3KeyPrefix"] = self.settings.s3_prefix
        return kwargs

    def poll(self, pending: dict[str, Sent]) -> dict[str, Outcome]:
        """Poll each command (ListCommandInvocations) until every instance is terminal or its deadline passes."""
        out: dict[str, Outcome] = {}
        last: dict[str, str] = {}
        interval = self.settings.poll_interval_s
        with ThreadPoolExecutor(max_workers=8) as pool:
            while pending:
                self.sleep(interval * random.uniform(0.7, 1.3))
                interval = min(interval * 1.5, self.settings.poll_interval_s * 5)
                for command_id in list(pending):
                    sent = pending[command_id]
                    rows = self.statuses(command_id, last)
                    done = [iid for iid, terminal in rows or () if iid in sent.ids and terminal]
                    fetched = pool.map(lambda iid, c=command_id: (iid, self.fetch(c, iid)), done)
                    for iid, outcome in fetched:
                        if outcome is not None:
                            out[iid] = outcome
                            sent.ids.discard(iid)
                    if sent.targeted and rows is not None:
                        sent.extra.update(iid for iid, _ in rows if iid not in sent.known)
                        listed = {iid for iid, _ in rows}
                        sent.rounds += 1
                        # everything awaited is unlisted: is the command done? (not while nothing is listed
                        # yet — right after SendCommand — unless that lasts 3 rounds: no instance matched)
                        if sent.ids and not sent.ids & listed and (listed or sent.rounds >= 3):
                            out.update(self.never_invoked(command_id, sent.ids))
                    if sent.ids and time.monotonic() > sent.deadline:
                        out.update(self.give_up(command_id, sent.ids, last, whole=sent.targeted))
                        sent.ids.clear()
                    if not sent.ids:
                        del pending[command_id]
                        if sent.extra:
                            self.notes.append(self.extra_note(command_id, sent.extra))
        return out

    def never_invoked(self, command_id: str, ids: set[str]) -> dict[str, Outcome]:
        """Once a tag-targeted command is terminal (ListCommands), the instances SSM never invoked: unreachable."""
        try:
            [command] = self.ssm.list_commands(CommandId=command_id)["Commands"]
        except Exception as exc:  # noqa: BLE001 - not known yet; the deadline still applies
            self.poll_error = "{}: {}".format(*_aws_error(exc))
            return {}
        if _norm(command.get("Status")) not in TERMINAL:
            return {}
        shown = " ".join(f"{k}={','.join(v)}" for k, v in self.settings.targets)
        why = Unreachable(f"SSM never ran command {command_id} on this instance: it was not among the "
                          f"{command.get('TargetCount', '?')} instances SSM resolved for {shown} (command "
                          f"{command.get('Status')}/{command.get('StatusDetails')}); tags changed since "
                          "discovery, or the agent is not registered under this id")
        found: dict[str, Outcome] = dict.fromkeys(ids, why)
        ids.clear()
        return found

    @staticmethod
    def extra_note(command_id: str, extra: set[str]) -> str:
        shown = ", ".join(sorted(extra)[:10]) + (", …" if len(extra) > 10 else "")
        return (f"SSM command {command_id} also ran on {len(extra)} instance(s) EC2 discovery did not return "
                f"({shown}): tagged or launched after discovery, or not EC2 (mi-…); not in this report")

    def statuses(self, command_id: str, last: dict[str, str]) -> list[tuple[str, bool]] | None:
        """(instance id, terminal?) for the invocations SSM shows so far (missing ones are "not yet");
        None when a page could not be read (retried next round)."""
        token = None
        rows: list[tuple[str, bool]] = []
        while True:
            kwargs: dict[str, Any] = {"CommandId": command_id, "MaxResults": 50}
            if token:
                kwargs["NextToken"] = token
            try:
                page = self.ssm.list_command_invocations(**kwargs)
            except Exception as exc:  # noqa: BLE001 - retried by botocore already; try again next round
                self.poll_error = "{}: {}".format(*_aws_error(exc))
                return None
            for inv in page.get("CommandInvocations", []):
                last[inv["InstanceId"]] = f"{inv.get('Status')}/{inv.get('StatusDetails')}"
                rows.append((inv["InstanceId"], _norm(inv.get("Status")) in TERMINAL))
            token = page.get("NextToken")
            if not token:
                return rows

    def fetch(self, command_id: str, instance_id: str) -> Outcome | None:
        """The instance's outcome, or None when SSM does not show the invocation yet."""
        try:
            inv = self.ssm.get_command_invocation(CommandId=command_id, InstanceId=instance_id)
        except Exception as exc:  # noqa: BLE001
            code, message = _aws_error(exc)
            if code in THROTTLING:
                self.poll_error = f"{code}: {message}"  # named when the deadline passes
            if code == "InvocationDoesNotExist" or code in THROTTLING:
                return None
            return error_for_aws(exc, "GetCommandInvocation")
        if _norm(inv.get("Status")) not in TERMINAL:
            return None
        outcome = self.outcome(inv)
        return replace(outcome, nonce=self.nonces.get(command_id)) if isinstance(outcome, CommandResult) else outcome

    def outcome(self, inv: dict[str, Any]) -> Outcome:
        stdout = inv.get("StandardOutputContent") or ""
        stderr = inv.get("StandardErrorContent") or ""
        decoded = decode_output(stdout, self.max_output)
        s3_capped = False
        if decoded.framed and decoded.truncated and inv.get("StandardOutputUrl") and self.settings.s3_bucket:
            try:
                text, s3_capped = self.read_s3(inv["StandardOutputUrl"])
                decoded = decode_output(text, self.max_output)
            except Exception as exc:  # noqa: BLE001 - keep the partial output, say why
                code, message = _aws_error(exc)
                stderr += f"\n[ami-auditor] S3 output unreadable: {code}: {message}"
        if s3_capped:
            stderr += (f"\n[ami-auditor] S3 output object is over the {self.s3_limit} byte limit; read only its "
                       "first part (output truncated)")
        if decoded.capped:
            stderr += (f"\n[ami-auditor] probe output is over the {self.max_output} byte limit once decompressed; "
                       "kept only its first part (output truncated)")
        status = _norm(inv.get("Status"))
        usable = decoded.framed and bool(decoded.stdout.strip())
        if status != "success" and (status != "failed" or not usable):
            err = status_error(inv) or TransportError(f"SSM status {inv.get('Status')}")
            if self.settings.targets and _norm(inv.get("StatusDetails")) == "terminated":
                err = TransportError(f"{err} — not run: SSM stopped sending the command once more than "
                                     f"MaxErrors={self.settings.max_errors} invocations had failed")
            return err
        if not decoded.framed:
            return TransportError(f"SSM output was not produced by the ami-auditor wrapper: {stdout[:120]!r}")
        if decoded.truncated and not (decoded.capped or s3_capped):
            stderr += (f"\n[ami-auditor] SSM kept only {len(stdout)} characters of output"
                       + ("" if self.settings.s3_bucket else "; set --ssm-s3-bucket to read it in full"))
        return CommandResult(stdout=decoded.stdout, stderr=stderr, exit_status=decoded.exit_status,
                             duration_s=elapsed_s(inv.get("ExecutionElapsedTime")), truncated=decoded.truncated)

    def read_s3(self, url: str) -> tuple[str, bool]:
        """Read the stdout SSM wrote to the output bucket (path-style or virtual-hosted URL), at most
        `s3_limit` bytes, in chunks (never more is fetched into memory); True when the object was longer."""
        bucket = self.settings.s3_bucket or ""
        parts = urlsplit(url)
        path = unquote(parts.path.lstrip("/"))
        key = path[len(bucket) + 1:] if path.startswith(bucket + "/") and not parts.netloc.startswith(bucket + ".") \
            else path
        stream = self.s3.get_object(Bucket=bucket, Key=key)["Body"]
        chunks: list[bytes] = []
        total = 0
        try:
            while total <= self.s3_limit:
                chunk = stream.read(min(1 << 20, self.s3_limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        finally:
            stream.close()
        body = b"".join(chunks)
        return body[: self.s3_limit].decode("utf-8", "replace"), total > self.s3_limit

    def give_up(self, command_id: str, ids: set[str], last: dict[str, str], whole: bool = False) -> dict[str, Outcome]:
        """Past the deadline: cancel what still runs (best effort; `whole`: the entire tag-targeted command)
        and report a timeout with the last status."""
        with contextlib.suppress(Exception):  # cancelling is a courtesy
            self.ssm.cancel_command(CommandId=command_id, **({} if whole else {"InstanceIds": sorted(ids)}))
        return {iid: ProbeTimeout(f"no SSM result within {self.deadline_s:.0f}s (+grace); last status "
                                  f"{last.get(iid, 'not yet visible')}; command {command_id} cancelled"
                                  + (f"; last polling error {self.poll_error}" if self.poll_error else ""))
                for iid in ids}


def run_ssm_batch(specs: list[HostSpec], script: str, args: list[str], deadline_s: float = DEFAULT_DEADLINE_S,
                  notes: list[str] | None = None) -> list[Outcome]:
    """Run `script` on every ssm:// spec: one SendCommand per ≤ 50 instances per settings group (or one
    tag-targeted SendCommand when the group's settings carry targets).

    Returns one outcome per spec, in order; adds run-wide remarks to `notes`. Never raises for a host's failure.
    """
    groups: dict[SSMSettings, tuple[SSMSettings, list[int]]] = {}
    for index, spec in enumerate(specs):
        settings = settings_of(spec)
        groups.setdefault(settings, (settings, []))[1].append(index)
    outcomes: list[Outcome | None] = [None] * len(specs)
    for settings, indexes in groups.values():
        ids = [instance_id_of(specs[i]) for i in indexes]
        known = {iid: specs[i].options["ssm_ping"] for i, iid in zip(indexes, ids) if specs[i].options.get("ssm_ping")}
        try:
            batch = SSMBatch(settings, script, args, deadline_s)
            results = batch.run(list(dict.fromkeys(ids)), known)
            if notes is not None:
                notes.extend(batch.notes)
        except TransportError as exc:
            results = dict.fromkeys(ids, exc)
        for i, iid in zip(indexes, ids):
            outcomes[i] = results[iid]
    return [o if o is not None else TransportError("no outcome") for o in outcomes]


class SSMTransport:
    """The single-host Transport over SSM (`ssm://i-…`); fleets go through `run_ssm_batch`."""

    name = "ssm"

    def __init__(self, spec: HostSpec):
        self.spec = spec

    def run(self, script: str, args: list[str], deadline_s: float = DEFAULT_DEADLINE_S,
            max_output: int = DEFAULT_MAX_OUTPUT) -> CommandResult:
        outcome = run_ssm_batch([self.spec], script, args, deadline_s)[0]
        if isinstance(outcome, TransportError):
            raise outcome
        return outcome

    def close(self) -> None:
        """Nothing held between runs."""
