"""Dedupe a fleet by content: hosts with the same normalized facts share one configuration.

Everything downstream (drift, group comparison, symptom ranking) works per configuration and weighs
it by its host count, so cost grows with distinct configurations, not with hosts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from ..snapshotdoc import Snapshot
from .normalize import ABSENT, NormalView, area_of, display, normalize, stable_key


@dataclass
class Config:
    """One distinct normalized view and the hosts that have it."""

    view: NormalView
    hosts: list[str] = field(default_factory=list)

    def value(self, path: str) -> Any:
        """The fact's value, ABSENT when the host lacks it, None when its area is unknown."""
        if area_of(path) in self.view.unknown:
            return None
        return self.view.flat.get(path, ABSENT)


@dataclass
class FleetIndex:
    """Configurations, which host has which, and the host attributes asked for (labels, host facts)."""

    configs: list[Config]
    host_config: dict[str, int]
    attrs: dict[str, dict[str, str]]

    def attr(self, host: str, key: str) -> str | None:
        """A host's group value for `key`: a label, a host fact (az, ami_id…) or a fact path."""
        if key.startswith("facts."):
            value = self.configs[self.host_config[host]].value(key)
            return None if value is None else display(value)
        return self.attrs.get(host, {}).get(key)

    @property
    def hosts(self) -> list[str]:
        return list(self.host_config)


def host_attrs(snapshot: Snapshot, keys: Sequence[str]) -> dict[str, str]:
    """Labels first, then host facts (az, az_id, ami_id, instance_type, …), as strings."""
    labels = snapshot.get("labels") or {}
    host = snapshot.get("host") or {}
    out = {}
    for key in keys:
        value: object = labels.get(key)
        if value is None and key != "name":
            value = host.get(key)
        if key == "name":
            value = snapshot.get("name")
        if value is not None and not isinstance(value, (dict, list)):
            out[key] = str(value)
    return out


ViewRef = tuple[int, int]  # (process id, that process's view number)


class ViewMemo:
    """One process's normalized views: `normalize` runs once per stable key (normalize.stable_key), and each
    distinct view gets a number once, so a worker sends a view to its parent once, then only its number."""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._by_key: dict[bytes, int] = {}
        self._by_identity: dict[Any, int] = {}

    def _forked(self) -> None:
        """In a forked worker: the parent's numbers are not this process's."""
        self._pid = os.getpid()
        self._by_key.clear()
        self._by_identity.clear()

    def ref(self, snapshot: Snapshot) -> tuple[ViewRef, NormalView | None]:
        """The snapshot's view number, and the view itself when this process has not numbered it before."""
        if self._pid != os.getpid():
            self._forked()
        key = stable_key(snapshot)
        number = self._by_key.get(key) if key is not None else None
        view = None
        if number is None:
            view = normalize(snapshot)
            ident = view.identity()
            number = self._by_identity.get(ident)
            if number is None:
                number = self._by_identity[ident] = len(self._by_identity)
            else:
                view = None
            if key is not None:
                self._by_key[key] = number
        return (self._pid, number), view


class IndexBuilder:
    """The one fleet-index builder: views adopted by content (their shared parts re-numbered by content,
    never by a worker's counter), hosts placed on them; a second host of the same name is refused."""

    def __init__(self) -> None:
        self.configs: list[Config] = []
        self._by_identity: dict[Any, int] = {}
        self._by_ref: dict[ViewRef, int] = {}
        self._part_tokens: dict[Any, int] = {}
        self._tokens = count()
        self.host_config: dict[str, int] = {}

    def known(self, ref: ViewRef) -> bool:
        return ref in self._by_ref

    def adopt(self, ref: ViewRef, view: NormalView) -> None:
        """Map a process's view number to this index's configuration of the same content."""
        parts = []
        for _, items in view.parts:
            token = self._part_tokens.get(items)
            if token is None:
                token = self._part_tokens[items] = next(self._tokens)
            parts.append((token, items))
        mine = NormalView(view.rest, tuple(parts), view.unknown, view.not_applicable)
        ident = mine.identity()
        index = self._by_identity.get(ident)
        if index is None:
            index = self._by_identity[ident] = len(self.configs)
            self.configs.append(Config(mine))
        self._by_ref[ref] = index

    def place(self, name: str, ref: ViewRef) -> bool:
        """Put host `name` on the configuration of `ref` (adopted before); False when the name is taken."""
        if name in self.host_config:
            return False
        index = self._by_ref[ref]
        self.configs[index].hosts.append(name)
        self.host_config[name] = index
        return True

    def index(self, attrs: dict[str, dict[str, str]], order: Sequence[str] | None = None) -> FleetIndex:
        """The fleet index; with `order` (host names), configurations and their hosts in that order, so
        the index does not depend on the order hosts arrived in."""
        if order is None:
            return FleetIndex(self.configs, self.host_config, attrs)
        rank = {name: i for i, name in enumerate(order)}
        configs = [Config(c.view, sorted(c.hosts, key=rank.__getitem__)) for c in self.configs if c.hosts]
        configs.sort(key=lambda c: rank[c.hosts[0]])
        host_config = {name: i for i, c in enumerate(configs) for name in c.hosts}
        return FleetIndex(configs, {name: host_config[name] for name in order if name in host_config}, attrs)


def index_snapshots(snapshots: Iterable[Snapshot], keys: Sequence[str] = ()) -> FleetIndex:
    """The fleet index of in-memory snapshots (the builder above; a library helper for tests and benchmarks:
    the evaluation core turns a repeated host name into an `error` host, here it is a ValueError)."""
    memo, builder = ViewMemo(), IndexBuilder()
    attrs: dict[str, dict[str, str]] = {}
    plain_keys = [k for k in keys if not k.startswith("facts.")]
    for snap in snapshots:
        name = str(snap.get("name"))
        ref, view = memo.ref(snap)
        if view is not None:
            builder.adopt(ref, view)
        if not builder.place(name, ref):
            raise ValueError(f"host {name!r} appears twice")
        if plain_keys:
            attrs[name] = host_attrs(snap, plain_keys)
    return builder.index(attrs)
