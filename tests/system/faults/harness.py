"""What every fault case shares: an inventory of the faulty host beside healthy fleet hosts, the real `scan`
CLI in its own process, and the checks (status and error text, healthy hosts intact, saved report valid
against its schema, history saved, nothing half-written, exit code as README documents)."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from auditor.models import severity_rank
from tests import reliability
from tests.fleet import Fleet
from tests.paths import ROOT
from tests.system.faults import FAULT_CASES

REPO = ROOT
SCHEMA = json.loads((REPO / "auditor/schemas/report.schema.json").read_text())
HEALTHY = ("golden", "a1")  # scanned beside every faulty host; never touched by a fault
FAULTY = "a3"  # the fleet host the host-side faults break (and restore)
# Generous: CLI start-up, judge and render, and 8 sessions sharing 2 cores. The cases measure; the bound
# only catches a scan that ignores its deadline (before the fixes: 2-8x the deadline).
MARGIN_S = 30.0
# Rules over kernel-wide counters that any process on this machine moves between two scans (dying
# memcgs are counted by the shared kernel; per-core CPU is the whole machine's): not a host's own result.
VOLATILE_RULES = re.compile(r"^(cgroups\.|cpu\.|trends\.)")


@dataclass
class Scan:
    """One finished `ami-auditor scan` run."""

    code: int
    report: dict[str, Any]
    history: list[dict[str, Any]]  # the scans the history store recorded (id, state, findings as rows)
    elapsed: float
    stdout: str
    stderr: str
    out: Path
    history_dir: Path

    def host(self, name: str) -> dict[str, Any]:
        return next(h for h in self.report["hosts"] if h["name"] == name)

    def finish_order(self) -> list[str]:
        """Host names in the order the CLI reported them done (its progress lines)."""
        return re.findall(r"^\[\d+/\d+\] (\S+): ", self.stderr, re.M)


def fleet_entry(fleet: Fleet, name: str, **ssh: Any) -> dict[str, Any]:
    """The fleet inventory's entry for `name`, with SSH options overridden."""
    base = yaml.safe_load(fleet.inventory_path.read_text())
    entry = dict(next(h for h in base["hosts"] if h["name"] == name))
    if ssh:
        entry["ssh"] = ssh
    return entry


def write_inventory(fleet: Fleet, path: Path, hosts: list[dict[str, Any]],
                    healthy: tuple[str, ...] = HEALTHY) -> Path:
    """An inventory of the healthy fleet hosts plus `hosts`, with the fleet's SSH defaults."""
    base = yaml.safe_load(fleet.inventory_path.read_text())
    doc = {"defaults": base["defaults"], "hosts": [fleet_entry(fleet, n) for n in healthy] + hosts}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def scan_argv(inventory: Path, tmp: Path, deadline: float, *extra: str) -> list[str]:
    return [sys.executable, "-m", "auditor.cli", "scan", "-i", str(inventory), "--deadline", f"{deadline:g}",
            "--format", "json", "--out", str(tmp / "out"), "--store", str(tmp / "history" / "store.sqlite3"), *extra]


def start_scan(inventory: Path, tmp: Path, deadline: float, *extra: str) -> tuple[subprocess.Popen[str], float]:
    """Start the real CLI (its own process, as a user runs it); returns it and its start time.

    Its stderr is a terminal (a pty), so it prints a progress line per host as each one finishes."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(scan_argv(inventory, tmp, deadline, *extra), cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:
        with contextlib.suppress(OSError):  # EIO once the CLI has exited
            while data := os.read(master, 65536):
                chunks.append(data)
        os.close(master)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc.stderr_chunks, proc.stderr_reader = chunks, reader  # type: ignore[attr-defined]
    return proc, time.monotonic()


def _stored_scans(path: Path) -> list[dict[str, Any]]:
    """Every scan the store holds, with its findings as (host, rule, item, waived) rows."""
    if not path.exists():
        return []
    with contextlib.closing(sqlite3.connect(path)) as conn:
        scans = [{"id": i, "state": st, "hosts": h} for i, st, h in conn.execute("SELECT id, state, hosts FROM scans")]
        for scan in scans:
            scan["findings"] = sorted(conn.execute("SELECT host, rule, item, waived FROM findings WHERE scan_id = ?",
                                                   (scan["id"],)))
    return scans


def finish_scan(proc: subprocess.Popen[str], started: float, tmp: Path, timeout: float = 600) -> Scan:
    stdout, _ = proc.communicate(timeout=timeout)
    elapsed = time.monotonic() - started
    proc.stderr_reader.join(10)  # type: ignore[attr-defined]
    stderr = b"".join(proc.stderr_chunks).decode("utf-8", "replace").replace("\r\n", "\n")  # type: ignore[attr-defined]
    print(f"scan exit {proc.returncode} in {elapsed:.1f} s\n{stdout}\n{stderr}")  # shown when a case fails
    report_path = tmp / "out" / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    history = _stored_scans(tmp / "history" / "store.sqlite3")
    return Scan(proc.returncode, report, history, elapsed, stdout, stderr, tmp / "out", tmp / "history")


def run_scan(inventory: Path, tmp: Path, deadline: float, *extra: str) -> Scan:
    proc, started = start_scan(inventory, tmp, deadline, *extra)
    return finish_scan(proc, started, tmp)


def expected_exit(report: dict[str, Any]) -> int:
    """README's table: 1 for findings (or drift) at or above --fail-on, else 3 when a host was not
    reached or only partly collected, else 0 (1 beats 3)."""
    bar = report.get("fail_on")
    failing = bar is not None and (
        any(not f["waived"] and severity_rank(f["severity"]) >= severity_rank(bar) for f in report["findings"])
        or any(severity_rank(d["severity"]) >= severity_rank(bar) for d in report["drift"]))
    if failing:
        return 1
    return 3 if any(h["status"] != "ok" or not h.get("complete", True) for h in report["hosts"]) else 0


@dataclass(frozen=True)
class HostView:
    """What a healthy host's result must keep in every scan: status, no errors, findings, headline facts."""

    status: str
    collector_errors: dict[str, str]
    findings: frozenset[tuple[str, str | None, str]]
    facts: tuple[tuple[str, Any], ...]


