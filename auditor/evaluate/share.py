"""Equal parts of hosts held once: a fleet of 100,000 hosts in 200 configurations keeps ~200 copies of a
unit-restart table, a CPU summary or a pruned facts area, not 100,000.

Sharing is safe because what the core keeps is read, never changed (report documents share the same
dicts). Values are matched by content digest (contentkey: types and key order included), so a shared
value is equal to the one it replaces in every way a renderer or rule can tell."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from ..contentkey import Shared
from ..models import HostResult
from ..snapshotdoc import Snapshot

_SUMMARY_SHARED = ("ami_id", "az", "os", "kernel", "cpu")
_STUB_SHARED = ("errors", "not_applicable", "probe")


def share_stub(shared: Shared, host: HostResult) -> None:
    """A host's stub (keep.stub), its headline facts and kept snapshot parts shared, in place; its labels
    held once for the stub and the spec when they are equal."""
    summary, kept = cast("dict[str, Any] | None", host.summary), cast("dict[str, Any] | None", host.snapshot)
    shared.fields(summary, _SUMMARY_SHARED)
    if summary is not None and "unit_restarts" in summary:
        summary["unit_restarts"] = shared.keys(summary["unit_restarts"])
    if kept is None:
        return
    shared.fields(kept, _STUB_SHARED)
    labels = kept.get("labels")
    if type(labels) is dict:
        kept["labels"] = labels = shared.one(labels)
        if labels == host.spec.labels and labels is not host.spec.labels:
            host.spec = replace(host.spec, labels=labels)


def share_slice(shared: Shared, cut: Snapshot, host: HostResult) -> None:
    """A fleet slice (keep.fleet_slice), each facts area shared and labels the stub's, in place."""
    record = cast("dict[str, Any]", cut)
    facts = record.get("facts")
    if type(facts) is dict:
        for area, value in facts.items():
            facts[area] = shared.one(value)
    shared.fields(record, _STUB_SHARED)
    labels = (host.snapshot or {}).get("labels")
    if "labels" in record and record["labels"] == labels:
        record["labels"] = labels
