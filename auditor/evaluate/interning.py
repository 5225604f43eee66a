"""Equal parts of hosts held once (interned): hosts of one configuration share one copy of a unit-restart
table, a CPU summary or a pruned facts area, so what the core keeps grows with configurations.

Sharing is safe because what the core keeps is read, never changed (report documents share the same
dicts). Values are matched by content digest (contentkey: types and key order included), so a shared
value is equal to the one it replaces in every way a renderer or rule can tell."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from ..contentkey import Shared
from ..judge.fleet import FleetSlice
from ..models import HostResult
from ..snapshotdoc import HostStub

_SUMMARY_SHARED = ("ami_id", "az", "os", "kernel", "cpu")


def intern_stub(shared: Shared, host: HostResult) -> None:
    """A host's stub (retained.stub), its headline facts and kept snapshot parts shared, in place; its labels
    held once for the stub and the spec when they are equal."""
    summary, kept = cast("dict[str, Any] | None", host.summary), host.snapshot  # shared in place, key by key
    shared.fields(summary, _SUMMARY_SHARED)
    if summary is not None and "unit_restarts" in summary:
        summary["unit_restarts"] = shared.keys(summary["unit_restarts"])
    if kept is None:
        return
    _intern_status(shared, kept)
    labels = kept.get("labels")
    if type(labels) is dict:
        kept["labels"] = labels = shared.one(labels)
        if labels == host.spec.labels and labels is not host.spec.labels:
            host.spec = replace(host.spec, labels=labels)


def intern_slice(shared: Shared, cut: FleetSlice, host: HostResult) -> None:
    """A fleet slice (retained.fleet_slice), each facts area shared and labels the stub's, in place."""
    facts: dict[str, Any] | None = cut.get("facts")  # type: ignore[assignment]  # areas replaced by equal ones
    if type(facts) is dict:
        for area, value in facts.items():
            facts[area] = shared.one(value)
    if "errors" in cut:
        cut["errors"] = shared.one(cut["errors"])
    if "not_applicable" in cut:
        cut["not_applicable"] = shared.one(cut["not_applicable"])
    labels = (host.snapshot or {}).get("labels")
    if labels is not None and cut.get("labels") == labels:
        cut["labels"] = labels


def _intern_status(shared: Shared, kept: HostStub) -> None:
    """Collector errors, areas not applicable and probe status: equal across a configuration's hosts."""
    if "errors" in kept:
        kept["errors"] = shared.one(kept["errors"])
    if "not_applicable" in kept:
        kept["not_applicable"] = shared.one(kept["not_applicable"])
    if "probe" in kept:
        kept["probe"] = shared.one(kept["probe"])
