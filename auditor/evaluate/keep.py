"""What the core keeps of a host once its snapshot is dropped: a stub for the report, and the slice of
facts the fleet rules read (judge/shapes.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from ..judge.engine import Judge
from ..judge.shapes import Shape, merge_shapes, prune
from ..models import HostResult
from ..reportdoc import facts_summary
from ..snapshotdoc import Snapshot

_STUB_KEYS = ("labels", "errors", "not_applicable")
_SLICE_KEYS = ("name", "target", "labels", "errors", "not_applicable")


@dataclass(frozen=True)
class FleetCut:
    """What the fleet rules read of a host: facts (by shape), `host` keys (None: all), or everything."""

    shapes: dict[str, Shape]
    host_keys: tuple[str, ...] | None
    everything: bool
    any_rule: bool


def fleet_cut(judge: Judge) -> FleetCut:
    """The union of what the judge's fleet rules read."""
    shapes: dict[str, Shape] = {}
    host_keys: set[str] | None = set()
    everything = any_rule = False
    for rule in judge.rules:
        if rule.fleet is None:
            continue
        any_rule = True
        everything = everything or "*" in rule.roots
        for area, shape in rule.shapes:
            shapes[area] = merge_shapes(shapes[area], shape) if area in shapes else shape
        if "host" in rule.roots and host_keys is not None:
            keys = rule.root_keys.get("host")
            host_keys = None if keys is None else host_keys | set(keys)
    return FleetCut(shapes, None if host_keys is None else tuple(sorted(host_keys)), everything, any_rule)


def fleet_slice(cut: FleetCut, snap: Snapshot) -> Snapshot | None:
    """The snapshot cut to what the fleet rules read, name and status kept (None: no fleet rule runs)."""
    if not cut.any_rule:
        return None
    if cut.everything:
        return snap
    facts = snap.get("facts") or {}
    keep: dict[str, Any] = {k: snap.get(k) for k in _SLICE_KEYS if k in snap}
    host: Mapping[str, Any] | None = snap.get("host")
    if host is not None:
        keep["host"] = host if cut.host_keys is None or not isinstance(host, dict) else {
            k: host[k] for k in cut.host_keys if k in host}
    keep["facts"] = {a: prune(facts.get(a), s) for a, s in cut.shapes.items() if a in facts}
    return cast(Snapshot, keep)


def stub(result: HostResult) -> HostResult:
    """The host's outcome without its snapshot: labels, collector errors, probe completeness, headline facts
    (what the report document and the exit code read)."""
    snap = result.snapshot
    if snap is None:
        return result
    kept: dict[str, Any] = {k: snap.get(k) for k in _STUB_KEYS if k in snap}
    if kept.get("labels") == result.spec.labels:  # the usual case: one dict per host kept, not two
        kept["labels"] = result.spec.labels
    probe = snap.get("probe") or {}
    kept["probe"] = {"complete": probe.get("complete", True), "failed_areas": probe.get("failed_areas")}
    return HostResult(result.spec, result.status, result.error, cast(Snapshot, kept), result.duration_s,
                      facts_summary(snap))
