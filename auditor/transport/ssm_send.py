"""Sending the probe: the document check, SendCommand by instance ids (≤ 50) or by tag Targets.

Framing: every SendCommand carries its own nonce (document parameter `nonce`, or set inline in
AWS-RunShellScript mode): the request's own for the first command, a fresh one of the same form for
each further one, so instances of one command never see another command's nonce.
"""

from __future__ import annotations

import math
import random
import secrets
import time
from collections.abc import Callable
from typing import Any

from ..aws.api import error_for_aws, is_throttling
from ..aws.ssm import MAX_IDS_PER_COMMAND, MAX_TARGET_KEYS, MAX_TARGET_VALUES, RUN_SHELL_SCRIPT, SSMSettings, rate_count
from ..errors import TransportError
from ..models import ProbeRequest
from .ssm_document import document_probe_sha256, probe_sha256, wrapper_script

MAX_DELIVERY_TIMEOUT_S = 2_592_000
MIN_DELIVERY_TIMEOUT_S = 30  # SendCommand TimeoutSeconds minimum


def probe_body(request: ProbeRequest) -> str:
    """The probe without its nonce line: SSM hands the nonce over as a parameter, the document embeds the rest."""
    head, sep, rest = request.script.partition("\n")
    return rest if sep and request.nonce in head else request.script


class Sender:
    """SendCommand for one run (one settings group): what is sent, with which nonce, retried while throttled."""

    def __init__(self, settings: SSMSettings, request: ProbeRequest, deadline_s: float, ssm: Any,
                 sleep: Callable[[float], None] = time.sleep):
        self.settings, self.request, self.ssm, self.sleep = settings, request, ssm, sleep
        self.script = probe_body(request)
        self.exec_timeout = max(1, math.ceil(deadline_s))
        self.delivery_timeout = max(MIN_DELIVERY_TIMEOUT_S, self.exec_timeout)
        self.until = time.monotonic() + deadline_s
        self.nonces_used = 0

    def next_nonce(self) -> str:
        self.nonces_used += 1
        return self.request.nonce if self.nonces_used == 1 else secrets.token_hex(len(self.request.nonce) // 2)

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

    def throttled(self, call: Callable[[], tuple[str, str]]) -> tuple[str, str]:
        """`call()` (a SendCommand), retried with jittered backoff while SSM throttles it and the deadline
        allows; then its error stands."""
        delay = 0.5
        while True:
            try:
                return call()
            except Exception as exc:
                if not is_throttling(exc) or time.monotonic() + delay > self.until:
                    raise
            self.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, 4.0)

    def waves(self, expected: int) -> int:
        """How many rounds of MaxConcurrency instances the expected targets take (≥ 1)."""
        return max(1, math.ceil(expected / rate_count(self.settings.max_concurrency, expected, at_least=1)))

    def send(self, instance_ids: list[str]) -> tuple[str, str]:
        """SendCommand for ≤ 50 instance ids; (command id, its nonce)."""
        assert 0 < len(instance_ids) <= MAX_IDS_PER_COMMAND
        nonce = self.next_nonce()
        sent = self.ssm.send_command(InstanceIds=instance_ids, **self.command_kwargs(self.delivery_timeout, nonce))
        return sent["Command"]["CommandId"], nonce

    def send_targets(self, waves: int) -> tuple[str, str]:
        """ONE SendCommand with the tag Targets, MaxConcurrency and MaxErrors; (command id, its nonce).

        Delivery timeout covers the waves MaxConcurrency makes: a queued invocation must still start."""
        targets = [{"Key": key, "Values": list(values)} for key, values in self.settings.targets]
        assert 0 < len(targets) <= MAX_TARGET_KEYS and all(len(t["Values"]) <= MAX_TARGET_VALUES for t in targets)
        delivery = min(MAX_DELIVERY_TIMEOUT_S, max(self.delivery_timeout, waves * self.exec_timeout))
        nonce = self.next_nonce()
        sent = self.ssm.send_command(Targets=targets, MaxConcurrency=self.settings.max_concurrency,
                                     MaxErrors=self.settings.max_errors, **self.command_kwargs(delivery, nonce))
        return sent["Command"]["CommandId"], nonce

    def command_kwargs(self, delivery_timeout: int, nonce: str) -> dict[str, Any]:
        """SendCommand's arguments other than what it targets: document, parameters (with this command's
        framing nonce), timeouts, S3."""
        request = self.request
        kwargs: dict[str, Any] = {"TimeoutSeconds": delivery_timeout, "Comment": "ami-auditor probe (read-only)"}
        if self.settings.document is None:
            kwargs["DocumentName"] = RUN_SHELL_SCRIPT
            commands = wrapper_script(self.script, list(request.binaries), nonce, request.exec_versions,
                                      request.deep_cpu).splitlines()
            kwargs["Parameters"] = {"commands": commands, "executionTimeout": [str(self.exec_timeout)]}
        else:
            kwargs["DocumentName"] = self.settings.document
            kwargs["DocumentVersion"] = "$DEFAULT"
            kwargs["Parameters"] = {"binaries": [" ".join(request.binaries)], "nonce": [nonce],
                                    "execVersions": ["yes" if request.exec_versions else "no"],
                                    "executionTimeout": [str(self.exec_timeout)]}
            if request.deep_cpu:  # only when asked: a document installed before deepCpu existed still works
                kwargs["Parameters"]["deepCpu"] = ["yes"]
        if self.settings.s3_bucket:
            kwargs["OutputS3BucketName"] = self.settings.s3_bucket
            kwargs["OutputS3KeyPrefix"] = self.settings.s3_prefix
        return kwargs
