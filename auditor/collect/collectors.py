"""The collector registry: each fact area's parse function; which sections feed it is section_list.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .parsers.binaries import parse_binaries
from .parsers.cgroups import parse_cgroups
from .parsers.config import parse_config
from .parsers.cpu import parse_cpu
from .parsers.cpu_stack import parse_cpu_stack
from .parsers.disk import parse_disk
from .parsers.ecs import parse_ecs
from .parsers.gpu import parse_gpu
from .parsers.hygiene import parse_hygiene
from .parsers.kernel import parse_kernel
from .parsers.network import parse_network
from .parsers.os_release import parse_os
from .parsers.packages import parse_packages
from .parsers.proc import parse_proc
from .parsers.systemd import parse_systemd
from .section_list import sections_for
from .sections import Section, TamperedOutput, UnparsableOutput, kv_lines

# Section statuses for "this facility is not on the host" (e.g. no systemctl; the probe and the image
# reader) and for "a runtime fact, not applicable to an unbooted image" (the image reader only:
# auditor/image/sections.py; the probe audits only the live host it runs on).
RC_NOT_AVAILABLE = 3
RC_OFFLINE = 5
NOT_APPLICABLE_IMAGE = "not applicable to an unbooted image (runtime fact)"


def _failed_rows(kind: str, key: str) -> Callable[[object], list[str]]:
    """Reasons of the rows (one binary, one interface) whose collection failed: `KIND[NAME]: error`."""
    def failed(value: object) -> list[str]:
        rows = value.get(kind) if isinstance(value, dict) else value
        return [f"{kind}[{row.get(key)}]: {row['error']}" for row in (rows if isinstance(rows, list) else ())
                if isinstance(row, dict) and row.get("error")]
    return failed


@dataclass(frozen=True)
class Collector:
    """A fact area: the sections it needs (required first) and a pure parse function.

    `row_failures` names the rows of a parsed area whose collection failed (one binary unhashed, one
    interface whose ethtool failed): the other rows stand, the area is failed and the host incomplete."""

    area: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    parse: Callable[..., object]  # section texts in, the area's facts (facttypes.py) out
    unavailable: str = "not available on this host"
    row_failures: Callable[[object], list[str]] | None = None


def _texts(sections: dict[str, Section], names: tuple[str, ...]) -> list[str]:
    return [sections[n].body if n in sections else "" for n in names]


def _collector(area: str, parse: Callable[..., object], unavailable: str = "not available on this host",
               row_failures: Callable[[object], list[str]] | None = None) -> Collector:
    """A collector whose sections come from the one section list (section_list.py)."""
    required, optional = sections_for(area)
    return Collector(area, required, optional, parse, unavailable, row_failures)


COLLECTORS: dict[str, Collector] = {
    c.area: c
    for c in (
        _collector("os", parse_os, "no os-release"),
        _collector("kernel", parse_kernel),
        _collector("systemd", parse_systemd, "systemd is not running (no systemctl or not booted with systemd)"),
        _collector("cgroups", parse_cgroups),
        _collector("binaries", parse_binaries, row_failures=_failed_rows("binaries", "name")),
        _collector("ecs", parse_ecs),
        _collector("hygiene", parse_hygiene),
        _collector("network", parse_network, row_failures=_failed_rows("interfaces", "name")),
        _collector("cpu", parse_cpu),
        _collector("cpu_stack", parse_cpu_stack, "kernel stacks not available on this host"),
        _collector("config", parse_config, row_failures=_failed_rows("files", "path")),
        _collector("gpu", parse_gpu),
        _collector("proc", parse_proc),
        _collector("disk", parse_disk),
        _collector("packages", parse_packages, "no dpkg or rpm"),
    )
}


@dataclass(frozen=True)
class Collected:
    """One area's outcome: its facts, or why not. `failed`: the collection itself went wrong (section cut
    off, timed out, failed, tampered with, unparsable) — unlike a facility the host does not have or a
    runtime fact an image cannot have, which are answers, not failures."""

    value: object = None
    error: str | None = None
    failed: bool = False
    not_applicable: bool = False  # `error` says why the area does not apply (a runtime fact of an image)


RC_TIMED_OUT = 124  # coreutils `timeout`


def _section_failure(section: Section) -> str:
    """Why a section failed: the probe's reasons (the failing command and its first stderr line) first."""
    if section.failures:
        return f"probe section {section.name!r} failed: " + "; ".join(section.failures)[:600]
    if section.rc == RC_TIMED_OUT:
        return f"probe section {section.name!r} timed out on the host"
    return f"probe section {section.name!r} failed with status {section.rc}"


def _partial_failure(section: Section) -> str:
    return f"probe section {section.name!r} read in part: " + "; ".join(section.failures)[:600]


def _broken(section: Section | None, name: str) -> str | None:
    """Why `section` cannot be used (missing, tampered with, cut off); None when it ended."""
    if section is None:
        return f"probe section {name!r} missing from output"
    if section.problem:
        return section.problem
    if section.rc is None:
        return f"probe section {name!r} was cut off (output truncated or probe killed)"
    return None


def _partial(section: Section) -> bool:
    """A section that ended with status 0 yet names reads that failed: its facts stand, those named are
    unknown (the image reader's refused file, a probe read denied to a non-root user) and the area is failed."""
    return section.rc == 0 and bool(section.failures)


def run_collector(collector: Collector, sections: dict[str, Section]) -> Collected:
    """Parse one area; never raises."""
    partial: list[str] = []
    for name in collector.required:
        section = sections.get(name)
        if broken := _broken(section, name):
            return Collected(error=broken, failed=True)
        assert section is not None
        if section.rc == RC_NOT_AVAILABLE and not section.failures:
            reason = (kv_lines(section.body).get("reason") or "")[:200]
            return Collected(error=f"{collector.unavailable}: {reason}" if reason else collector.unavailable)
        if section.rc == RC_OFFLINE and not section.failures:
            return Collected(error=NOT_APPLICABLE_IMAGE, not_applicable=True)
        if _partial(section):
            partial.append(_partial_failure(section))
        elif section.rc != 0 or section.failures:  # a command failed: never an empty answer
            return Collected(error=_section_failure(section), failed=True)
    for name in collector.optional:
        section = sections.get(name)
        if section is None:  # an older probe or another producer (the image reader) may not print it
            continue
        if section.problem:
            return Collected(error=section.problem, failed=True)
        if section.rc is None:
            return Collected(error=_broken(section, name), failed=True)
        if _partial(section):
            partial.append(_partial_failure(section))
        elif section.failures or section.rc not in (0, RC_NOT_AVAILABLE, RC_OFFLINE):
            return Collected(error=_section_failure(section), failed=True)
    try:
        value = collector.parse(*_texts(sections, collector.required + collector.optional))
    except TamperedOutput as exc:
        return Collected(error=f"output tampered with (not trusted): {exc}", failed=True)
    except UnparsableOutput as exc:
        return Collected(error=f"output unparsable: {exc}", failed=True)
    except Exception as exc:  # a parser bug must become an explicit unknown, never a crash
        return Collected(error=f"parser error: {type(exc).__name__}: {exc}", failed=True)
    rows = partial + (collector.row_failures(value) if collector.row_failures else [])
    if rows:
        return Collected(value, error="; ".join(rows)[:1000], failed=True)
    return Collected(value)
