"""Equal parts of hosts held once: a fleet of 100,000 hosts in 200 configurations keeps ~200 copies of a
unit-restart table, a CPU summary or a pruned facts area, not 100,000.

Sharing is safe because what the core keeps is read, never changed (report documents share the same
dicts). Values are matched by content digest (contentkey: types and key order included), so a shared
value is equal to the one it replaces in every way a renderer or rule can tell."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar, cast

from ..contentkey import content_digest
from ..models import HostResult
from ..snapshotdoc import Snapshot

T = TypeVar("T")
_SUMMARY_SHARED = ("ami_id", "az", "os", "kernel", "cpu")
_STUB_SHARED = ("errors", "not_applicable", "probe")


class Shared:
    """A bounded table of values by content: `one` returns an equal value held before, if any. After
    `limit` distinct values it starts over (what hosts already share stays shared), so a fleet of
    all-different hosts costs a digest per value and no more memory than without it."""

    def __init__(self, limit: int = 1 << 16):
        self._limit = limit
        self._held: dict[bytes, Any] = {}

    def one(self, value: T) -> T:
        """`value`, or the equal value held for it (dicts, lists and strings; anything else as it is)."""
        if type(value) not in (dict, list, str):
            return value
        key = content_digest(value)
        if key is None:
            return value
        held = self._held.get(key)
        if held is not None:
            return cast(T, held)
        if len(self._held) >= self._limit:
            self._held.clear()
        self._held[key] = value
        return value

    def fields(self, record: dict[str, Any] | None, names: tuple[str, ...]) -> None:
        """`record`'s values under `names` replaced, in place, by the equal values held."""
        if record is not None:
            for name in names:
                if name in record:
                    record[name] = self.one(record[name])

    def keys(self, record: Any) -> Any:
        """A dict whose keys are held once (a table of unit names with per-host counts), or `record`."""
        if type(record) is not dict:
            return record
        held = self.one(record)
        return held if held is not record else {self.one(k): v for k, v in record.items()}

    def stub(self, host: HostResult) -> None:
        """A host's stub (keep.stub), its headline facts and kept snapshot parts shared, in place; its
        labels held once for the stub and the spec when they are equal."""
        summary, kept = host.summary, cast("dict[str, Any] | None", host.snapshot)
        self.fields(summary, _SUMMARY_SHARED)
        if summary is not None and "unit_restarts" in summary:
            summary["unit_restarts"] = self.keys(summary["unit_restarts"])
        if kept is None:
            return
        self.fields(kept, _STUB_SHARED)
        labels = kept.get("labels")
        if type(labels) is dict:
            kept["labels"] = labels = self.one(labels)
            if labels == host.spec.labels and labels is not host.spec.labels:
                host.spec = replace(host.spec, labels=labels)

    def slice(self, cut: Snapshot, host: HostResult) -> None:
        """A fleet slice (keep.fleet_slice), each facts area shared and labels the stub's, in place."""
        record = cast("dict[str, Any]", cut)
        facts = record.get("facts")
        if type(facts) is dict:
            for area, value in facts.items():
                facts[area] = self.one(value)
        self.fields(record, _STUB_SHARED)
        labels = (host.snapshot or {}).get("labels")
        if "labels" in record and record["labels"] == labels:
            record["labels"] = labels
