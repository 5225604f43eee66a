"""Terminal lines of a collection run: progress on stderr, one summary line per host (coloured status)."""

from __future__ import annotations

from collections.abc import Callable

from .. import textsafe
from ..context import Env
from ..models import HostResult
from .view import NOTES, denied_facts, unavailable


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
    """The facts part of an ok host's line."""
    snap = result.snapshot or {}
    facts = snap["facts"]
    os_name = (facts.get("os") or {}).get("pretty_name") or "?"
    kernel = (facts.get("kernel") or {}).get("release") or "?"
    systemd = facts.get("systemd") or {}
    units = systemd.get("units") or []
    looping = [str(u.get("name")) for u in units if (u.get("restarts") or 0) > 0]
    dying = ((facts.get("cgroups") or {}).get("memory") or {}).get("dying")
    bits = [os_name, f"kernel {kernel}", f"{len(systemd.get('enabled_units') or [])} enabled units"]
    if looping:
        bits.append("restarting: " + ",".join(looping[:3]))
    bits.append(f"dying memcgs {dying if dying is not None else '?'}")
    errors = snap.get("errors") or {}
    answers = unavailable(errors, (snap.get("probe") or {}).get("failed_areas"))
    notes = NOTES if result.complete else frozenset()
    if failures := sorted(set(errors) - set(answers) - notes):
        bits.append("errors: " + ",".join(failures))
    if shown := sorted(notes & set(errors)):  # links read as chroot would, on a complete host
        bits.append("notes: " + ",".join(shown))
    if denied := denied_facts(errors):  # said once here, not once per rule that reads them
        bits.append(f"permission denied, so unknown: {','.join(denied)} (root would read them)")
    if answers:  # a facility the host lacks (no systemd): an answer, as in the exit code, JUnit and Prometheus
        bits.append("not available: " + ",".join(sorted(answers)))
    if snap.get("not_applicable"):
        bits.append("n/a: " + ",".join(sorted(snap["not_applicable"])))
    return textsafe.one_line("; ".join(bits))
