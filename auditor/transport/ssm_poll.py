"""Polling sent commands until every awaited instance has an outcome, yielding each as soon as it is read.

Results are learnt page by page, never one SSM call per instance while outputs flow:
- no output bucket: each round, ListCommandInvocations with Details=True (≤ 50 invocations a page); a
  finished invocation whose listed output (2,500 characters) is whole is done; a longer one is read with
  GetCommandInvocation (its 24,000 characters, the document compresses);
- `--ssm-s3-bucket`: each round the command's S3 output prefix is listed (S3, not SSM) and new objects
  are read in parallel, bounded; a whole output is a result without any SSM call. Only a round that
  brings nothing new asks ListCommands (one call) whether the command is done; once it is, the
  instances still without a whole output are settled from one listing with details: undeliverable,
  timed out, terminated, truncated; an output SSM never wrote to S3 is read with GetCommandInvocation.
Past a command's deadline what still runs is cancelled and reported as a timeout with its last status.
A missing invocation right after SendCommand means "not yet"; tag-targeted commands (SSM resolved the
tag) name the instances SSM never invoked once the command is terminal, and note those it invoked that
discovery did not return.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..aws.api import THROTTLING, error_code, error_for_aws, pages
from ..aws.ssm import SSMSettings
from ..errors import ProbeTimeout, TransportError, Unreachable
from ..models import CommandResult
from ..workers import DaemonExecutor
from .ssm_output import (
    TERMINAL,
    CommandInfo,
    Invocation,
    InvocationRow,
    Outcome,
    Reading,
    complete,
    elapsed_s,
    from_row,
    norm,
    outcome,
    result_of,
    terminal,
)
from .ssm_s3 import (
    DOCUMENT_STEPS,
    RUN_SHELL_SCRIPT_STEPS,
    ListingRefused,
    OutputObject,
    ReadTimedOut,
    bounded_map,
    key_of_url,
    list_outputs,
    read_object,
)

READ_BUDGET_S = 20.0  # one S3 output read, at most (half the deadline if less; not past the command's …)
# idle rounds ask ListCommands after 2 polls or deadline/8, doubling up to 16 s or deadline/2: a straggler
# costs a few calls per command, not one per round (a finished command is seen that much later at most)
STATUS_WAIT_MAX_S = 16.0
FEW = 3  # awaited instances at most that are each asked for (ListCommandInvocations by InstanceId)
LAST_READ_S = 5.0  # … except the reads that settle finished hosts once it has passed
S3_MISSING = ("\n[ami-auditor] S3 output object missing: SSM did not write this instance's stdout under "
              "s3://{bucket}/{prefix} (the instance role may lack s3:PutObject); read SSM's first 24,000 characters")


@dataclass
class Sent:
    """One sent command: the instances still awaited, when to give up, and (Targets mode) what SSM did."""

    command_id: str
    nonce: str
    ids: set[str]
    deadline: float
    sent_at: datetime
    targeted: bool = False
    known: frozenset[str] = frozenset()  # Targets mode: every instance discovery returned
    extra: set[str] = field(default_factory=set)  # Targets mode: invoked, but not returned by discovery
    rounds: int = 0  # polling rounds that read the invocation list
    seen: set[str] = field(default_factory=set)  # S3 mode: instances whose output object was read
    unknown: set[str] = field(default_factory=set)  # S3 mode, Targets: keys of undiscovered ids (unconfirmed)
    partial: set[str] = field(default_factory=set)  # S3 mode: read, not whole: settled with its status
    late: dict[str, str] = field(default_factory=dict)  # S3 mode: reads that ran out of time, and how
    status_at: float = 0.0  # S3 mode: ListCommands not before this (backs off while nothing new arrives)
    status_wait: float = 0.0


def polling_error(exc: Exception, what: str) -> TransportError:
    """A failed poll, named by AWS's code and message (kept for the timeout's text; retried next round)."""
    return TransportError("{}: {}".format(*error_code(exc)))


def extra_note(command_id: str, extra: set[str]) -> str:
    shown = ", ".join(sorted(extra)[:10]) + (", …" if len(extra) > 10 else "")
    return (f"SSM command {command_id} also ran on {len(extra)} instance(s) EC2 discovery did not return "
            f"({shown}): tagged or launched after discovery, or not EC2 (mi-…); not in this report")


def late_note(command_id: str, late: dict[str, str]) -> str:
    shown = ", ".join(sorted(late)[:10]) + (", …" if len(late) > 10 else "")
    return (f"S3 reads of {len(late)} instance(s)' output ran out of time (command {command_id}: {shown}); each "
            "was settled from SSM's own status and its first 24,000 characters instead")


class Poller:
    """Polls a run's commands; `poll` yields (instance id, outcome) as each is known."""

    window = 32  # S3 reads / invocation fetches submitted and not yet consumed, at most

    def __init__(self, settings: SSMSettings, reading: Reading, ssm: Any, s3: Any, deadline_s: float,
                 sleep: Callable[[float], None] = time.sleep):
        self.settings, self.reading, self.ssm, self.s3 = settings, reading, ssm, s3
        self.deadline_s, self.sleep = deadline_s, sleep
        self.poll_error = ""
        self.notes: list[str] = []
        self.last: dict[str, str] = {}  # instance id → its last listed Status/StatusDetails
        self.s3_listing = True  # False once the output prefix proved unlistable: invocation pages instead

    def poll(self, pending: dict[str, Sent]) -> Iterator[tuple[str, Outcome]]:
        interval = self.settings.poll_interval_s
        pool = DaemonExecutor(max_workers=8)  # a stuck read never holds the process at exit (SIGTERM)
        try:
            while pending:
                self.sleep(interval * random.uniform(0.7, 1.3))
                interval = min(interval * 1.5, self.settings.poll_interval_s * 5)
                for command_id in list(pending):
                    sent = pending[command_id]
                    step = self.s3_round if self.reading.s3_bucket and self.s3_listing else self.api_round
                    yield from self.taken(sent, step(sent, pool))
                    if sent.ids and time.monotonic() > sent.deadline:
                        yield from self.taken(sent, self.give_up(sent, pool))
                    if not sent.ids:
                        del pending[command_id]
                        self.confirm_extra(sent)
                        if sent.extra:
                            self.notes.append(extra_note(command_id, sent.extra))
                        if sent.late:
                            self.notes.append(late_note(command_id, sent.late))
        finally:  # a read left behind (it ran out of time) is not waited for
            pool.shutdown(wait=False, cancel_futures=True)

    @staticmethod
    def taken(sent: Sent, found: Iterable[tuple[str, Outcome]]) -> Iterator[tuple[str, Outcome]]:
        """Each awaited instance's outcome once, with the nonce its command was sent with."""
        for iid, result in found:
            if iid in sent.ids:
                sent.ids.discard(iid)
                yield iid, replace(result, nonce=sent.nonce) if isinstance(result, CommandResult) else result

    # -- without a bucket: the invocation listing ---------------------------------------------------

    def api_round(self, sent: Sent, pool: Executor) -> Iterator[tuple[str, Outcome]]:
        listed: set[str] = set()
        try:
            for page in pages(self.ssm, "list_command_invocations", "ListCommandInvocations", 50, polling_error,
                              CommandId=sent.command_id, Details=True):
                rows = page.get("CommandInvocations") or []
                listed.update(row["InstanceId"] for row in rows)
                yield from self.listed_page(sent, rows, pool)
        except TransportError as exc:  # retried by botocore already; try again next round
            self.poll_error = str(exc)
            return
        if sent.targeted:
            sent.extra.update(iid for iid in listed if iid not in sent.known)
            sent.rounds += 1
            # everything awaited is unlisted: is the command done? (not while nothing is listed yet —
            # right after SendCommand — unless that lasts 3 rounds: no instance matched)
            if sent.ids and not sent.ids & listed and (listed or sent.rounds >= 3):
                command = self.command(sent.command_id)
                if command is not None and norm(command.get("Status")) in TERMINAL:
                    yield from ((iid, self.never_invoked(sent, command)) for iid in sorted(sent.ids))

    def listed_page(self, sent: Sent, rows: list[InvocationRow], pool: Executor) -> Iterator[tuple[str, Outcome]]:
        """Outcomes of one listed page: whole listed outputs at once, the rest fetched (bounded, parallel)."""
        fetch: list[str] = []
        for row in rows:
            iid = row["InstanceId"]
            self.last[iid] = f"{row.get('Status')}/{row.get('StatusDetails')}"
            if iid not in sent.ids or not terminal(row):
                continue
            inv = from_row(row)
            whole = complete(inv["StandardOutputContent"], self.reading) if norm(inv["Status"]) == "success" else None
            if isinstance(whole, TransportError):
                yield iid, whole
            elif whole is not None:
                yield iid, result_of(whole, inv["StandardErrorContent"], elapsed_s(inv["ExecutionElapsedTime"]))
            else:
                fetch.append(iid)
        for iid, result in bounded_map(pool, lambda i: (i, self.fetch(sent.command_id, i)), fetch, self.window):
            if result is not None:
                yield iid, result

    def fetch(self, command_id: str, instance_id: str, note: str = "") -> Outcome | None:
        """The instance's outcome from GetCommandInvocation, or None when SSM does not show it (finished) yet."""
        try:
            inv: Invocation = self.ssm.get_command_invocation(CommandId=command_id, InstanceId=instance_id)
        except Exception as exc:  # noqa: BLE001
            code, message = error_code(exc)
            if code in THROTTLING:
                self.poll_error = f"{code}: {message}"  # named when the deadline passes
            if code == "InvocationDoesNotExist" or code in THROTTLING:
                return None
            return error_for_aws(exc, "GetCommandInvocation")
        return outcome(inv, self.reading, note=note) if terminal(inv) else None

    # -- with a bucket: the S3 output prefix --------------------------------------------------------

    def s3_round(self, sent: Sent, pool: Executor) -> Iterator[tuple[str, Outcome]]:
        objects = self.outputs(sent)
        if objects is None:
            return
        new = [objects[iid] for iid in sorted(sent.ids & objects.keys()) if iid not in sent.seen]
        yield from self.read_new(sent, new, pool)
        if new or not sent.ids:
            sent.status_wait = 0.0
            return
        if time.monotonic() < sent.status_at:  # asked lately, and nothing new since: not yet again
            return
        command = self.command(sent.command_id)  # nothing new this round: is the command done?
        if command is None or norm(command.get("Status")) not in TERMINAL:
            first = max(2 * self.settings.poll_interval_s, self.deadline_s / 8)
            sent.status_wait = min(max(2 * sent.status_wait, first), max(STATUS_WAIT_MAX_S, self.deadline_s / 2))
            sent.status_at = time.monotonic() + sent.status_wait
            return
        objects = self.outputs(sent) or objects  # an output written since the first listing
        yield from self.read_new(sent, [objects[i] for i in sorted(sent.ids & objects.keys()) if i not in sent.seen],
                                 pool)
        yield from self.settle(sent, command, objects)

    def outputs(self, sent: Sent) -> dict[str, OutputObject] | None:
        try:
            steps = DOCUMENT_STEPS if self.settings.document else RUN_SHELL_SCRIPT_STEPS
            objects = list_outputs(self.s3, self.reading.s3_bucket or "", self.settings.s3_prefix, sent.command_id,
                                   steps)
        except ListingRefused as exc:  # no s3:ListBucket, no such bucket…: follow the invocation pages instead
            self.poll_error, self.s3_listing = str(exc), False
            self.notes.append(f"SSM outputs could not be listed in S3 ({exc}); read from SSM instead (24,000 "
                              "characters each, one call per instance): allow s3:ListBucket on the output prefix "
                              "(docs/iam-policy.json)")
            return None
        except TransportError as exc:  # throttled, 5xx, connection: S3 mode stays; list again next round
            self.poll_error = str(exc)
            return None
        if sent.targeted:  # anyone may write under the prefix: only SSM's invocation list says who ran it
            sent.unknown.update(iid for iid in objects if iid not in sent.known)
        return objects

    def read_new(self, sent: Sent, new: list[OutputObject], pool: Executor) -> Iterator[tuple[str, Outcome]]:
        """Read new output objects (bounded, parallel); a whole one is the instance's result, the rest wait
        for the command's end (their invocation status decides)."""
        def read(obj: OutputObject) -> tuple[OutputObject, tuple[str, bool] | None]:
            try:
                return obj, read_object(self.s3, self.reading.s3_bucket or "", obj.key, self.reading.s3_limit,
                                        self.read_until(sent))
            except Exception as exc:  # noqa: BLE001 - settled with the invocation's status instead
                self.poll_error = "S3 GetObject: {}: {}".format(*error_code(exc))
                if isinstance(exc, ReadTimedOut):
                    sent.late[obj.instance_id] = str(exc)
                return obj, None

        def late(obj: OutputObject) -> tuple[OutputObject, None]:
            sent.late[obj.instance_id] = f"S3 GetObject of s3://{self.reading.s3_bucket}/{obj.key} ran out of time"
            return obj, None

        for obj, got in bounded_map(pool, read, new, self.window, self.read_until(sent) + 1.0, late):
            sent.seen.add(obj.instance_id)
            whole = complete(got[0], self.reading) if got is not None and not got[1] else None
            if isinstance(whole, TransportError):
                yield obj.instance_id, whole
                continue
            if whole is None:
                sent.partial.add(obj.instance_id)
                continue
            took = (obj.written - sent.sent_at).total_seconds() if obj.written else 0.0
            yield obj.instance_id, result_of(whole, "", max(0.0, took))

    def settle(self, sent: Sent, command: CommandInfo,
               objects: dict[str, OutputObject]) -> Iterator[tuple[str, Outcome]]:
        """The command is done: every instance still awaited gets its status from one listing with details."""
        rows = self.awaited_rows(sent)
        if rows is None:
            return
        for iid in sorted(sent.ids):
            row = rows.get(iid)
            if row is None:
                if sent.targeted:
                    yield iid, self.never_invoked(sent, command)
                continue
            if terminal(row):
                result = self.settled(sent, iid, from_row(row), objects.get(iid))
                if result is not None:
                    yield iid, result

    def awaited_rows(self, sent: Sent) -> dict[str, InvocationRow] | None:
        """The awaited instances' rows of one invocation listing with details (None when it failed)."""
        rows: dict[str, InvocationRow] = {}
        each = [{"InstanceId": iid} for iid in sorted(sent.ids)] if len(sent.ids) <= FEW else [{}]
        try:  # a few stragglers of a big command: one call each, not every page of the command
            for page in (p for one in each for p in pages(self.ssm, "list_command_invocations",
                                                          "ListCommandInvocations", 50, polling_error,
                                                          CommandId=sent.command_id, Details=True, **one)):
                for row in page.get("CommandInvocations") or []:
                    self.last[row["InstanceId"]] = f"{row.get('Status')}/{row.get('StatusDetails')}"
                    if row["InstanceId"] in sent.ids:
                        rows[row["InstanceId"]] = row
        except TransportError as exc:
            self.poll_error = str(exc)
            return None
        return rows

    def read_until(self, sent: Sent) -> float:
        """When an S3 read that starts now must have ended: within the command's deadline, and soon."""
        now = time.monotonic()
        return min(max(sent.deadline, now + LAST_READ_S), now + max(2.0, min(READ_BUDGET_S, self.deadline_s / 2)))

    def settled(self, sent: Sent, iid: str, inv: Invocation, obj: OutputObject | None) -> Outcome | None:
        """A finished instance without a whole output: its S3 object (listed, or where SSM says it wrote
        it) read with its status; unreadable, too slow or never written → SSM's own 24,000 characters,
        saying why."""
        bucket = self.reading.s3_bucket or ""
        if iid in sent.late:  # read once already and ran out of time: not again
            return self.fetch(sent.command_id, iid, f"\n[ami-auditor] S3 read timed out: {sent.late[iid]}; read "
                                                    "SSM's first 24,000 characters")
        key = obj.key if obj is not None else key_of_url(inv.get("StandardOutputUrl") or "", bucket)
        if key:
            try:
                text, capped = read_object(self.s3, bucket, key, self.reading.s3_limit, self.read_until(sent))
                return outcome(inv, self.reading, text, capped)
            except Exception as exc:  # noqa: BLE001 - fall back to SSM's own copy, say why
                note = "\n[ami-auditor] S3 output unreadable: {}: {}".format(*error_code(exc))
                return self.fetch(sent.command_id, iid, note)
        ran = norm(inv.get("Status")) == "success" or inv.get("ResponseCode") not in (-1, None)
        if not ran:
            return outcome(inv, self.reading)
        where = f"{self.settings.s3_prefix.strip('/')}/{sent.command_id}/{iid}/".lstrip("/")
        return self.fetch(sent.command_id, iid, S3_MISSING.format(bucket=bucket, prefix=where))

    # -- the command as a whole ---------------------------------------------------------------------

    def command(self, command_id: str) -> CommandInfo | None:
        """ListCommands for one command (None when it cannot be read now: the deadline still applies)."""
        try:
            [command] = self.ssm.list_commands(CommandId=command_id)["Commands"]
        except Exception as exc:  # noqa: BLE001
            self.poll_error = "{}: {}".format(*error_code(exc))
            return None
        info: CommandInfo = command
        return info

    def never_invoked(self, sent: Sent, command: CommandInfo) -> Outcome:
        """A tag-targeted instance SSM did not invoke although the command is terminal: unreachable."""
        shown = " ".join(f"{k}={','.join(v)}" for k, v in self.settings.targets)
        return Unreachable(f"SSM never ran command {sent.command_id} on this instance: it was not among the "
                           f"{command.get('TargetCount', '?')} instances SSM resolved for {shown} (command "
                           f"{command.get('Status')}/{command.get('StatusDetails')}); tags changed since "
                           "discovery, or the agent is not registered under this id")

    def confirm_extra(self, sent: Sent) -> None:
        """Output keys of instances discovery did not return are no proof SSM ran there: one listing of the
        command's invocations (only when such keys exist) decides which go in the note."""
        if not sent.unknown - sent.extra:
            return
        try:
            for page in pages(self.ssm, "list_command_invocations", "ListCommandInvocations", 50, polling_error,
                              CommandId=sent.command_id):
                sent.extra.update(row["InstanceId"] for row in page.get("CommandInvocations") or []
                                  if row["InstanceId"] not in sent.known)
        except TransportError as exc:
            self.poll_error = str(exc)

    def give_up(self, sent: Sent, pool: Executor) -> Iterator[tuple[str, Outcome]]:
        """Past the deadline: one listing with details settles every finished instance as usual; what still
        runs is cancelled (best effort; tag-targeted: the entire command) and is a timeout with its last
        status."""
        rows = self.awaited_rows(sent) or {}
        done = [row for row in rows.values() if terminal(row)]
        if self.reading.s3_bucket:
            found = [(row["InstanceId"], self.settled(sent, row["InstanceId"], from_row(row), None)) for row in done]
        else:
            found = list(self.listed_page(sent, done, pool))
        settled = {iid: result for iid, result in found if result is not None}
        ids = sorted(sent.ids - settled.keys())
        if ids:
            with contextlib.suppress(Exception):  # cancelling is a courtesy
                self.ssm.cancel_command(CommandId=sent.command_id,
                                        **({} if sent.targeted else {"InstanceIds": ids}))
        yield from settled.items()
        unseen = "no output in S3 yet" if self.reading.s3_bucket else "not yet visible"
        for iid in ids:
            seen = "its S3 output listed, reading it timed out" if iid in sent.late else unseen
            yield iid, ProbeTimeout(f"no SSM result within {self.deadline_s:.0f}s (+grace); last status "
                                    f"{self.last.get(iid, seen)}; command {sent.command_id} cancelled"
                                    + (f"; S3 read timed out: {sent.late[iid]}" if iid in sent.late else "")
                                    + (f"; last polling error {self.poll_error}" if self.poll_error else ""))
