"""Benchmark: the SQLite history store over N scans x M hosts with realistic churn.

Hosts are made from the real fleet snapshots in tests/data/snapshots (golden, a1, b1): each host has
its own identity (hostname, machine id, boot id, instance id); every scan moves what really moves
between scans (uptime, restart counters of the crash-looping hosts, PIDs, per-core CPU samples, dying
memcgs), and configuration churns a little: per scan ~1% of hosts get a package upgrade and ~0.2% a
changed sysctl (a new stable body each), and ~0.5% of hosts reboot (new boot id, counters reset).
Findings per host follow the template (the AZ-b hosts carry the crash-loop findings).

Prints: write time per scan (record_scan: one transaction), store size, distinct stable bodies, bytes
per host-scan beside the snapshot JSON a folder of reports would keep, and the time to read every
host's previous snapshot back (what trend facts need). Asserts nothing.
    Also the `history report` query and page over the last 30 scans, and the per-host series a scan report
    carries (history.series), timed.
    python3 benchmarks/bench_store.py [--scans 100] [--hosts 1000] [--store PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditor.history import charts, query, record  # noqa: E402
from auditor.history.db import open_store  # noqa: E402
from auditor.history.feed import pending_of  # noqa: E402
from auditor.render import history_html  # noqa: E402

SNAPS = ROOT / "tests" / "data" / "snapshots"
REPORT = json.loads((ROOT / "tests" / "data" / "reports" / "fleet.json").read_text())


def templates() -> list[dict[str, Any]]:
    return [json.loads((SNAPS / f"fleet-{n}.json").read_text()) for n in ("golden", "a1", "b1")]


class Host:
    """One synthetic host: a template, its identity, and its own configuration changes so far."""

    def __init__(self, index: int, template: dict[str, Any], rng: random.Random):
        self.name = f"h{index:05d}"
        self.index = index
        self.template = template
        self.rng = rng
        self.boot = f"{rng.getrandbits(128):032x}"
        self.uptime = rng.uniform(3600, 10 * 86400)
        self.restarts = {u["name"]: (u.get("restarts") or 0) for u in template["facts"]["systemd"]["units"]}
        self.looping = {n for n, r in self.restarts.items() if r >= 3}
        self.dying = (template["facts"]["cgroups"]["memory"].get("dying") or 0)
        self.package_bumps = 0
        self.sysctl = None

    def step(self, hours: float) -> None:
        rng = self.rng
        self.uptime += hours * 3600
        if rng.random() < 0.005:  # reboot
            self.boot, self.uptime = f"{rng.getrandbits(128):032x}", rng.uniform(60, 600)
            self.restarts = dict.fromkeys(self.restarts, 0)
            self.dying = 0
        for name in self.looping:
            self.restarts[name] += rng.randint(100, 400)
        self.dying += rng.randint(0, 200) if self.looping else 0
        if rng.random() < 0.01:
            self.package_bumps += 1
        if rng.random() < 0.002:
            self.sysctl = str(rng.randint(1, 100))

    def snapshot(self, at: str) -> dict[str, Any]:
        """This scan's snapshot: unchanged subtrees shared with the template (the store never mutates them)."""
        t, rng = self.template, self.rng
        facts = dict(t["facts"])
        systemd = dict(facts["systemd"])
        systemd["units"] = [{**u, "restarts": self.restarts.get(u["name"], 0),
                             "n_restarts": self.restarts.get(u["name"]),
                             "main_pid": rng.randint(100, 4_000_000) if u.get("main_pid") else u.get("main_pid")}
                            for u in systemd["units"]]
        facts["systemd"] = systemd
        cgroups = dict(facts["cgroups"])
        cgroups["memory"] = {**cgroups["memory"], "dying": self.dying}
        facts["cgroups"] = cgroups
        cpu = dict(facts["cpu"])
        if isinstance(cpu.get("cores"), list):
            cpu["cores"] = [{**c, "system_pct": round(rng.uniform(0, 30), 1), "user_pct": round(rng.uniform(0, 60), 1)}
                            for c in cpu["cores"]]
        facts["cpu"] = cpu
        if self.package_bumps:
            packages = dict(facts["packages"])
            items = list(packages["items"])
            items[0] = {**items[0], "version": f"{items[0].get('version')}+bump{self.package_bumps}"}
            packages["items"] = items
            facts["packages"] = packages
        if self.sysctl is not None:
            kernel = dict(facts["kernel"])
            kernel["sysctls"] = {**(kernel.get("sysctls") or {}), "vm.swappiness": self.sysctl}
            facts["kernel"] = kernel
        host = {**t["host"], "hostname": self.name, "boot_id": self.boot, "uptime_s": round(self.uptime, 2),
                "machine_id": f"{self.index:032x}", "instance_id": f"i-{self.index:017x}"}
        return {**t, "name": self.name, "target": f"ssh://root@{self.name}", "collected_at": at, "host": host,
                "facts": facts}


