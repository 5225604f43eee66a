"""Release notes between two images (or any two sides of `diff`): differences grouped by area, one entry
per subject — a unit enabled/disabled/added/removed, a package added/removed/upgraded/downgraded (in
version order, not string order), a binary whose hash, source or version changed, a sysctl, the kernel,
its command line — each with the severity drift has (the fact schema's `drift`, via drift_severity); and
image hygiene that appeared (baked SSH host keys, histories), which drift leaves out as volatile.
Pure: Differences in, a dict out (renderers: render/release_notes.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..collect.schema import fact_tree
from ..factpath import parse
from ..models import severity_rank
from ..reporttypes import ChangeDoc, ReleaseNotesDoc, ReleaseSectionDoc, ReleaseUnknownDoc
from .drift import Difference
from .versions import compare_versions

SCHEMA = "ami-auditor/release-notes/1"
# (area, title) in the order sections are listed when their severities tie
SECTIONS = (("units", "Units"), ("binaries", "Binaries"), ("packages", "Packages"), ("kernel", "Kernel"),
            ("sysctls", "Sysctls"), ("hygiene", "Image hygiene"), ("other", "Other"))
_ENABLED = ("enabled", "enabled-runtime", True)
_FIELD_ORDER = {f: i for i, f in enumerate(("found", "source_host", "source_url", "sha256", "version", "package",
                                            "package_version", "path", "realpath", "size", "owner_user", "mode"))}


@dataclass
class _Entry:
    area: str
    subject: str
    diffs: list[Difference] = field(default_factory=list)


def _area_and_subject(d: Difference) -> tuple[str, str]:
    fp = parse(d.path)
    collection, key = fp.collection, fp.key
    if collection in ("facts.systemd.unit_files", "facts.systemd.enabled_units", "facts.systemd.units"):
        return "units", str(key)
    if collection == "facts.binaries":
        return "binaries", str(key)
    if collection == "facts.packages.items":
        return "packages", str(key)
    if collection == "facts.kernel.sysctls":
        return "sysctls", str(key)
    if d.path.startswith("facts.kernel."):
        return "kernel", d.path.removeprefix("facts.kernel.")
    if d.path.startswith("facts.hygiene."):
        first = re.search(r"\[([^\]]*)\]", d.path)  # the row (a file path), not a value inside it
        return "hygiene", first.group(1) if first else d.path.removeprefix("facts.hygiene.")
    return "other", d.path.removeprefix("facts.")


def _state(value: Any) -> Any:
    return value.get("state") if isinstance(value, dict) else value


def _unit_change(diffs: list[Difference]) -> tuple[str, Any, Any]:
    before = after = None
    for d in diffs:
        fp = parse(d.path)
        collection, fld = fp.collection, fp.field
        if collection == "facts.systemd.enabled_units":
            before = before if before is not None else ("enabled" if d.kind == "removed" else None)
            after = after if after is not None else ("enabled" if d.kind == "added" else None)
        elif collection == "facts.systemd.unit_files" and fld in ("", "state"):
            before, after = _state(d.expected), _state(d.actual)
    if after in _ENABLED and before not in _ENABLED:
        return "enabled", before, after
    if before in _ENABLED and after not in _ENABLED:
        return "disabled", before, after
    rows = [d for d in diffs if parse(d.path).field == "" and parse(d.path).collection == "facts.systemd.unit_files"]
    if rows and rows[0].kind in ("added", "removed"):
        return rows[0].kind, before, after
    return "changed", before, after


def _version(value: Any) -> Any:
    return value.get("version") if isinstance(value, dict) else value


def _package_change(diffs: list[Difference]) -> tuple[str, Any, Any]:
    d = next((x for x in diffs if parse(x.path).field in ("", "version")), diffs[0])
    before, after = _version(d.expected), _version(d.actual)
    if d.kind in ("added", "removed"):
        return d.kind, before, after
    if isinstance(before, str) and isinstance(after, str):
        order = compare_versions(after, before)
        return ("upgraded" if order > 0 else "downgraded" if order < 0 else "changed"), before, after
    return "changed", before, after


def _fields_change(diffs: list[Difference]) -> tuple[str, Any, Any]:
    """A binary (or any row): added/removed whole, else which fields changed (`sha256, source_host`)."""
    rows = [d for d in diffs if parse(d.path).field == "" and d.kind in ("added", "removed")]
    if rows:
        return rows[0].kind, rows[0].expected, rows[0].actual
    ranked = sorted(diffs, key=lambda d: (_FIELD_ORDER.get(parse(d.path).field, len(_FIELD_ORDER)),
                                          parse(d.path).field))
    fields = [parse(d.path).field or d.path for d in ranked]
    first = ranked[0]  # before/after show the field that best names the change (source, then hash)
    return ", ".join(fields) + " changed", first.expected, first.actual


def _change(entry: _Entry) -> ChangeDoc:
    if entry.area == "units":
        what, before, after = _unit_change(entry.diffs)
    elif entry.area == "packages":
        what, before, after = _package_change(entry.diffs)
    elif len(entry.diffs) == 1 and entry.area != "binaries":
        d = entry.diffs[0]
        inner = re.findall(r"\[([^\]]*)\]", d.path)[1:]  # credential_files[/root/.netrc].kinds[netrc]
        what, before, after = " ".join([*inner, d.kind]), d.expected, d.actual
    else:
        what, before, after = _fields_change(entry.diffs)
    severity = max((d.severity for d in entry.diffs), key=severity_rank)
    return {"subject": entry.subject, "change": what, "severity": severity, "before": before, "after": after,
            "paths": [d.path for d in entry.diffs]}


# Image hygiene that appeared is listed whatever its volatility: drift leaves volatile facts out (a live host
# has its own host keys, shell histories and cloud-init state), but an image that gains them is what the
# image pack flags. Severities as rules/image.yaml gives them (tests/test_release_notes checks they agree).
APPEARED_SEVERITY = {"ssh_host_keys": "high", "shell_histories": "medium", "cloud_init_instances": "medium"}


def _shown_row(row: Mapping[str, Any], key: str) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(row.items()) if k != key and v is not None)


def hygiene_appeared(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[Difference]:
    """The volatile image-hygiene facts that appeared from `before` to `after` (two snapshots' `facts.hygiene`):
    a host key or history file at a path that had none, cloud-init state where there was none. What both
    carry (each live host's own keys, read as images) is no change; nothing when either side was not read."""
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return []
    specs = fact_tree().children["facts"].children["hygiene"].children
    out = []
    for name, severity in APPEARED_SEVERITY.items():
        key, old, new = specs[name].key, before.get(name), after.get(name)
        if key is None:  # a count
            if isinstance(new, int) and new > 0 and not old:
                out.append(Difference(f"facts.hygiene.{name}", "changed", old, new, severity))
            continue
        had = {str(r.get(key)) for r in old or () if isinstance(r, Mapping)}
        out.extend(Difference(f"facts.hygiene.{name}[{row.get(key)}]", "added", None, _shown_row(row, key), severity)
                   for row in new or () if isinstance(row, Mapping) and str(row.get(key)) not in had)
    return out


def release_notes(diffs: Iterable[Difference], source: str, target: str,
                  not_compared: Iterable[str] = ()) -> ReleaseNotesDoc:
    """The release notes document: sections ordered by their worst change (ties: SECTIONS order), changes
    in a section by severity then subject; `differences` counts the fact paths the changes (and the
    unknowns) hold, one per line of the text output. `not_compared`: areas left out as not applicable to a side."""
    entries: dict[tuple[str, str], _Entry] = {}
    unknown: list[ReleaseUnknownDoc] = []
    differences = 0
    for d in diffs:
        differences += 1
        if d.kind == "unknown":
            unknown.append({"area": d.path.removeprefix("facts."), "from": d.expected, "to": d.actual})
            continue
        area, subject = _area_and_subject(d)
        entries.setdefault((area, subject), _Entry(area, subject)).diffs.append(d)
    order = {a: i for i, (a, _) in enumerate(SECTIONS)}
    sections: list[ReleaseSectionDoc] = []
    for area, title in SECTIONS:
        changes = [_change(e) for (a, _), e in entries.items() if a == area]
        if not changes:
            continue
        changes.sort(key=lambda c: (-severity_rank(c["severity"]), c["subject"]))
        sections.append({"area": area, "title": title, "severity": changes[0]["severity"], "changes": changes})
    sections.sort(key=lambda s: (-severity_rank(s["severity"]), order[s["area"]]))
    counts: dict[str, int] = {}
    for s in sections:
        for c in s["changes"]:
            counts[c["severity"]] = counts.get(c["severity"], 0) + 1
    return {"schema": SCHEMA, "from": source, "to": target, "changes": sum(counts.values()),
            "differences": differences, "by_severity": counts, "sections": sections, "unknown": unknown,
            "not_compared": sorted(set(not_compared))}
