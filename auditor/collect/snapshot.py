"""Turn one probe run into a versioned snapshot document (pure)."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import cast

from .. import SNAPSHOT_SCHEMA
from ..models import CommandResult, HostSpec
from ..snapshotdoc import Facts, HostInfo, Snapshot
from ..textsafe import clip
from .collectors import COLLECTORS, run_collector
from .parsers.confinement import confinement_error
from .parsers.identity import imds_instance_id, parse_host
from .schema import MAX_HOST_TEXT, MAX_LABEL_VALUE, MAX_REASON
from .sections import MARKER_PREFIX, Section, split_sections

_NONE = Section("", "", None)
HOST_LABEL_FACTS = ("az", "az_id", "ami_id", "instance_type", "region")
NO_NONCE = "no section carried this run's nonce"
PROBE_REFUSED = "the host did not run the probe"  # errors.probe's start: the host status `probe_refused`
_WORDS_LINES = 3  # a refusing host's own words: its first lines (stdout, then stderr), each clipped
_WORDS_WIDTH = 200
_TIMES = re.compile(r"(?<![\d.])(\d{1,9})m(\d{1,9}(?:\.\d{1,9})?)s")  # bounded: `0m..s` or 5,000 digits are no time


def probe_cpu_seconds(text: str) -> float | None:
    """Sum of the `times` builtin's output (shell and children, user and system): the probe's CPU cost."""
    values = [int(m) * 60 + float(s) for m, s in _TIMES.findall(text)]
    return round(sum(values), 3) if values else None


def now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def untrusted(snapshot: Snapshot) -> str | None:
    """Why no fact of this snapshot can be believed (its sections all carried another run's nonce, or it
    is another instance's output), else None: the caller makes that the host's error, never a host whose
    every area is just missing or a sibling's facts under this host's name."""
    why = snapshot["errors"].get("probe", "")
    return why if why.startswith(NO_NONCE) else snapshot["errors"].get("identity")


def refused(snapshot: Snapshot) -> str | None:
    """Why the host ran no probe at all, in its own words (a forced command, a nologin shell, sudo's
    requiretty, an SFTP-only key, no sudo on PATH, a .bashrc that ate the script), else None: the caller
    makes it the host's status `probe_refused`, never a host `ok` with every area missing."""
    why = snapshot["errors"].get("probe", "")
    return why if why.startswith(PROBE_REFUSED) else None


def _host_words(result: CommandResult) -> str:
    lines = [ln.strip() for ln in (result.stdout + "\n" + result.stderr).splitlines() if ln.strip()]
    return " | ".join(clip(ln, _WORDS_WIDTH) for ln in lines[:_WORDS_LINES])


def _refusal(result: CommandResult) -> str | None:
    """The probe never started: it exited (no deadline, no cut) before printing a single marker."""
    if result.truncated or MARKER_PREFIX in result.stdout:
        return None
    words = _host_words(result)
    return (f"{PROBE_REFUSED} (exit status {result.exit_status}); "
            + (f"it said: {words}" if words else "it printed nothing"))


def _trust_errors(result: CommandResult, sections: dict[str, Section], done: bool,
                  instance_id: str | None) -> dict[str, str]:
    """Errors about the output as a whole: refused, unfinished, forged or replayed framing, another
    instance's."""
    errors: dict[str, str] = {}
    if not sections and not done and (why := _refusal(result)):
        errors["probe"] = why
    elif not sections and not done and MARKER_PREFIX + "SECTION " in result.stdout:  # framed, by another nonce
        errors["probe"] = (f"{NO_NONCE}: output replayed or forged (not trusted); probe exited with status "
                           f"{result.exit_status}")
    elif not done:
        why = "output truncated" if result.truncated else f"probe exited with status {result.exit_status}"
        errors["probe"] = f"probe did not finish ({why}); stderr: {result.stderr.strip()[-300:]}"
    tampered = sorted(name for name, section in sections.items() if section.problem)
    if tampered:
        errors["framing"] = "sections repeated (output tampered with, not trusted): " + ", ".join(tampered)
    reported = imds_instance_id(sections) if instance_id else None
    if reported and reported != instance_id:
        errors["identity"] = (f"output is not this instance's: the probe reports instance id {reported[:40]!r} "
                              f"(IMDS) but was read for {instance_id}; not trusted")
    return errors


def build_snapshot(spec: HostSpec, result: CommandResult, nonce: str,
                   collected_at: str | None = None, instance_id: str | None = None) -> Snapshot:
    """Parse every area; a failed area becomes `errors[area]` and `facts[area] = None` (the other rows' facts
    when only some rows failed, such as one binary left unhashed); an area that does
    not apply to the target (runtime facts of an image) is `not_applicable[area]` (why) and `facts[area] = None`.

    `nonce` is the one this run handed the probe (collect/framing.py): only its markers count.
    `instance_id`: the instance the output was read for (ssm://); an IMDS answer naming another is
    `errors.identity` (see `untrusted`)."""
    sections, done = split_sections(result.stdout, nonce)
    errors = _trust_errors(result, sections, done, instance_id)
    if confined := confinement_error(sections):  # image:// only: links out of the root, refused reads
        errors["image"] = confined
    facts: dict[str, object] = {}  # area → its parser's facttypes value (or None)
    failed: list[str] = []
    not_applicable: dict[str, str] = {}
    for area, collector in COLLECTORS.items():
        got = run_collector(collector, sections)
        facts[area] = got.value
        if got.not_applicable:  # an answer, not an error: rules skip it, diff and drift leave it out
            not_applicable[area] = got.error or "not applicable"
        elif got.error:
            errors[area] = got.error
        if got.failed:
            failed.append(area)
    host = {k: clip(v, MAX_HOST_TEXT) if isinstance(v, str) else v for k, v in parse_host(sections).items()}
    errors = {area: clip(why, MAX_REASON) for area, why in errors.items()}
    not_applicable = {area: clip(why, MAX_REASON) for area, why in not_applicable.items()}
    labels = {k: str(host[k]) for k in HOST_LABEL_FACTS if host.get(k)}
    labels.update({k: clip(v, MAX_LABEL_VALUE) for k, v in result.labels.items()})  # from the transport
    # (ami://: the image's id, name, creation date: what the API says, bounded as the schema bounds it)
    labels.update(spec.labels)
    return {
        "schema": SNAPSHOT_SCHEMA,
        "name": spec.name,
        "target": spec.target,
        "labels": labels,
        "collected_at": collected_at or now_iso(),
        "probe": {
            "duration_s": round(result.duration_s, 3),
            "cpu_s": probe_cpu_seconds(sections["cost"].body) if sections.get("cost", _NONE).complete else None,
            "exit_status": result.exit_status,
            "complete": done,
            "truncated": result.truncated,
            "stdout_bytes": len(result.stdout),
            "failed_areas": failed,  # collection went wrong there (not: the host lacks the facility)
        },
        "host": cast(HostInfo, host),  # the parsers write what facts.yaml declares (tests/unit/test_snapshot_types.py)
        "facts": cast(Facts, facts),
        "errors": errors,
        "not_applicable": not_applicable,
    }
