"""Frozen dataclasses shared by the rooms (transport, collect, judge, compare, render)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .options import SSM_DOCUMENT_NAME
from .reporttypes import FactsSummaryDoc
from .snapshotdoc import HostStub, Snapshot, is_whole

PROBE_REFUSED_STATUS = "probe_refused"  # reached, but the host ran no probe (its words are the error)
HOST_STATUSES = ("ok", "unreachable", "auth_failed", "host_key_rejected", "timeout", PROBE_REFUSED_STATUS, "error")
SEVERITIES = ("critical", "high", "medium", "low", "info")


def severity_rank(severity: str) -> int:
    """Higher is worse: critical=4 … info=0."""
    return len(SEVERITIES) - 1 - SEVERITIES.index(severity)


# A rule's public source (`refs:`): an http(s) URL of a host name and RFC 3986 characters, no user part, so it
# is inert as an HTML attribute, a Markdown autolink and an ASFF field. The rule-pack and report schemas carry
# this same pattern (tests/unit/test_rule_refs.py checks they agree).
REF_PATTERN = (r"^https?://[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?"
               r"(?:[/?#][A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]*)?$")
MAX_REF = 2048
_REF = re.compile(REF_PATTERN)


def is_ref(value: object) -> bool:
    """An http(s) URL that every output may show as a link (REF_PATTERN, at most MAX_REF characters)."""
    return isinstance(value, str) and len(value) <= MAX_REF and _REF.fullmatch(value) is not None


def cited(rules: object) -> dict[str, list[str]]:
    """Rule id → its sources, from a report document's `rules`: only what is_ref passes, whatever a saved
    report holds (renderers and ASFF show these as links)."""
    out: dict[str, list[str]] = {}
    for rule in rules if isinstance(rules, list) else ():
        refs = [u for u in rule.get("refs") or () if is_ref(u)] if isinstance(rule, dict) else []
        if refs:
            out[str(rule.get("id"))] = refs
    return out


@dataclass(frozen=True)
class SSHOptions:
    """How to reach a host over SSH. Any field left None falls back to ssh_config / defaults."""

    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    ssh_config: str | None = None
    proxy_jump: str | None = None
    trust_on_first_use: bool = False
    connect_timeout: float = 10.0
    sudo: bool | None = None  # None: use `sudo -n` automatically when the user is not root


@dataclass(frozen=True)
class SSMSettings:
    """How to reach instances through SSM. `document=None` means AWS-RunShellScript (explicit opt-in)."""

    region: str | None = None
    profile: str | None = None
    document: str | None = SSM_DOCUMENT_NAME
    s3_bucket: str | None = None
    s3_prefix: str = "ami-auditor"
    poll_interval_s: float = 1.0  # first poll; grows ×1.5 up to 5× this, each jittered ±30 %
    # tag targets (("tag:KEY", (values…)), …): one SendCommand with Targets; () = InstanceIds batches
    targets: tuple[tuple[str, tuple[str, ...]], ...] = ()
    max_concurrency: str = "50"  # Targets mode only: SSM's MaxConcurrency (N or N%)
    max_errors: str = "10%"  # Targets mode only: SSM's MaxErrors (N or N%)


@dataclass(frozen=True)
class AmiSettings:
    """An ami:// target's settings (TransportOptions.ami): where to make and attach the volume,
    from --region/--profile/--az/--attach-to (None: IMDS / defaults)."""

    region: str | None = None
    profile: str | None = None
    az: str | None = None
    attach_to: str | None = None


@dataclass(frozen=True, slots=True)
class TransportOptions:
    """What a transport needs beyond the target URL and SSHOptions; None: not given (the run's defaults)."""

    region: str | None = None  # ssm:// and ami://: the target's `?region=` (wins over the settings' region)
    image_root: str | None = None  # image:///path: the image's root directory
    ssm: SSMSettings | None = None  # ssm://: this run's SSM settings (targets/resolve.py, EC2 discovery)
    ssm_ping: str | None = None  # ssm:// found by EC2 discovery: the agent's PingStatus then (Online, …)
    ami: AmiSettings | None = None  # ami://: where to make and attach the volume


NO_TRANSPORT_OPTIONS = TransportOptions()  # shared by every host that needs none (most of a fleet)


@dataclass(frozen=True, slots=True)  # slots: a fleet run holds one per host to the end
class HostSpec:
    """One host to audit: a display name, a target URL and labels (az, ami_id, …)."""

    name: str
    target: str
    labels: dict[str, str] = field(default_factory=dict)
    ssh: SSHOptions = field(default_factory=SSHOptions)
    options: TransportOptions = NO_TRANSPORT_OPTIONS


@dataclass(frozen=True)
class ProbeRequest:
    """What one probe run asks of a host, typed: no transport decodes it back out of argv.

    Built by collect (`collect.probe.probe_request`); a shell transport runs `script` with `argv`, the
    image reader and the SSM document read the typed fields. `script` carries `nonce` as its first line."""

    script: str
    nonce: str
    binaries: tuple[str, ...]
    exec_versions: bool = False
    deep_cpu: bool = False
    argv: tuple[str, ...] = ()


@dataclass(frozen=True)
class CommandResult:
    """What a transport returns for one script run."""

    stdout: str
    stderr: str
    exit_status: int
    duration_s: float = 0.0
    truncated: bool = False
    nonce: str | None = None  # the framing nonce the run used, when the transport chose it (SSM: per batch)
    labels: dict[str, str] = field(default_factory=dict)  # what the transport learned (ami://: ami_id, ami_name…)


@dataclass(slots=True)  # slots: a fleet run holds one per host to the end
class HostResult:
    """A host's outcome in a scan: its status and, when reached, its snapshot (a dict)."""

    spec: HostSpec
    status: str = "ok"
    error: str | None = None
    snapshot: Snapshot | HostStub | None = None  # a stub once the evaluation core has judged it
    duration_s: float = 0.0
    summary: FactsSummaryDoc | None = None  # headline facts, when only a stub of the snapshot is kept (analyze)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def whole(self) -> Snapshot | None:
        """The whole snapshot while it is held; None for a host not reached or once only its stub is kept."""
        snap = self.snapshot
        return snap if snap is not None and is_whole(snap) else None

    @property
    def complete(self) -> bool:
        """Reached, and the probe ran to its end with every area collected (an area the host does not
        have, like systemd on a container without it, is an answer; a cut-off, timed-out, failed or
        tampered-with section is not)."""
        if self.status != "ok" or self.snapshot is None:
            return False
        probe = self.snapshot.get("probe") or {}
        return bool(probe.get("complete", True)) and not probe.get("failed_areas")


@dataclass(frozen=True, slots=True)  # slots: a 100,000-host analysis holds ~500,000 of these
class Finding:
    """A rule matched on a host (optionally on one item, e.g. a unit)."""

    host: str
    rule: str
    severity: str
    title: str
    description: str = ""
    remediation: str = ""
    item: str | None = None  # the matched item's key (unit name, binary name, …) when the rule selects items
    evidence: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    waived: bool = False
    waiver: str | None = None  # waiver reason (or why an expired waiver no longer applies)
    link: str | None = None  # the rule's `link` text (its part of an incident chain's one line), when it has one
    first_seen: str | None = None  # when the history store first saw this rule + host + item (open since)


@dataclass(frozen=True, slots=True)  # slots: a fleet holds one per host per difference (88 bytes, not 352)
class DriftItem:
    """One difference between a host and the golden baseline."""

    host: str
    # names the fact unambiguously, unit/binary name included: facts.systemd.units[ecs.service].unit_file_state
    path: str
    kind: str  # added | removed | changed
    expected: Any
    actual: Any
    severity: str = "medium"
    first_seen: str | None = None  # when the history store first saw this path on this host (open since)


@dataclass
class Report:
    """Everything a renderer sees. Stages (judge, compare) fill their sections."""

    hosts: list[HostResult]
    generated_at: str
    fail_on: str | None = None
    findings: list[Finding] = field(default_factory=list)
    drift: list[DriftItem] = field(default_factory=list)
    comparison: dict[str, Any] | None = None  # {group_by, groups, splits: [...], outliers: [...]}
    symptom: dict[str, Any] | None = None  # {symptom, hosts_with, hosts_without, ranked: [...]}
    baseline: dict[str, Any] | None = None  # {path, source_host, captured_at}
    rules: list[dict[str, Any]] = field(default_factory=list)  # rules that ran: id, severity, title
    notes: list[str] = field(default_factory=list)  # e.g. expired waivers
    chains: list[dict[str, Any]] = field(default_factory=list)  # per host: findings linked by `leads_to`
    history: dict[str, Any] | None = None  # {store, scan_id, previous_scan_id, new_hosts, gone_hosts, resolved}
    exit_code: int = 0
