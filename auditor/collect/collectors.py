"""The collector registry: which probe sections feed which fact area, and how they are parsed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .parsers.binaries import parse_binaries
from .parsers.cgroups import parse_cgroups
from .parsers.cpu import parse_cpu
from .parsers.ecs import parse_ecs
from .parsers.kernel import parse_kernel
from .parsers.network import parse_network
from .parsers.os_release import parse_os
from .parsers.packages import parse_packages
from .parsers.systemd import parse_systemd
from .sections import Section, TamperedOutput

# Section statuses for "this facility is not on the host" (e.g. no systemctl; the probe and the image
# reader) and for "a runtime fact, not applicable to an unbooted image" (the image reader only:
# collect/image_sections.py; the probe audits only the live host it runs on).
RC_NOT_AVAILABLE = 3
RC_OFFLINE = 5


@dataclass(frozen=True)
class Collector:
    """A fact area: the sections it needs (required first) and a pure parse function."""

    area: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    parse: Callable[..., Any]
    unavailable: str = "not available on this host"


def _texts(sections: dict[str, Section], names: tuple[str, ...]) -> list[str]:
    return [sections[n].body if n in sections else "" for n in names]


COLLECTORS: dict[str, Collector] = {
    c.area: c
    for c in (
        Collector("os", ("os",), (), parse_os, "no os-release"),
        Collector("kernel", ("kernel",), ("sysctl",), parse_kernel),
        Collector(
            "systemd",
            ("systemd_version", "unit_files", "units"),
            ("restart_journal",),
            parse_systemd,
            "systemd is not running (no systemctl or not booted with systemd)",
        ),
        Collector("cgroups", ("cgroups",), (), parse_cgroups),
        Collector("binaries", ("binaries",), (), parse_binaries),
        Collector("ecs", ("ecs",), (), parse_ecs),
        Collector("network", ("network",), ("kernel_log",), parse_network),
        Collector("cpu", ("cpu",), (), parse_cpu),
        Collector("packages", ("packages",), (), parse_packages, "no dpkg or rpm"),
    )
}


def run_collector(collector: Collector, sections: dict[str, Section]) -> tuple[Any, str | None]:
    """Parse one area. Returns (facts or None, error text or None); never raises."""
    for name in collector.required:
        section = sections.get(name)
        if section is None:
            return None, f"probe section {name!r} missing from output"
        if section.problem:
            return None, section.problem
        if section.rc is None:
            return None, f"probe section {name!r} was cut off (output truncated or probe killed)"
        if section.rc == RC_NOT_AVAILABLE:
            return None, collector.unavailable
        if section.rc == RC_OFFLINE:
            return None, "not applicable to an unbooted image (runtime fact)"
        if section.rc != 0:
            return None, f"probe section {name!r} failed with status {section.rc}"
    for name in collector.optional:
        section = sections.get(name)
        if section is not None and section.problem:
            return None, section.problem
    try:
        return collector.parse(*_texts(sections, collector.required + collector.optional)), None
    except TamperedOutput as exc:
        return None, f"output tampered with (not trusted): {exc}"
    except Exception as exc:  # a parser bug must become an explicit unknown, never a crash
        return None, f"parser error: {type(exc).__name__}: {exc}"
