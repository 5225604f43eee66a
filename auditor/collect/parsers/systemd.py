"""systemd: version, unit files, runtime state of units, restart counts (NRestarts or journal)."""

from __future__ import annotations

import re

from ...facttypes import Systemd, SystemdLimitsRow, SystemdUnitFilesRow, SystemdUnitsRow
from ..sections import UnparsableOutput, to_int

_VERSION = re.compile(r"^systemd (\d+)")


def parse_version(text: str) -> int | None:
    m = _VERSION.match(text.strip())
    # `systemd unknown`: the image reader found systemd's unit tree but no library naming its version
    if not m and text.strip() and text.strip() != "systemd unknown":
        raise UnparsableOutput(f"systemctl --version printed {text.strip()[:80]!r}, not `systemd N`")
    return int(m.group(1)) if m else None


_FOOTER = re.compile(r"^\d+ unit files? listed\.$")


def parse_unit_files(text: str) -> list[SystemdUnitFilesRow]:
    """`list-unit-files --no-legend`: 2 columns before systemd 245, 3 (with vendor preset) after.

    Should a legend be printed anyway, its header (`UNIT FILE  STATE  [VENDOR ]PRESET`) and footer
    (`N unit files listed.`) are no units."""
    rows: list[tuple[str, str, str | None]] = []
    for line in text.splitlines():
        cols = line.split()
        if len(cols) < 2 or cols[:2] == ["UNIT", "FILE"] or _FOOTER.match(" ".join(cols)) or "." not in cols[0]:
            continue
        preset = cols[2] if len(cols) > 2 and cols[2] != "-" else None
        rows.append((cols[0], cols[1], preset))
    if not rows and text.strip():  # every system has unit files: text with none is no listing
        raise UnparsableOutput("systemctl list-unit-files printed no unit file row")
    return [{"name": name, "state": state, "preset": preset}
            for name, state, preset in sorted(rows, key=lambda r: r[0])]


def parse_show(text: str) -> list[dict[str, str]]:
    """`systemctl show -p … u1 u2`: blank-line separated Key=value blocks."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        if "=" in line:
            key, value = line.split("=", 1)
            current[key] = value
    if current:
        blocks.append(current)
    units = [b for b in blocks if b.get("Id")]
    if not units and text.strip():
        raise UnparsableOutput("systemctl show printed no `Id=` block")
    return units


def parse_journal_restarts(text: str) -> dict[str, int]:
    """`UNIT COUNT` lines counted by the probe from PID 1's restart messages."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        count = to_int(parts[1]) if len(parts) == 2 and parts[1].isdigit() else None  # isdigit: `²` too
        if count is not None:
            out[parts[0]] = out.get(parts[0], 0) + count
    return out


def unit_health(active_state: str | None, sub_state: str | None, restarts: int) -> str | None:
    """A stable reading of a unit's runtime state, for baselines and comparison.

    ActiveState/SubState of a crash-looping unit flip between activating, active and failed within a
    second, so two scans of the same host disagree; `restarting` (waiting to restart now, or restarted
    this boot) stays put. Judging how many restarts are too many is the rules' job.
    """
    if active_state == "failed":
        return "failed"
    if sub_state == "auto-restart" or (restarts > 0 and active_state not in ("inactive", None)):
        return "restarting"
    return active_state


def _unit(block: dict[str, str], journal: dict[str, int],
          unit_files: dict[str, SystemdUnitFilesRow]) -> SystemdUnitsRow:
    name = block["Id"]
    n_restarts = to_int(block.get("NRestarts"))
    journal_restarts = journal.get(name)
    if n_restarts is not None:
        restarts, source = n_restarts, "NRestarts"
    elif journal_restarts is not None:
        restarts, source = journal_restarts, "journal"
    else:
        restarts, source = 0, "none"
    start_us = to_int(block.get("ExecMainStartTimestampMonotonic"))
    file_state = block.get("UnitFileState") or unit_files.get(name, {}).get("state")
    return {
        "name": name,
        "description": block.get("Description") or None,
        "load_state": block.get("LoadState") or None,
        "active_state": block.get("ActiveState") or None,
        "sub_state": block.get("SubState") or None,
        "result": block.get("Result") or None,
        "health": unit_health(block.get("ActiveState") or None, block.get("SubState") or None, restarts),
        "unit_file_state": file_state or None,
        "preset": block.get("UnitFilePreset") or unit_files.get(name, {}).get("preset"),
        "type": block.get("Type") or None,
        "restart_policy": block.get("Restart") or None,
        "restarts": restarts,
        "restarts_source": source,
        "n_restarts": n_restarts,
        "journal_restarts": journal_restarts,
        "main_pid": to_int(block.get("ExecMainPID")),
        "main_exit_status": to_int(block.get("ExecMainStatus")),
        "main_started_s": round(start_us / 1e6, 3) if start_us else None,
        "fragment_path": block.get("FragmentPath") or None,
    }


def _limit(value: str | None) -> tuple[int | None, bool]:
    """A systemd limit as (number, infinite): `infinity` (or 2^64-1) is infinite, no number."""
    if value is None or value == "":
        return None, False
    if value == "infinity" or value == "18446744073709551615":
        return None, True
    return to_int(value), False


def parse_limits(text: str) -> list[SystemdLimitsRow]:
    """`systemctl show -p Id,LoadState,LimitNOFILE,LimitNOFILESoft,TasksMax UNIT…` blocks → rows."""
    rows: list[SystemdLimitsRow] = []
    for block in parse_show(text):
        if not block.get("Id"):
            continue
        nofile, nofile_inf = _limit(block.get("LimitNOFILE"))
        tasks, tasks_inf = _limit(block.get("TasksMax"))
        rows.append({"name": block["Id"], "load_state": block.get("LoadState") or None, "limit_nofile": nofile,
                     "limit_nofile_infinite": nofile_inf, "limit_nofile_soft": _limit(block.get("LimitNOFILESoft"))[0],
                     "tasks_max": tasks, "tasks_max_infinite": tasks_inf})
    return sorted(rows, key=lambda r: r.get("name") or "")  # every row is named (its Id)


def parse_systemd(version_text: str, unit_files_text: str, show_text: str, journal_text: str,
                  limits_text: str = "") -> Systemd:
    unit_files = parse_unit_files(unit_files_text)
    by_name = {u.get("name") or "": u for u in unit_files}  # every row is named
    journal = parse_journal_restarts(journal_text)
    units = [_unit(b, journal, by_name) for b in parse_show(show_text)]
    units.sort(key=lambda u: u.get("name") or "")  # every unit is named (its Id)
    return {
        "version": parse_version(version_text),
        "unit_files": unit_files,
        "units": units,
        "enabled_units": sorted(u.get("name") or "" for u in unit_files if u.get("state") == "enabled"),
        "failed_units": sorted(u.get("name") or "" for u in units if u.get("active_state") == "failed"),
        "limits": parse_limits(limits_text),
    }
