"""`diff A B`: each side loaded or collected, then what differs from A to B, and the exit code (decide).

A side is a snapshot file, a baseline, or a live host collected through `scan`'s door (live_hosts). Between
two snapshots, image hygiene that appeared (a baked SSH host key) is a difference though drift leaves those
facts out as volatile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from ..context import Env
from ..errors import InputError
from ..exitcodes import Outcome, decide
from ..models import HostSpec
from ..snapshotdoc import Snapshot
from .live_hosts import iter_hosts

if TYPE_CHECKING:  # imported where used: `ami-auditor --help` does not load deepdiff, re2 or jsonschema
    from ..compare.baseline import Baseline
    from ..compare.drift import Difference
    from ..reporttypes import ReleaseNotesDoc

Side: TypeAlias = "Baseline | Snapshot | HostSpec"


@dataclass
class DiffResult:
    """The differences from A to B, their release notes (grouped by area), and the exit code."""

    differences: list[Difference]
    notes: ReleaseNotesDoc
    exit_code: int


def load_side(text: str, inventory: dict[str, HostSpec]) -> Side:
    """Classify one operand and load it (files are validated before any host is contacted)."""
    from ..compare.baseline import load_baseline
    from ..compare.sources import load_snapshot_file
    from ..targets.inventory import safe_target, targets_from_args

    if text in inventory:
        return inventory[text]
    path = Path(text)
    if path.suffix in (".json", ".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise InputError("no such file", safe_target(text, quote=False))
        if path.suffix == ".json":
            return load_snapshot_file(path)
        return load_baseline(text)
    return next(iter(targets_from_args([text], check_paths=True)))


def collect_sides(specs: list[HostSpec], deadline: float, env: Env) -> list[Snapshot | None]:
    """The live sides' snapshots, collected at once through scan's door (iter_hosts: errors redacted, ssm://
    in its batch); None for a side not reached, its status told on stderr."""
    from ..collect.probe import DEFAULT_BINARIES

    snaps: list[Snapshot | None] = [None] * len(specs)
    if not specs:
        return snaps
    for index, result in iter_hosts(specs, parallel=len(specs), binaries=DEFAULT_BINARIES, deadline_s=deadline):
        snaps[index] = result.whole
        if result.whole is None:
            env.err(f"ami-auditor: {result.name}: {result.status}: {result.error}")
    return snaps


def differences(a: Baseline | Snapshot, b: Baseline | Snapshot) -> list[Difference]:
    """Differences from A to B for any mix of baselines and snapshots."""
    from ..compare.baseline import Baseline
    from ..compare.drift import diff_flat, diff_views, drift_view, reverse
    from ..compare.normalize import normalize
    from ..compare.release import hygiene_appeared

    if isinstance(a, Baseline):
        if isinstance(b, Baseline):
            return diff_flat({p: e.shown() for p, e in a.expect.items()}, {p: e.shown() for p, e in b.expect.items()})
        return drift_view(a, normalize(b))
    if isinstance(b, Baseline):
        return reverse(drift_view(b, normalize(a)))
    found = diff_views(normalize(a), normalize(b))  # baselines hold no volatile facts: hygiene only here
    return found + hygiene_appeared((a.get("facts") or {}).get("hygiene"), (b.get("facts") or {}).get("hygiene"))


def diff(a: Baseline | Snapshot, b: Baseline | Snapshot, a_name: str, b_name: str) -> DiffResult:
    """The comparison of two loaded sides: exit 1 when they differ (like diff(1)), else 0."""
    from ..compare.release import release_notes
    from ..targets.inventory import safe_target

    found = differences(a, b)
    skipped = {area for side in (a, b) if isinstance(side, dict) for area in side.get("not_applicable") or ()}
    notes = release_notes(found, safe_target(a_name, quote=False), safe_target(b_name, quote=False), skipped)
    return DiffResult(found, notes, decide(Outcome(findings=bool(found))))


def unreached() -> int:
    """The exit code when a live side was not reached."""
    return decide(Outcome(incomplete=True))
