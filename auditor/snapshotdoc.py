"""The `ami-auditor/snapshot/1` document as types: what every room that reads a snapshot may rely on.

A snapshot is JSON from a host (untrusted): these types say what a well-formed one holds, so mypy checks
the code that builds and reads it; they check nothing at run time (schemacheck.py does, with the JSON
Schema). `SNAPSHOT_KEYS` is the one list of its top-level keys; the JSON Schema, the rule compiler's
roots and the history store's per-run split are made from it, and tests/unit/test_snapshot_types.py fails when
this module, facts.yaml and auditor/schemas/snapshot.schema.json disagree on a key or an area.
"""

from __future__ import annotations

from typing import TypedDict, TypeGuard

from . import facttypes as ft


class HostInfo(TypedDict, total=False):
    """`host`: who the host is (facts.yaml `host`); a value the probe could not find is null."""

    hostname: str | None
    machine_id: str | None
    boot_id: str | None
    uptime_s: float | None
    container: str | None
    image_name: str | None
    instance_id: str | None
    ami_id: str | None
    az: str | None
    az_id: str | None
    region: str | None
    instance_type: str | None
    cloud: str | None


class ProbeInfo(TypedDict, total=False):
    """`probe`: how the one round trip went (collect/snapshot.py)."""

    duration_s: float
    cpu_s: float | None
    exit_status: int | None
    complete: bool
    truncated: bool
    stdout_bytes: int
    failed_areas: list[str] | None  # None in a stub made from a snapshot without it


class Facts(TypedDict, total=False):
    """`facts` by area (facts.yaml `facts`, each typed in the generated facttypes.py); an area is null when
    its collector failed or does not apply."""

    os: ft.Os | None
    kernel: ft.Kernel | None
    systemd: ft.Systemd | None
    cgroups: ft.Cgroups | None
    binaries: list[ft.BinariesRow] | None
    ecs: ft.Ecs | None
    hygiene: ft.Hygiene | None
    network: ft.Network | None
    cpu: ft.Cpu | None
    cpu_stack: ft.CpuStack | None
    config: ft.Config | None
    gpu: ft.Gpu | None
    proc: ft.Proc | None
    disk: ft.Disk | None
    packages: ft.Packages | None
    trends: ft.Trends | None  # derived by history, never collected


class Snapshot(TypedDict, total=False):
    """One host's snapshot document (`"schema": "ami-auditor/snapshot/1"`), as the code reading it sees it.

    Every key is optional to the type: a snapshot read back is host data, so readers use `.get`. What a
    whole document must hold is REQUIRED_KEYS, enforced by the JSON Schema made from it. What a run keeps
    of one has its own types: HostStub, and judge.fleet.FleetSlice."""

    schema: str
    name: str
    target: str
    labels: dict[str, str]
    collected_at: str
    probe: ProbeInfo
    host: HostInfo
    facts: Facts
    errors: dict[str, str]  # area (or probe, framing, image) → why it failed
    not_applicable: dict[str, str]  # area → why it does not apply to this target (not an error)


class HostStub(TypedDict, total=False):
    """What a run keeps of a host once its snapshot is judged and dropped (evaluate/retained.stub): what the
    report document and the exit code read. No facts: code that needs them holds the whole Snapshot."""

    labels: dict[str, str]
    errors: dict[str, str]
    not_applicable: dict[str, str]
    probe: ProbeInfo


def is_whole(doc: Snapshot | HostStub) -> TypeGuard[Snapshot]:
    """A whole snapshot, not a stub: every snapshot holds `facts` (REQUIRED_KEYS), no stub does."""
    return "facts" in doc


# The top-level keys, in document order, with how a rule sees each one that is not declared in facts.yaml
# ("string" or "map"); `host` and `facts` are declared there.
SNAPSHOT_KEYS: tuple[str, ...] = ("schema", "name", "target", "labels", "collected_at", "probe", "host", "facts",
                                  "errors", "not_applicable")
REQUIRED_KEYS: tuple[str, ...] = ("schema", "name", "target", "collected_at", "host", "facts", "errors")
DECLARED_KEYS = ("host", "facts")  # their shape is facts.yaml
FREE_KEYS: dict[str, str] = {"schema": "string", "name": "string", "target": "string", "labels": "map",
                             "collected_at": "string", "probe": "map", "errors": "map", "not_applicable": "map"}
# What one scan adds to a host's configuration: the history store keeps these per scan, not in the
# content-shared body (history/pack.py).
PER_RUN_KEYS: tuple[str, ...] = ("name", "target", "labels", "collected_at", "probe")