def report_doc(hosts: list[Host], at: str, template_findings: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    findings = [{**f, "host": h.name} for h in hosts for f in template_findings.get(h.template["name"], [])]
    return {"generated_at": at, "summary": {"exit_code": 1},
            "hosts": [{"name": h.name, "status": "ok", "target": f"ssh://root@{h.name}", "labels": {}, "complete": True,
                       "duration_s": 1.0, "facts_summary": {
                           "dying_memcgs": h.dying, "restarts": sum(h.restarts.values()),
                           "unit_restarts": {u: n for u, n in h.restarts.items() if n}}} for h in hosts],
            "findings": findings, "drift": []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scans", type=int, default=100)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--store", default=None, help="store file (default: a temporary one, removed)")
    args = parser.parse_args()
    rng = random.Random(42)
    temps = templates()
    by_template: dict[str, list[dict[str, Any]]] = {}
    for f in REPORT["findings"]:
        by_template.setdefault(f["host"], []).append(f)
    hosts = [Host(i, temps[i % len(temps)], rng) for i in range(args.hosts)]
    tmp = tempfile.TemporaryDirectory()
    path = Path(args.store) if args.store else Path(tmp.name) / "history.sqlite3"
    conn = open_store(path)
    json_bytes = 0
    write_s: list[float] = []
    build_s = 0.0
    for n in range(args.scans):
        at = f"2026-12-{1 + n // 24:02d}T{n % 24:02d}:00:00Z"
        t0 = time.perf_counter()
        for h in hosts:
            h.step(1.0)
        snaps = {h.name: h.snapshot(at) for h in hosts}
        if n == 0:
            json_bytes = sum(len(json.dumps(s)) for s in snaps.values())
        doc = report_doc(hosts, at, by_template)
        build_s += time.perf_counter() - t0
        t1 = time.perf_counter()
        scan_id = record.begin_scan(conn, at)
        record.record_scan(conn, scan_id, doc, pending_of(snaps), at)
        write_s.append(time.perf_counter() - t1)
        if (n + 1) % 10 == 0:
            print(f"  scan {n + 1}/{args.scans}: last write {write_s[-1]:.2f} s", flush=True)
    t2 = time.perf_counter()
    previous = query.previous_snapshots(conn, [h.name for h in hosts], 10**9, path)
    read_s = time.perf_counter() - t2
    t3 = time.perf_counter()
    trends = charts.fleet_trends(conn, path, charts.DEFAULT_LAST, charts.DEFAULT_TOP)
    trends_s = time.perf_counter() - t3
    t4 = time.perf_counter()
    page = history_html.render(trends)
    page_s = time.perf_counter() - t4
    t5 = time.perf_counter()
    series = charts.host_series(conn, path, [h.name for h in hosts], 10**9)
    series_s = time.perf_counter() - t5
    bodies = conn.execute("SELECT count(*), sum(length(body)) FROM snapshots").fetchone()
    volatile = conn.execute("SELECT sum(length(volatile)) FROM scan_hosts").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    size = path.stat().st_size
    host_scans = args.scans * args.hosts
    print(f"store: {args.scans} scans x {args.hosts} hosts = {host_scans:,} host-scans "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"  write: total {sum(write_s):.1f} s, per scan median {sorted(write_s)[len(write_s) // 2]:.2f} s, "
          f"max {max(write_s):.2f} s, per host {sum(write_s) / host_scans * 1000:.2f} ms "
          f"(building the synthetic snapshots took {build_s:.1f} s, not counted)")
    print(f"  file: {size / 2**20:,.1f} MiB = {size / host_scans:,.0f} bytes per host-scan; "
          f"snapshot JSON of one scan {json_bytes / args.hosts / 1024:,.0f} KiB per host "
          f"-> {json_bytes * args.scans / 2**30:,.1f} GiB for all scans as JSON files")
    print(f"  stable bodies: {bodies[0]:,} distinct ({(bodies[1] or 0) / 2**20:,.1f} MiB compressed) for "
          f"{host_scans:,} host-scans; volatile parts {(volatile or 0) / 2**20:,.1f} MiB "
          f"({(volatile or 0) / host_scans:,.0f} bytes each)")
    print(f"  read back the previous snapshot of all {len(previous):,} hosts: {read_s:.2f} s")
    print(f"  history report over the last {len(trends['scans'])} scans: query {trends_s:.2f} s, HTML {page_s:.2f} s, "
          f"{len(page) / 1024:,.0f} KiB; a scan report's history.series for all hosts ({len(series['scans'])} "
          f"scans): {series_s:.2f} s, {len(json.dumps(series)) / args.hosts:,.0f} bytes per host")
    tmp.cleanup()


if __name__ == "__main__":
    main()
