"""Typed options: what the CLI layer (cli.py, commands/) hands to the rooms instead of an argparse Namespace.

Frozen dataclasses holding the user's choices as given (paths as strings, options not yet loaded);
each stage's `prepare()` loads and validates its part before any host is contacted. Defaults here are
the CLI's defaults, so a caller (a test, a scheduler) can build options without argparse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .targets.ec2 import Ec2Filter

# The binaries fingerprinted when no --binary is given (collect/probe.py re-exports them)
DEFAULT_BINARIES: tuple[str, ...] = ("kubelet", "containerd", "dockerd", "runc", "ecs-init", "nvidia-smi")
# The SSM document ami-auditor installs and runs (transport/ssm_document.py takes it from here: options are
# read by every room, so they import no transport)
SSM_DOCUMENT_NAME = "AmiAuditor-Probe"
DEFAULT_PARALLEL = 16  # the knee of the measured curve (docs/performance.md, "Many hosts over SSH")
DEFAULT_DEADLINE_S = 60.0
DEFAULT_TOP = 10
DEFAULT_MIN_SCORE = 0.5  # least association score for a split (compare/groups.py)


@dataclass(frozen=True)
class AwsOptions:
    """EC2 discovery (--ec2, --via, --ssh-*), region/profile, SSM knobs (--ssm-*), ami:// placement."""

    ec2: tuple[Ec2Filter, ...] = ()
    via: str = "ssm"
    ssh_address: str = "private"
    ssh_user: str | None = None
    ssh_identity: str | None = None
    ssh_known_hosts: str | None = None
    ssh_config: str | None = None
    region: str | None = None
    profile: str | None = None
    ssm_document: str = SSM_DOCUMENT_NAME
    ssm_run_shell_script: bool = False
    ssm_s3_bucket: str | None = None
    ssm_s3_prefix: str = "ami-auditor"
    ssm_poll_interval: float = 1.0
    ssm_targets: bool = False
    ssm_max_concurrency: str | None = None
    ssm_max_errors: str | None = None
    az: str | None = None  # ami://: the AZ to create the volume in (default: the scanner's, IMDS)
    attach_to: str | None = None  # ami://: the instance to attach it to (default: the scanner, IMDS)


@dataclass(frozen=True)
class TargetOptions:
    """Which hosts, and the knobs of one collection run."""

    targets: tuple[str, ...] = ()
    inventories: tuple[str, ...] = ()
    parallel: int = DEFAULT_PARALLEL
    deadline_s: float = DEFAULT_DEADLINE_S
    binaries: tuple[str, ...] = DEFAULT_BINARIES
    exec_versions: bool = False
    deep_cpu: bool = False  # --deep cpu: perf kernel stacks of the hottest core
    aws: AwsOptions = field(default_factory=AwsOptions)


@dataclass(frozen=True)
class RuleOptions:
    """Which rule packs, and their parameters (--rules, --no-builtin-rules, --set, --rules-config)."""

    rule_paths: tuple[str, ...] = ()
    builtin: bool = True
    settings: tuple[str, ...] = ()
    config: str | None = None


@dataclass(frozen=True)
class JudgeOptions:
    rules: RuleOptions = field(default_factory=RuleOptions)
    waivers: tuple[str, ...] = ()


@dataclass(frozen=True)
class HistoryOptions:
    """The history store: a path (None: the default in the user's data directory), or none at all."""

    store: str | None = None
    no_store: bool = False


@dataclass(frozen=True)
class NotifyOptions:
    """Alert targets for findings first seen in this scan (`sns:ARN`, `webhook:URL`), as typed."""

    targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompareOptions:
    baseline: str | None = None
    group_by: str | None = None
    symptom: str | None = None
    top: int = DEFAULT_TOP
    min_score: float = DEFAULT_MIN_SCORE


@dataclass(frozen=True)
class RenderOptions:
    formats: str = "json"  # comma-separated, as typed
    out: str | None = None
    stdout: bool = False  # --format given without --out: the one report goes to stdout, the summary to stderr
    quiet: bool = False  # --quiet: no summary or progress
    color: str = "auto"  # --color auto|always|never (the summary only; reports are never coloured)


@dataclass(frozen=True)
class ScanOptions:
    """Everything `ami-auditor scan` was asked to do."""

    targets: TargetOptions = field(default_factory=TargetOptions)
    fail_on: str = "high"
    judge: JudgeOptions = field(default_factory=JudgeOptions)
    history: HistoryOptions = field(default_factory=HistoryOptions)
    compare: CompareOptions = field(default_factory=CompareOptions)
    render: RenderOptions = field(default_factory=RenderOptions)
    notify: NotifyOptions = field(default_factory=NotifyOptions)


@dataclass(frozen=True)
class AnalyzeOptions:
    """Everything `ami-auditor analyze` was asked to do: saved snapshots judged, compared and reported."""

    dirs: tuple[str, ...] = ()
    jobs: int = 0  # worker processes; 0: one per CPU
    fail_on: str = "high"
    judge: JudgeOptions = field(default_factory=JudgeOptions)
    compare: CompareOptions = field(default_factory=CompareOptions)
    render: RenderOptions = field(default_factory=RenderOptions)
    history: HistoryOptions = field(default_factory=HistoryOptions)