def host_view(report: dict[str, Any], name: str) -> HostView:
    host = next(h for h in report["hosts"] if h["name"] == name)
    findings = frozenset((f["rule"], f.get("item"), f["severity"]) for f in report["findings"]
                         if f["host"] == name and not VOLATILE_RULES.match(f["rule"]))
    # the kernel's dying memcgs and the CPU window are the whole machine's: they move between any two scans
    facts = tuple(sorted((k, repr(v)) for k, v in (host.get("facts_summary") or {}).items()
                         if k not in ("dying_memcgs", "cpu")))
    return HostView(host["status"], dict(host.get("collector_errors") or {}), findings, facts)


def check_scan(scan: Scan, case: str, deadline: float, faulty: dict[str, tuple[str, str]],
               clean: dict[str, HostView], names: list[str], margin: float = MARGIN_S) -> None:
    """The checks every fault case makes. `faulty`: host → (status, regex its error text must match);
    `clean`: views of the other hosts from a clean scan; `names`: every host of the inventory."""
    assert case in FAULT_CASES, case
    reported = {h["name"] for h in scan.report.get("hosts", [])}
    crashed = "Traceback" in scan.stderr or scan.code not in (0, 1, 2, 3)
    reliability.record("fault", case, crashed=crashed, lost=len(set(names) - reported))
    shown = ", ".join(f"{n} {scan.host(n)['status']} in {scan.host(n)['duration_s']:.1f} s"
                      for n in faulty if n in reported)
    print(f"[fault] {case}: scan exit {scan.code} in {scan.elapsed:.1f} s (bound {deadline:g} s + margin); {shown}")
    assert not crashed, f"exit {scan.code}:\n{scan.stderr[-3000:]}"
    assert scan.report, "no report.json written"
    jsonschema.validate(scan.report, SCHEMA)
    assert [h["name"] for h in scan.report["hosts"]] == names  # every host, inventory order, none lost

    # bounded by the deadline (a generous margin: measured, not a timing benchmark)
    assert scan.elapsed < deadline + margin, f"scan took {scan.elapsed:.1f} s with --deadline {deadline:g}"
    for name, (status, pattern) in faulty.items():
        host = scan.host(name)
        assert host["status"] == status, host
        assert re.search(pattern, (host["error"] or "") + " " + json.dumps(host["collector_errors"])), host
        assert host["duration_s"] < deadline + margin
    for name in set(names) - set(faulty):
        assert host_view(scan.report, name) == clean[name], name

    assert scan.code == expected_exit(scan.report), (scan.code, scan.report["summary"])
    assert scan.report["summary"]["exit_code"] == scan.code

    # history: this scan recorded once, complete, the same hosts and findings as the report
    assert len(scan.history) == 1, scan.history
    saved = scan.history[0]
    assert saved["state"] == "complete" and saved["hosts"] == len(scan.report["hosts"])
    assert saved["findings"] == sorted((f["host"], f["rule"], f["item"] or "", int(f["waived"]))
                                       for f in scan.report["findings"])
    leftovers = [p for d in (scan.out, scan.history_dir) for p in d.iterdir() if p.name.endswith(".tmp")]
    assert not leftovers, leftovers
