"""Trend facts (pure): what changed on a host since its previous stored scan, published as `facts.trends`.

History only publishes facts (declared in collect/facts.yaml under `facts.trends`); rules/trends.yaml
judges them. Restart counters and dying memcgs count since boot: across a reboot (boot id changed) the
delta is the new count itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from ..facttypes import SystemdUnitsRow, Trends
from ..snapshotdoc import Snapshot

ACTIVE = "active"


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _units(snap: Snapshot) -> dict[str, SystemdUnitsRow]:
    units = ((snap.get("facts") or {}).get("systemd") or {}).get("units") or []
    return {name: u for u in units if isinstance(u, dict) and isinstance(name := u.get("name"), str)}


def _dying(snap: Snapshot) -> int | None:
    value = (((snap.get("facts") or {}).get("cgroups") or {}).get("memory") or {}).get("dying")
    return value if isinstance(value, int) else None


def _boot(snap: Snapshot) -> Any:
    return (snap.get("host") or {}).get("boot_id")


def _rate(delta: int | None, hours: float | None) -> float | None:
    if delta is None or not hours or hours <= 0:
        return None
    return round(delta / hours, 2)


def _delta(now: int | None, before: int | None, same_boot: bool) -> int | None:
    if now is None:
        return None
    if not same_boot:
        return now
    if before is None:
        return None
    return now - before if now >= before else now  # a counter that went down was reset


def empty(scans_seen: int = 1) -> dict[str, Any]:
    """Trend facts of a host with no earlier stored scan (or with the store off)."""
    return {"scans_seen": scans_seen, "previous_scan": None, "previous_at": None, "hours_since_previous": None,
            "same_boot": None, "units": [],
            "cgroups": {"dying_memcgs_previous": None, "dying_memcgs_delta": None, "dying_memcgs_per_hour": None}}


def derive(current: Snapshot, previous: Snapshot | None, previous_scan: int | None,
           scans_seen: int) -> dict[str, Any]:
    """`facts.trends` of one host: `scans_seen` counts this scan too."""
    if previous is None:
        return empty(scans_seen)
    hours: float | None = None
    try:
        hours = (parse_time(current["collected_at"]) - parse_time(previous["collected_at"])).total_seconds() / 3600
    except (KeyError, TypeError, ValueError):
        hours = None
    if hours is not None and hours <= 0:
        hours = None
    same_boot = _boot(current) is not None and _boot(current) == _boot(previous)
    before = _units(previous)
    units = []
    for name, unit in sorted(_units(current).items()):
        old = before.get(name)
        now_restarts = unit.get("restarts") if isinstance(unit.get("restarts"), int) else None
        old_restarts = old.get("restarts") if old and isinstance(old.get("restarts"), int) else None
        delta = _delta(now_restarts, old_restarts, same_boot) if old is not None or not same_boot else None
        active_now = unit.get("active_state") == ACTIVE
        active_before = old is not None and old.get("active_state") == ACTIVE
        units.append({
            "name": name, "restarts_previous": old_restarts, "restarts_now": now_restarts,
            "restarts_delta": delta, "restarts_per_hour": _rate(delta, hours),
            "active_previous": (old or {}).get("active_state"), "active_now": unit.get("active_state"),
            "active_both": active_now and active_before,
        })
    dying_now, dying_before = _dying(current), _dying(previous)
    dying_delta = None
    if dying_now is not None and dying_before is not None:
        dying_delta = max(dying_now - dying_before, 0) if same_boot else dying_now
    return {
        "scans_seen": scans_seen, "previous_scan": previous_scan, "previous_at": previous.get("collected_at"),
        "hours_since_previous": round(hours, 4) if hours is not None else None, "same_boot": same_boot,
        "units": units,
        "cgroups": {"dying_memcgs_previous": dying_before, "dying_memcgs_delta": dying_delta,
                    "dying_memcgs_per_hour": _rate(dying_delta, hours)},
    }


def attach(snapshot: Snapshot, trends: dict[str, Any]) -> None:
    """Publish trend facts into a snapshot (in place) before it is judged."""
    facts = snapshot.get("facts")
    if isinstance(facts, dict):
        facts["trends"] = cast(Trends, trends)  # derive/empty write what facts.yaml declares for trends
