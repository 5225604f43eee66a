"""Terminal lines of a collection run: progress on stderr, one summary line per host (coloured status)."""

from __future__ import annotations

from collections.abc import Callable

from .. import textsafe
from ..context import Env
from ..models import HostResult
from ..notread import NOTES, denied_facts, not_read, not_read_words


def progress_printer(env: Env) -> Callable[[HostResult, int, int], None] | None:
    """A progress callback that writes to stderr only when it is a terminal."""
    if not env.progress:
        return None

    def show(result: HostResult, done: int, total: int) -> None:
        env.err(f"[{done}/{total}] {result.name}: {result.status}")

    return show


def one_line(result: HostResult) -> str:
    """`name  status  1.2s  facts…` — the per-host summary line (host text's control characters escaped)."""
    return "".join(text for text, _ in host_line(result))


def host_line(result: HostResult) -> list[tuple[str, str | None]]:
    """one_line() in (text, style) pieces, the status styled by its name (Env.out_styled colours it)."""
    name = textsafe.one_line(f"{result.name:<20} ")
    status = f"{result.status:<18}"
    if result.status != "ok" or not result.snapshot:
        rest = textsafe.one_line(f" {result.duration_s:5.1f}s  {result.error or ''}")
        return [(name, None), (status, result.status), (rest, None)]
    return [(name, None), (status, "ok"), (textsafe.one_line(f" {result.duration_s:5.1f}s  ") + _facts(result), None)]


def _facts(result: HostResult) -> str:
    """The facts part of an ok host's line. What was not read is named by area in one word each (notread),
    never shown as a value: no "0 enabled units" when systemd was not read, no "?"."""
    snap = result.whole or {}
    facts = snap["facts"]
    os_name = (facts.get("os") or {}).get("pretty_name")
    kernel = (facts.get("kernel") or {}).get("release")
    bits = ([str(os_name)] if os_name else []) + ([f"kernel {kernel}"] if kernel else [])
    systemd = facts.get("systemd")
    if systemd is not None:
        units = systemd.get("units") or []
        bits.append(f"{len(systemd.get('enabled_units') or [])} enabled units")
        if looping := [str(u.get("name")) for u in units if (u.get("restarts") or 0) > 0]:
            bits.append("restarting: " + ",".join(looping[:3]))
    if (dying := ((facts.get("cgroups") or {}).get("memory") or {}).get("dying")) is not None:
        bits.append(f"dying memcgs {dying}")
    errors = snap.get("errors") or {}
    notes = NOTES & set(errors) if result.complete else frozenset()  # links read as chroot would
    missing = not_read({k: v for k, v in errors.items() if k not in notes},
                       (snap.get("probe") or {}).get("failed_areas"), snap.get("not_applicable"))
    bits.extend(f"{word}: {','.join(areas)}" for word, areas in not_read_words(missing))
    if notes:
        bits.append("notes: " + ",".join(sorted(notes)))
    if denied := denied_facts(errors):  # said once here, not once per rule that reads them
        bits.append(f"permission denied, so unknown: {','.join(denied)} (root would read them)")
    return textsafe.one_line("; ".join(bits))
