"""The probe's sections, declared once: their order, which fact areas read them, which are runtime state.

probe.sh prints them (its `run NAME FUNC` lines), the image room produces them from an unbooted root
(auditor/image/sections.py iterates this list), and the collectors take their required and optional
sections from it (collectors.py). tests/unit/test_section_parity.py checks all three against this list, so a
section gained or lost in one place fails the suite instead of becoming a silent "missing" area.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SectionSpec:
    """One section. `required_by`: areas that fail without it; `optional_for`: areas that read it when
    present (an older probe or the image reader may not print it). `runtime`: live-host state an unbooted
    image cannot have (the image reader answers "not applicable"). `image_only`: printed only by the
    image reader. `reader`: what else reads it (host identity, probe cost) or why nothing parses it."""

    name: str
    required_by: tuple[str, ...] = ()
    optional_for: tuple[str, ...] = ()
    runtime: bool = False
    image_only: bool = False
    reader: str = ""


SECTIONS: tuple[SectionSpec, ...] = (
    SectionSpec("meta", reader="raw evidence: probe version, reader, uid, shell"),
    SectionSpec("identity", reader="host identity (parsers/identity.py)"),
    SectionSpec("cloudinit", runtime=True, reader="host identity: cloud-init's cached instance data"),
    SectionSpec("imds", runtime=True, reader="host identity: the instance metadata service"),
    SectionSpec("os", required_by=("os",)),
    SectionSpec("kernel", required_by=("kernel",)),
    SectionSpec("sysctl", optional_for=("kernel",), runtime=True),
    SectionSpec("systemd_version", required_by=("systemd",)),
    SectionSpec("unit_files", required_by=("systemd",)),
    SectionSpec("units", required_by=("systemd",)),
    SectionSpec("restart_journal", optional_for=("systemd",)),
    SectionSpec("cgroups", required_by=("cgroups",), runtime=True),
    SectionSpec("binaries", required_by=("binaries",)),
    SectionSpec("eks", reader="raw evidence: /etc/eks/release"),
    SectionSpec("ecs", required_by=("ecs",)),
    SectionSpec("hygiene", required_by=("hygiene",)),
    SectionSpec("network", required_by=("network",), runtime=True),
    SectionSpec("kernel_log", optional_for=("network",), runtime=True),
    SectionSpec("unit_limits", optional_for=("systemd",), runtime=True),
    SectionSpec("config", required_by=("config",)),
    SectionSpec("kernels", optional_for=("kernel",)),
    SectionSpec("gpu", required_by=("gpu",), runtime=True),
    SectionSpec("proc", required_by=("proc",), runtime=True),
    SectionSpec("disk", required_by=("disk",), runtime=True),
    SectionSpec("cpu", required_by=("cpu",), optional_for=("cpu_stack",), runtime=True),
    SectionSpec("cpu_stack", required_by=("cpu_stack",), runtime=True),
    SectionSpec("packages", required_by=("packages",)),
    SectionSpec("confinement", image_only=True, reader="errors.image (parsers/confinement.py)"),
    SectionSpec("cost", reader="probe.cpu_s (snapshot.py)"),
)

BY_NAME: dict[str, SectionSpec] = {s.name: s for s in SECTIONS}


def probe_section_names() -> tuple[str, ...]:
    """The sections probe.sh prints, in its order."""
    return tuple(s.name for s in SECTIONS if not s.image_only)


def image_section_names() -> tuple[str, ...]:
    """The sections the image reader prints, in its order (runtime ones say "not applicable")."""
    return tuple(s.name for s in SECTIONS)


def areas() -> tuple[str, ...]:
    """Every fact area some section feeds, in first-seen order."""
    seen: dict[str, None] = {}
    for spec in SECTIONS:
        for area in spec.required_by + spec.optional_for:
            seen.setdefault(area, None)
    return tuple(seen)


def sections_for(area: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(required, optional) section names of `area`, each in declaration order: the parse function's
    arguments, required first."""
    required = tuple(s.name for s in SECTIONS if area in s.required_by)
    optional = tuple(s.name for s in SECTIONS if area in s.optional_for)
    if not required:
        raise KeyError(f"no probe section feeds area {area!r}")
    return required, optional
