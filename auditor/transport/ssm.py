"""Run the probe through AWS Systems Manager Run Command (boto3), one SendCommand per ≤ 50 instances,
or (settings.targets, `--ssm-targets`) ONE SendCommand with tag `Targets`, MaxConcurrency and MaxErrors.

`run_ssm_batch` is an iterator: each host's outcome is yielded as soon as its output is read and
decoded, so the caller builds that snapshot and drops the raw text; nothing holds a run's outputs.
Quirks handled in the rooms beside this one (FIELD-NOTES §8): the 50-id limit and the framing nonce
per command (ssm_send.py); only instances whose agent is `Online` are sent a command (one unmanaged
id fails a whole SendCommand); our own jittered polling with a deadline, never the ~100 s waiter, and
outputs read page by page or from the S3 output prefix (ssm_poll.py, ssm_s3.py); SSM's 24,000-char
cap, met by the document compressing its output (ssm_document.py); statuses as host errors
(ssm_output.py); clients, retries and errors (aws/api.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

from ..aws.api import clients as aws_clients
from ..aws.api import error_for_aws
from ..aws.ssm import SSMSettings, chunks, ping_statuses
from ..errors import TransportError, Unreachable
from ..models import CommandResult, HostSpec, ProbeRequest
from .base import DEFAULT_DEADLINE_S, DEFAULT_MAX_OUTPUT
from .ssm_output import Outcome, Reading
from .ssm_poll import Poller, Sent
from .ssm_send import Sender


def settings_of(spec: HostSpec) -> SSMSettings:
    """The spec's SSM settings (TransportOptions.ssm), with a target's `?region=` winning."""
    base = spec.options.ssm or SSMSettings()
    region = spec.options.region
    return replace(base, region=region) if region and region != base.region else base


def instance_id_of(spec: HostSpec) -> str:
    return urlsplit(spec.target).netloc


class SSMBatch:
    """One run of the probe on many instances that share settings (region, profile, document, bucket)."""

    def __init__(self, settings: SSMSettings, request: ProbeRequest, deadline_s: float,
                 clients: tuple[Any, Any] | None = None, reading: Reading | None = None):
        self.settings, self.request, self.deadline_s = settings, request, deadline_s
        self.ssm, self.s3 = clients or aws_clients(settings.region, settings.profile, "ssm", "s3")
        self.reading = reading or Reading(settings.s3_bucket, bool(settings.targets), settings.max_errors)
        self.poller = Poller(settings, self.reading, self.ssm, self.s3, deadline_s)
        self.notes = self.poller.notes

    def run(self, instance_ids: list[str], known_ping: dict[str, str] | None = None) -> Iterator[tuple[str, Outcome]]:
        """(instance id, outcome) for every instance, as each is known: a CommandResult or a TransportError
        (never raises for a host's failure). `known_ping`: PingStatus EC2 discovery already learnt."""
        sender = Sender(self.settings, self.request, self.deadline_s, self.ssm, self.poller.sleep)
        ping = dict(known_ping or {})
        try:
            sender.check_document()
            ping.update(ping_statuses(self.ssm, [i for i in instance_ids if i not in ping]))
        except TransportError as exc:
            yield from ((iid, exc) for iid in instance_ids)
            return
        online = [iid for iid in instance_ids if ping.get(iid) == "Online"]
        for iid in instance_ids:
            state = ping.get(iid)
            if state != "Online":
                managed = state and state != "NotManaged"
                why = f"SSM agent {state}" if managed else "not a managed instance (no SSM agent registered)"
                yield iid, Unreachable(f"{why}; no command sent")
        pending: dict[str, Sent] = {}
        for ids, failure in self.send(sender, online, instance_ids, pending):
            yield from ((iid, failure) for iid in ids)
        yield from self.poller.poll(pending)

    def send(self, sender: Sender, online: list[str], known: list[str],
             pending: dict[str, Sent]) -> Iterator[tuple[list[str], TransportError]]:
        """Send the command(s), recording each in `pending`; yields the instances a SendCommand failed for."""
        grace = max(10.0, self.deadline_s / 4)
        now = datetime.now(timezone.utc)
        if self.settings.targets and online:
            waves = sender.waves(len(online))
            try:
                command_id, nonce = sender.throttled(lambda: sender.send_targets(waves))
            except Exception as exc:  # noqa: BLE001
                yield online, error_for_aws(exc, "SendCommand")
                return
            pending[command_id] = Sent(command_id, nonce, set(online),
                                       time.monotonic() + waves * self.deadline_s + grace, now,
                                       targeted=True, known=frozenset(known))
            return
        for batch in chunks(online):
            try:
                command_id, nonce = sender.throttled(functools.partial(sender.send, batch))
            except Exception as exc:  # noqa: BLE001 - the batch's hosts get the error, the rest go on
                yield batch, error_for_aws(exc, "SendCommand")
                continue
            pending[command_id] = Sent(command_id, nonce, set(batch), time.monotonic() + self.deadline_s + grace, now)


def run_ssm_batch(specs: list[HostSpec], request: ProbeRequest, deadline_s: float = DEFAULT_DEADLINE_S,
                  notes: list[str] | None = None) -> Iterator[tuple[int, Outcome]]:
    """Run the probe on every ssm:// spec: one SendCommand per ≤ 50 instances per settings group (or one
    tag-targeted SendCommand when the group's settings carry targets).

    Yields (spec index, outcome) as each output is read, every index exactly once; adds run-wide remarks
    to `notes` as a group finishes. Never raises for a host's failure."""
    groups: dict[SSMSettings, list[int]] = {}
    for index, spec in enumerate(specs):
        groups.setdefault(settings_of(spec), []).append(index)
    for settings, indexes in groups.items():
        by_id: dict[str, list[int]] = {}
        for i in indexes:
            by_id.setdefault(instance_id_of(specs[i]), []).append(i)
        known = {iid: ping for iid, ix in by_id.items() if (ping := specs[ix[0]].options.ssm_ping)}
        left = set(by_id)
        try:
            batch = SSMBatch(settings, request, deadline_s)
            for iid, result in batch.run(list(by_id), known):
                if iid in left:
                    left.discard(iid)
                    yield from ((i, result) for i in by_id[iid])
            if notes is not None:
                notes.extend(batch.notes)
        except TransportError as exc:
            yield from ((i, exc) for iid in sorted(left) for i in by_id[iid])
            left.clear()
        yield from ((i, TransportError("no outcome")) for iid in sorted(left) for i in by_id[iid])


class SSMTransport:
    """The single-host Transport over SSM (`ssm://i-…`); fleets go through `run_ssm_batch`."""

    name = "ssm"

    def __init__(self, spec: HostSpec):
        self.spec = spec

    def run(self, request: ProbeRequest, deadline_s: float = DEFAULT_DEADLINE_S,
            max_output: int = DEFAULT_MAX_OUTPUT) -> CommandResult:
        for _, outcome in run_ssm_batch([self.spec], request, deadline_s):
            if isinstance(outcome, TransportError):
                raise outcome
            return outcome
        raise TransportError("no outcome")

    def close(self) -> None:
        """Nothing held between runs."""

