"""What was not read on a host, in one word each: the same in the terminal, every report format and JUnit.

Three words: "not applicable" (the area does not apply to the target: an image's runtime facts), "not
collected" (the host lacks the facility, as no systemd: an answer, the host is complete) and "failed"
(collection went wrong there: the facts are unknown, the host incomplete). Used by the report document and
the renderers alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

# Snapshot errors about the run as a whole, not one facts area: never "a facility the host lacks".
RUN_ERRORS = frozenset({"probe", "framing", "image"})
# Of those, what may stand on a complete host: the image reader's notes on links it read as chroot would
# (a refused or cut read also fails the area that wanted it, so the host is incomplete then).
NOTES = frozenset({"image"})


def not_evaluated(rule: str, title: str, evidence: Mapping[str, Any] | None) -> bool:
    """A "could not be evaluated" placeholder (an area not read, a rule error), not a real finding."""
    return (evidence or {}).get("status") in ("unknown", "error") and title.startswith(f"{rule} could not be evaluated")


def unavailable(errors: Mapping[str, str], failed_areas: Iterable[str] | None) -> dict[str, str]:
    """The collector errors that are answers, not failures: a facility the host lacks (no systemd). The exit
    code and Prometheus count the host complete for them; only `failed_areas` (and the run's own errors)
    make it incomplete. Without `failed_areas` (an older report) nothing can tell: all count as failures."""
    if failed_areas is None:
        return {}
    failed = set(failed_areas)
    return {area: text for area, text in errors.items() if area not in failed and area not in RUN_ERRORS}


# What was not read, in one word each, the same in the terminal, every report format and JUnit.
NOT_APPLICABLE = "not applicable"  # the area does not apply to the target (an image's runtime facts)
NOT_COLLECTED = "not collected"  # the host lacks the facility (no systemd): an answer, the host is complete
FAILED = "failed"  # collection went wrong there: its facts are unknown and the host is incomplete
NOT_READ_ORDER = (FAILED, NOT_COLLECTED, NOT_APPLICABLE)


def not_read(errors: Mapping[str, str], failed_areas: Iterable[str] | None,
             not_applicable: Iterable[str] | Mapping[str, str] | None) -> dict[str, tuple[str, str]]:
    """Every area that was not read → (its word, why), failed first. Run errors (probe, framing) and, in an
    older report without `failed_areas`, every collector error are failures (as `unavailable` says)."""
    answers = unavailable(errors, failed_areas)
    out = {area: (NOT_COLLECTED if area in answers else FAILED, str(text)) for area, text in errors.items()}
    reasons = not_applicable if isinstance(not_applicable, Mapping) else dict.fromkeys(not_applicable or (), "")
    for area, why in reasons.items():
        out.setdefault(area, (NOT_APPLICABLE, str(why or "does not apply to this target")))
    return dict(sorted(out.items(), key=lambda item: (NOT_READ_ORDER.index(item[1][0]), item[0])))


def not_read_doc(errors: Mapping[str, str], failed_areas: Iterable[str] | None,
                 not_applicable: Iterable[str] | Mapping[str, str] | None) -> dict[str, dict[str, str]]:
    """`not_read` as the report document's `hosts[].not_read`: {area: {state, why}}. Hosts that lack the same
    areas for the same reasons share one dict (documents are read, never changed): 10,000 hosts without
    systemd are one entry, not 10,000."""
    reasons = not_applicable if isinstance(not_applicable, Mapping) else dict.fromkeys(not_applicable or (), "")
    try:
        return _not_read_doc(tuple(sorted(errors.items())), None if failed_areas is None else tuple(failed_areas),
                             tuple(sorted(reasons.items())))
    except TypeError:  # a value that is no string (unhashable): not shared
        return {area: {"state": word, "why": why} for area, (word, why) in
                not_read(errors, failed_areas, not_applicable).items()}


@lru_cache(maxsize=256)
def _not_read_doc(errors: tuple[tuple[str, str], ...], failed_areas: tuple[str, ...] | None,
                  not_applicable: tuple[tuple[str, str], ...]) -> dict[str, dict[str, str]]:
    return {area: {"state": word, "why": why} for area, (word, why) in
            not_read(dict(errors), failed_areas, dict(not_applicable)).items()}


def host_not_read(host: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """`not_read` of one report host: its own `not_read` (which keeps why an area does not apply), else made
    from its collector errors, failed and not applicable areas (a report from before that field)."""
    given = host.get("not_read")
    if isinstance(given, Mapping):
        return {str(area): (str(v.get("state")), str(v.get("why")))
                for area, v in given.items() if isinstance(v, Mapping)}
    return not_read(host.get("collector_errors") or {}, host.get("failed_areas"), host.get("not_applicable"))


def not_read_words(areas: Mapping[str, tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(word, its areas) in NOT_READ_ORDER, words with no area left out: `failed: cgroups; not collected: systemd`."""
    return [(word, [a for a, (w, _) in areas.items() if w == word]) for word in NOT_READ_ORDER
            if any(w == word for w, _ in areas.values())]


@dataclass
class NotRead:
    word: str
    area: str
    why: str  # the first host's reason
    hosts: list[str] = field(default_factory=list)


def fleet_not_read(doc: Mapping[str, Any]) -> list[NotRead]:
    """Areas not read on reached hosts, one row per word × area with its hosts; failed first, then widest."""
    rows: dict[tuple[str, str], NotRead] = {}
    for host in doc["hosts"]:
        if host.get("status") != "ok":
            continue
        for area, (word, why) in host_not_read(host).items():
            rows.setdefault((word, area), NotRead(word, area, why)).hosts.append(str(host.get("name")))
    return sorted(rows.values(), key=lambda r: (NOT_READ_ORDER.index(r.word), -len(r.hosts), r.area))


_DENIED = re.compile(r"([a-z_]+) not read: [^;]*Permission denied")


def denied_facts(errors: Mapping[str, str]) -> list[str]:
    """The facts a scan without root could not read (a FAILED line `FACT not read: PATH: … Permission
    denied`, from the probe's hygiene section or the image reader), each once, in the order first named."""
    seen: dict[str, None] = {}
    for text in errors.values():
        for fact in _DENIED.findall(text if isinstance(text, str) else ""):
            seen.setdefault(fact, None)
    return list(seen)
