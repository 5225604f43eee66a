"""What the evaluation core retains of a host once its snapshot is dropped: a stub for the report, and the
fleet slice (the facts the fleet rules read), so memory grows with configurations, not with hosts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..judge.fleet import FleetSlice
from ..judge.plain import Judging
from ..judge.shapes import Shape, merge_shapes, prune
from ..models import HostResult
from ..reportdoc import facts_summary
from ..snapshotdoc import Facts, HostInfo, HostStub, ProbeInfo, Snapshot


@dataclass(frozen=True)
class FleetCut:
    """What the fleet rules read of a host: facts (by shape), `host` keys (None: all), or everything."""

    shapes: dict[str, Shape]
    host_keys: tuple[str, ...] | None
    everything: bool
    any_rule: bool


def fleet_cut(judge: Judging) -> FleetCut:
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


def fleet_slice(cut: FleetCut, snap: Snapshot) -> FleetSlice | None:
    """The snapshot cut to what the fleet rules read, name and status kept (None: no fleet rule runs)."""
    if not cut.any_rule:
        return None
    if cut.everything:
        return snap
    kept = FleetSlice()
    if "name" in snap:
        kept["name"] = snap["name"]
    if "target" in snap:
        kept["target"] = snap["target"]
    if "labels" in snap:
        kept["labels"] = snap["labels"]
    if "errors" in snap:
        kept["errors"] = snap["errors"]
    if "not_applicable" in snap:
        kept["not_applicable"] = snap["not_applicable"]
    host = snap.get("host")
    if host is not None:
        kept["host"] = host if cut.host_keys is None or not isinstance(host, dict) else _host_keys(host, cut.host_keys)
    facts: Mapping[str, Any] = snap.get("facts") or {}
    kept["facts"] = _facts({a: prune(facts.get(a), s) for a, s in cut.shapes.items() if a in facts})
    return kept


def _host_keys(host: HostInfo, keys: tuple[str, ...]) -> HostInfo:
    out = HostInfo()
    for key in keys:
        if key in host:
            out[key] = host[key]  # type: ignore[literal-required]  # a key of HostInfo (rules.root_keys)
    return out


def _facts(areas: dict[str, Any]) -> Facts:
    """Pruned areas as the facts they are cut from (prune keeps each area's form)."""
    return areas  # type: ignore[return-value]


def stub(result: HostResult) -> HostResult:
    """The host's outcome without its snapshot: labels, collector errors, probe completeness, headline facts
    (what the report document and the exit code read)."""
    snap = result.whole
    if snap is None:
        return result
    kept = HostStub()
    if "labels" in snap:
        labels = snap["labels"]
        kept["labels"] = result.spec.labels if labels == result.spec.labels else labels  # one dict, not two
    if "errors" in snap:
        kept["errors"] = snap["errors"]
    if "not_applicable" in snap:
        kept["not_applicable"] = snap["not_applicable"]
    probe = snap.get("probe") or ProbeInfo()
    kept["probe"] = ProbeInfo(complete=probe.get("complete", True), failed_areas=probe.get("failed_areas"))
    return HostResult(result.spec, result.status, result.error, kept, result.duration_s, facts_summary(snap))
