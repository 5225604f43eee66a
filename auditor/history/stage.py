"""The history stage of `scan`: compare with the previous saved scan, then save this one.

`--history DIR` keeps one report per scan. Dying-memcg growth faster than `--dying-growth-per-hour`
since the previous scan becomes a finding (FIELD-NOTES §2: the leak is the signal, not only the level).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomicio import check_writable_dir
from ..errors import InputError
from ..models import Finding, Report
from ..options import HistoryOptions
from ..reportdoc import report_to_dict
from .store import latest_scan, save_scan
from .trends import parse_time

GROWTH_RULE = "history.dying-memcg-growth"


@dataclass(frozen=True)
class HistoryPlan:
    directory: Path | None
    previous: dict[str, Any] | None
    growth_per_hour: float


def prepare(opts: HistoryOptions) -> HistoryPlan:
    """Validate the threshold (finite, > 0) and the history directory (readable scans, writable)."""
    rate = opts.dying_growth_per_hour
    if not isinstance(rate, (int, float)) or not math.isfinite(rate) or rate <= 0:
        raise InputError(f"--dying-growth-per-hour must be a finite number greater than 0, not {rate!r}")
    directory = Path(opts.directory) if opts.directory else None
    previous = latest_scan(directory) if directory else None
    if directory is not None:
        check_writable_dir(directory, "--history")
    return HistoryPlan(directory, previous, rate)


def _dying(snapshot: dict[str, Any]) -> int | None:
    return (((snapshot.get("facts") or {}).get("cgroups") or {}).get("memory") or {}).get("dying")


def apply(plan: HistoryPlan, report: Report, snapshots: list[dict]) -> None:
    """Add a finding per host whose dying memcgs grow faster than the threshold."""
    if plan.previous is None:
        return
    hours = (parse_time(report.generated_at) - parse_time(plan.previous["generated_at"])).total_seconds() / 3600
    if hours <= 0:
        return
    before = {h["name"]: (h.get("facts_summary") or {}).get("dying_memcgs") for h in plan.previous["hosts"]}
    for snap in snapshots:
        old, new = before.get(snap["name"]), _dying(snap)
        if old is None or new is None:
            continue
        rate = (new - old) / hours
        if rate > plan.growth_per_hour:
            report.findings.append(Finding(
                host=snap["name"], rule=GROWTH_RULE, severity="high",
                title=f"Dying memory cgroups grow {rate:,.0f}/hour ({old:,} → {new:,} since the previous scan)",
                description="Something keeps creating and deleting memory cgroups whose page cache pins them "
                            "(a crash-looping unit or container); left alone they reach the 65,535 memcg ID "
                            "limit and make every memcg walk slow.",
                remediation="Find the unit or container that restarts (crash-loop findings, ecs-init.log) and "
                            "stop it; a reboot clears the dying memcgs.",
                evidence={"previous": old, "current": new, "hours": round(hours, 2),
                          "per_hour": round(rate, 1), "threshold_per_hour": plan.growth_per_hour},
                tags=("cgroups", "history"),
            ))
    report.rules.append({"id": GROWTH_RULE, "severity": "high",
                         "title": "Dying memory cgroups grow between scans", "pack": "history"})


def finish(plan: HistoryPlan, report: Report) -> Path | None:
    """Save this scan's report (after its exit code is known)."""
    if plan.directory is None:
        return None
    return save_scan(plan.directory, report_to_dict(report))
