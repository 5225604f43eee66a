"""Collect benchmark over the real test fleet: per-host wall time and probe CPU time on the host,
side by side with a one-round-trip-per-check peer (pytest-testinfra, when installed).

Run as root:  python3 -m benchmarks.bench_collect [--extra N] [--parallel N] [--rounds N] [--before REV]
(boots the fleet, or attaches to a running one with AMI_AUDITOR_FLEET_ATTACH=1).
Prints figures; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.collect.framing import new_nonce, with_nonce  # noqa: E402
from auditor.collect.probe import DEFAULT_BINARIES, probe_script  # noqa: E402
from auditor.run.live_hosts import collect_hosts  # noqa: E402
from auditor.targets.inventory import load_inventory  # noqa: E402
from auditor.transport.ssm_document import STDOUT_CAP  # noqa: E402
from tests.fleet import Fleet  # noqa: E402

# The checks a testinfra user writes for the same incident facts (one SSH round trip each, or more).
TESTINFRA_CHECKS = (
    lambda h: h.service("ecs.service").is_enabled,
    lambda h: h.service("ecs.service").is_running,
    lambda h: h.service("ssh.service").is_running,
    lambda h: h.file("/usr/local/bin/kubelet").sha256sum,
    lambda h: h.file("/var/log/cloud-init-output.log").content_string,
    lambda h: h.file("/proc/cgroups").content_string,
    lambda h: h.run("find /sys/fs/cgroup/memory -type d | wc -l").stdout,
    lambda h: h.sysctl("vm.swappiness"),
    lambda h: h.package("openssh-server").version,
    lambda h: h.file("/etc/ecs/ecs.config").content_string,
    lambda h: h.run("uname -r").stdout,
)


def bench_auditor(inventory: Path, parallel: int, rounds: int) -> None:
    specs = load_inventory(inventory)
    for r in range(rounds):
        started = time.monotonic()
        results = collect_hosts(specs, parallel=parallel)
        wall = time.monotonic() - started
        walls = [res.duration_s for res in results]
        cpus = [res.snapshot["probe"]["cpu_s"] for res in results if res.snapshot]
        print(f"ami-auditor round {r + 1}: {len(results)} hosts in {wall:.2f} s wall "
              f"(parallel {parallel}); per host wall median {statistics.median(walls):.2f} s, "
              f"max {max(walls):.2f} s; probe CPU on host median {statistics.median(cpus):.3f} s, "
              f"max {max(cpus):.3f} s; statuses {sorted({res.status for res in results})}")


def probe_figures(fleet: Fleet, host: str, script: str, runs: int = 3) -> tuple[float, int, int]:
    """Median wall seconds of the probe run inside `host`, its stdout bytes, and the characters SSM would
    keep inline for it (the document's gzip + base64 framing)."""
    walls, out = [], b""
    for _ in range(runs):
        started = time.monotonic()
        done = fleet.exec(host, ["sh", "-s", "--", *DEFAULT_BINARIES], timeout=120,
                          input=with_nonce(script, new_nonce()))
        walls.append(time.monotonic() - started)
        out = done.stdout.encode() if isinstance(done.stdout, str) else done.stdout
    return statistics.median(walls), len(out), len(base64.b64encode(gzip.compress(out)))


def bench_probe_size(fleet: Fleet, before_rev: str | None) -> None:
    """The probe's output and wall time on a fleet host, now and (with --before REV) at an earlier commit."""
    scripts = [("now", probe_script())]
    if before_rev:
        old = subprocess.run(["git", "show", f"{before_rev}:auditor/collect/probe.sh"], capture_output=True,
                             text=True, check=True, cwd=Path(__file__).resolve().parents[1]).stdout
        scripts.insert(0, (before_rev, old))
    for host in ("golden", "b1"):
        for label, script in scripts:
            wall, raw, inline = probe_figures(fleet, host, script)
            print(f"probe {label:<12} on {host:<6}: {wall:.2f} s wall (median of 3), {raw:,} bytes of stdout, "
                  f"{inline:,} characters gzip+base64 (SSM keeps {STDOUT_CAP:,} inline)")


def bench_testinfra(fleet: Fleet) -> None:
    try:
        import testinfra
    except ImportError:
        print("pytest-testinfra not installed: `pip install pytest-testinfra` to compare")
        return
    h = fleet.hosts[0]
    host = testinfra.get_host(f"paramiko://root@{h.address}",
                              ssh_identity_file=str(fleet.identity_file))
    started = time.monotonic()
    for check in TESTINFRA_CHECKS:
        check(host)
    wall = time.monotonic() - started
    print(f"testinfra (paramiko backend): {len(TESTINFRA_CHECKS)} checks on one host in {wall:.2f} s "
          f"(≥ {len(TESTINFRA_CHECKS)} round trips, a subset of what one ami-auditor probe collects)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--extra", type=int, default=0, help="extra fleet hosts beyond the 7 of the scenario")
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before", metavar="REV", help="also measure the probe of this git revision")
    args = parser.parse_args()
    with Fleet(extra=args.extra) as fleet:  # __enter__ boots it, __exit__ tears it down
        bench_probe_size(fleet, args.before)
        bench_auditor(fleet.inventory_path, args.parallel, args.rounds)
        bench_testinfra(fleet)


if __name__ == "__main__":
    main()
