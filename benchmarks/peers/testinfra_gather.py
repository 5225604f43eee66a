"""The peer: pytest-testinfra (paramiko backend) gathering the facts ami-auditor collects, the way a
testinfra user writes it (one module attribute per question), one thread per host.

    python3 benchmarks/peers/testinfra_gather.py HOSTS.json

HOSTS.json: {"identity": PATH, "known_hosts": PATH, "binaries": [...], "hosts": [[name, addr, port], ...]}.
Prints one JSON line per host: {"host", "facts": N values gathered, "error"}.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import testinfra

SYSCTLS = (
    "kernel.pid_max", "kernel.threads-max", "kernel.panic", "kernel.numa_balancing", "vm.swappiness",
    "vm.max_map_count", "vm.overcommit_memory", "vm.min_free_kbytes", "vm.dirty_ratio", "vm.dirty_background_ratio",
    "vm.zone_reclaim_mode", "net.core.somaxconn", "net.core.netdev_max_backlog", "net.core.rmem_max",
    "net.core.wmem_max", "net.ipv4.ip_forward", "net.ipv4.tcp_keepalive_time", "net.ipv4.ip_local_port_range",
    "net.netfilter.nf_conntrack_max", "net.bridge.bridge-nf-call-iptables", "fs.file-max",
    "fs.inotify.max_user_watches", "fs.inotify.max_user_instances",
)
FILES = ("/etc/os-release", "/proc/cmdline", "/sys/kernel/mm/transparent_hugepage/enabled",
         "/sys/kernel/mm/transparent_hugepage/defrag", "/proc/meminfo", "/proc/sys/kernel/hostname",
         "/proc/sys/kernel/random/boot_id", "/proc/uptime", "/etc/machine-id", "/proc/cgroups",
         "/etc/eks/release", "/etc/ecs/ecs.config", "/sys/module/ena/version", "/proc/cpuinfo")
CGROUP_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct", "blkio", "devices", "freezer", "cpuset")
KERNEL_LOG = ("journalctl -k -b -q --no-pager -o short-monotonic | grep -E 'TX q [0-9]* is paused|"
              "Keep alive watchdog timeout|Trigger reset is on|Device reset completed|NETDEV WATCHDOG|"
              "Out of memory: Killed|soft lockup|hung_task' | tail -n 200")


def gather(host: Any, binaries: list[str]) -> dict[str, Any]:
    """Every fact area ami-auditor collects that testinfra can express, one attribute at a time."""
    f: dict[str, Any] = {}
    stat_a = host.file("/proc/stat").content_string  # per-core CPU: two samples ≥ 1 s apart, like the probe
    t0 = time.monotonic()
    for path in FILES:
        f[path] = host.file(path).content_string if host.file(path).exists else None
    f["uname"] = [host.run(f"uname {o}").stdout for o in ("-r", "-v", "-m")]
    for key in SYSCTLS:
        try:
            f[key] = host.sysctl(key)
        except (RuntimeError, AssertionError):
            f[key] = None
    f["systemd_version"] = host.run("systemctl --version").stdout
    f["unit_files"] = host.run("systemctl list-unit-files --no-legend --no-pager").stdout.splitlines()
    loaded = host.run("systemctl list-units --all --no-legend --no-pager --plain "
                      "--type=service,socket,timer,mount,path").stdout.split("\n")
    names = {line.split()[0] for line in loaded if line.strip()}
    names |= {line.split()[0] for line in f["unit_files"] if line.split()[1:2] == ["enabled"]}
    # ActiveState, SubState, NRestarts, ... per unit; testinfra cannot ask for `-.mount` (no `--`)
    for name in sorted(n for n in names if "@." not in n and not n.startswith("-")):
        f[f"unit:{name}"] = host.service(name).systemd_properties
    f["restart_journal"] = host.run("journalctl -b -q --no-pager -o cat _PID=1 | "
                                    "grep -E 'Scheduled restart job|holdoff time over'").stdout
    for c in CGROUP_CONTROLLERS:
        if host.file(f"/sys/fs/cgroup/{c}/tasks").exists:
            f[f"live_cgroups:{c}"] = host.run(f"find /sys/fs/cgroup/{c}/ -type d | wc -l").stdout
    for name in binaries:
        path = host.find_command(name, extrapaths=("/usr/local/bin", "/usr/libexec", "/opt/bin")) \
            if host.exists(name) or host.file(f"/usr/local/bin/{name}").exists else None
        if path is None:
            f[f"bin:{name}"] = None
            continue
        b = host.file(path)
        f[f"bin:{name}"] = {"sha256": b.sha256sum, "size": b.size, "mtime": b.mtime, "mode": b.mode,
                            "user": b.user, "realpath": b.linked_to if b.is_symlink else path}
        owner = host.run(f"dpkg-query -S {path}")
        if owner.rc == 0:
            pkg = owner.stdout.split(":")[0]
            f[f"bin:{name}"]["package"] = (pkg, host.package(pkg).version)
        f[f"bin:{name}:urls"] = host.run(f"grep -ohE 'https?://[^ ]*/{name}' /var/log/cloud-init-output.log "
                                         "/var/lib/cloud/instance/user-data.txt").stdout
    for iface in host.interface.names():
        if iface == "lo":
            continue
        f[f"net:{iface}"] = {"operstate": host.file(f"/sys/class/net/{iface}/operstate").content_string,
                             "mtu": host.file(f"/sys/class/net/{iface}/mtu").content_string,
                             "driver": host.run(f"readlink /sys/class/net/{iface}/device/driver/module").stdout}
        if f[f"net:{iface}"]["driver"]:
            f[f"net:{iface}:ethtool"] = host.run(f"ethtool -S {iface}").stdout
    f["kernel_log"] = host.run(KERNEL_LOG).stdout
    f["packages"] = host.run("dpkg-query -W -f='${Package}\\t${Version}\\t${Architecture}\\n'").stdout
    time.sleep(max(0.0, 1.05 - (time.monotonic() - t0)))
    f["cpu"] = (stat_a, host.file("/proc/stat").content_string)
    return f


def main() -> int:
    warnings.simplefilter("ignore")  # testinfra's paramiko backend warns about every host key it does not check
    cfg = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    out: dict[str, dict[str, Any]] = {}

    def one(name: str, addr: str, port: int) -> None:
        try:
            host = testinfra.get_host(f"paramiko://root@{addr}:{port}", ssh_identity_file=cfg["identity"],
                                      ssh_config=cfg.get("ssh_config"))
            facts = gather(host, cfg["binaries"])
            out[name] = {"host": name, "facts": len(facts), "error": None}
        except Exception as exc:  # noqa: BLE001 - report, don't hide, a host that failed
            out[name] = {"host": name, "facts": 0, "error": f"{type(exc).__name__}: {exc}"}

    threads = [threading.Thread(target=one, args=tuple(h)) for h in cfg["hosts"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in sorted(out):
        print(json.dumps(out[name]))
    return 0 if all(v["error"] is None for v in out.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
