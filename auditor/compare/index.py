"""Dedupe a fleet by content: hosts with the same normalized facts share one configuration.

Everything downstream (drift, group comparison, symptom ranking) works per configuration and weighs
it by its host count, so cost grows with distinct configurations, not with hosts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..snapshotdoc import Snapshot
from .normalize import ABSENT, NormalView, area_of, display, normalize


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


def index_snapshots(snapshots: Iterable[Snapshot], keys: Sequence[str] = ()) -> FleetIndex:
    """Normalize each snapshot once and group hosts by identical views (a snapshot may be dropped after)."""
    configs: list[Config] = []
    by_identity: dict[Any, int] = {}
    host_config: dict[str, int] = {}
    attrs: dict[str, dict[str, str]] = {}
    plain_keys = [k for k in keys if not k.startswith("facts.")]
    for snap in snapshots:
        name = str(snap.get("name"))
        if name in host_config:
            raise ValueError(f"host {name!r} appears twice")
        view = normalize(snap)
        ident = view.identity()
        index = by_identity.get(ident)
        if index is None:
            index = by_identity[ident] = len(configs)
            configs.append(Config(view))
        configs[index].hosts.append(name)
        host_config[name] = index
        if plain_keys:
            attrs[name] = host_attrs(snap, plain_keys)
    return FleetIndex(configs, host_config, attrs)
