"""The kres, time and disk packs: kernel resources, time keeping, disks.

Three kinds of proof (issue 34):
- real public captures (tests/data/real/kernel_log, proc_chronyc, proc_clocksource) fed through the
  probe's filters and the parsers, then the rules, for what only a host kernel has (kernel log, clock);
- image roots laid out like an unbooted AMI, for the static triggers (time sync units, declared inotify);
- one fleet host (b3), every trigger laid down at once the way a real host has it → one collect over SSH →
  every rule fires; every fix → one collect → none fires; the host restored exactly. Values the
  containers share with this machine's kernel (file handles, keyring quota, clock sync, clocksource) are
  read here and the expectation follows them.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.judge.engine import Judge
from auditor.judge.params import parse_set
from auditor.judge.rules import load_rules
from auditor.models import HostSpec
from auditor.run.live_hosts import collect_host
from tests.fleet.fleet import Fleet, combined_inventory
from tests.unit.test_image_transport import make_root
from tests.unit.test_parsers_real import REAL, facts_of

PACKS = ("kres.", "time.", "disk.")
ZOMBIE_UNIT = "zombie-maker.service"
# The children must outlive the exec: dash reaps background jobs that end while its loop still runs (`sh -c :&`
# left 29 zombies of 600), so each sleeps a little and exits under `sleep infinity`, which never waits.
ZOMBIE_EXEC = "/bin/sh -c 'i=0; while [ $i -lt 600 ]; do sleep 3 & i=$((i+1)); done; exec sleep infinity'"
TIMESYNCD = "systemd-timesyncd.service"
CHRONY = "chrony.service"  # the fleet's minbase root has no timesyncd binary: the fix is a chrony unit


def findings(snap: dict[str, Any], *sets: str) -> dict[str, list[Any]]:
    """This module's packs' findings by rule (not-evaluated ones left out: they are no finding)."""
    rules = load_rules(builtin=True, overrides=[parse_set(s) for s in sets])
    out: dict[str, list[Any]] = {}
    for f in Judge(rules).judge(snap):
        if f.rule.startswith(PACKS) and f.evidence.get("status") not in ("unknown", "error"):
            out.setdefault(f.rule, []).append(f)
    return out


def snapshot(**facts: Any) -> dict[str, Any]:
    host = facts.pop("host", {"uptime_s": 3600.0, "instance_id": "i-0123456789abcdef0"})
    return {"schema": "ami-auditor/snapshot/1", "name": "capture", "target": "capture", "host": host,
            "labels": {}, "errors": {}, "not_applicable": {}, "facts": facts}


def quiet(kernel_log: dict[str, Any]) -> dict[str, Any]:
    """A host whose only trouble is `kernel_log` (a real capture): plenty of pids and file handles."""
    return snapshot(proc={"threads": 200, "processes": 150, "zombies": 0, "zombie_parents": []},
                    cpu={"count": 2}, kernel={"sysctls": {"kernel.pid_max": "4194304"},
                                                          "sysctl_counters": {"fs.file-nr": "1024 0 2000000"}},
                    network={"kernel_log": kernel_log})


# --- this machine's kernel: the fleet's containers share it -------------------------------------------

def _read(path: str) -> str:
    return Path(path).read_text().strip()


def uptime_s() -> float:
    return float(_read("/proc/uptime").split()[0])


def file_handles_ratio() -> float:
    allocated, _, maximum = _read("/proc/sys/fs/file-nr").split()
    return int(allocated) / int(maximum)


def keyring_quota_low() -> bool:
    return int(_read("/proc/sys/kernel/keys/maxkeys")) <= 200 or int(_read("/proc/sys/kernel/keys/maxbytes")) <= 20000


def slow_clocksource() -> bool:
    base = "/sys/devices/system/clocksource/clocksource0/"
    return (_read(base + "current_clocksource") in ("xen", "hpet", "acpi_pm")
            and "tsc" in _read(base + "available_clocksource").split())


def inotify_low() -> bool:
    return (int(_read("/proc/sys/fs/inotify/max_user_instances")) < 8192
            or int(_read("/proc/sys/fs/inotify/max_user_watches")) < 524288)


# --- real captures -------------------------------------------------------------------------------------

def test_fork_rejected_by_the_pids_controller_makes_pid_headroom_fire() -> None:
    log = facts_of(REAL / "kernel_log/pids-fork-rejected-sles12-icinga2.txt")
    [found] = findings(quiet(log))["kres.pid-headroom"]
    assert found.evidence["forks_rejected"] == 10 and len(found.evidence["kernel_log"]) == 10
    assert "/system.slice/icinga2.service" in found.evidence["kernel_log"][0]
    assert "10 fork(s) rejected by the pids controller" in found.title
    other = facts_of(REAL / "kernel_log/xfs-shutdown-dm4.txt")
    assert "kres.pid-headroom" not in findings(quiet(other))


def test_file_max_reached_in_the_kernel_log_makes_file_handles_fire() -> None:
    for name in ("vfs-file-max-kernel42-rc2", "vfs-file-max-slackware-2.4"):
        [found] = findings(quiet(facts_of(REAL / f"kernel_log/{name}.txt")))["kres.file-handles-near-max"]
        assert found.evidence["limit_reached"] == 1 and "file-max limit" in found.evidence["kernel_log"][0]
    assert "kres.file-handles-near-max" not in findings(quiet(facts_of(REAL / "kernel_log/xfs-shutdown-dm4.txt")))


def test_file_nr_ratio_on_this_machines_real_value() -> None:
    """fs.file-nr is global: no capture near the limit was found, so the branch is shown on the live value
    with the threshold moved below and above it."""
    nr = _read("/proc/sys/fs/file-nr")
    snap = quiet({"events": {}, "lines": []})
    snap["facts"]["kernel"]["sysctl_counters"]["fs.file-nr"] = nr
    ratio = file_handles_ratio()
    [found] = findings(snap, f"kres.file_handles_ratio={ratio / 2}")["kres.file-handles-near-max"]
    assert found.evidence["allocated"] == nr.split()[0] and found.evidence["file_max"] == nr.split()[2]
    assert "kres.file-handles-near-max" not in findings(snap, f"kres.file_handles_ratio={min(ratio * 2, 1.0) + 1e-9}")


def test_ext4_errors_read_only_remounts_and_xfs_shutdowns_are_fs_errors() -> None:
    [ext4] = findings(quiet(facts_of(REAL / "kernel_log/ext4-error-remount-ro-coreos-xen.txt"))).get("disk.fs-errors")
    assert ext4.evidence["ext4_error"] == 1 and ext4.evidence["fs_remounted_read_only"] == 1
    assert any("xvda9" in line for line in ext4.evidence["kernel_log"])
    [xfs] = findings(quiet(facts_of(REAL / "kernel_log/xfs-shutdown-dm4.txt"))).get("disk.fs-errors")
    assert xfs.evidence["xfs_shutdown"] == 1 and "Shutting down filesystem" in xfs.evidence["kernel_log"][0]
    oom = facts_of(REAL / "kernel_log/oom-memcg-kill-process-centos7.txt")
    assert "disk.fs-errors" not in findings(quiet(oom))


@pytest.mark.parametrize("name", sorted(p.stem for p in (REAL / "proc_chronyc").glob("*.txt")))
def test_chronyc_captures_judge_the_clock_after_the_grace_period(name: str) -> None:
    proc = facts_of(REAL / "proc_chronyc" / f"{name}.txt")
    late = findings(snapshot(proc=proc, host={"uptime_s": 1800.0}))
    assert ("time.not-synchronized" in late) == (proc["ntp_synchronized"] is False)
    assert "time.not-synchronized" not in findings(snapshot(proc=proc, host={"uptime_s": 300.0}))
    if proc["ntp_synchronized"] is False:
        assert "30 minutes after boot" in late["time.not-synchronized"][0].title


def test_xen_clocksource_with_tsc_available_is_slow_on_ec2_only() -> None:
    xen = facts_of(REAL / "proc_clocksource/ec2-xen-clocksource-xen.txt")
    [found] = findings(snapshot(proc=xen))["time.slow-clocksource"]
    assert found.evidence["clocksource"] == "xen" and "tsc" in found.evidence["available"]
    off_ec2 = {"uptime_s": 3600.0}
    assert "time.slow-clocksource" not in findings(snapshot(proc=xen, host=off_ec2))
    assert "time.slow-clocksource" in findings(snapshot(proc=xen, host=off_ec2), "time.assume_ec2=true")
    jiffies = facts_of(REAL / "proc_clocksource/coreos-baremetal-refined-jiffies.txt")
    assert "time.slow-clocksource" not in findings(snapshot(proc=jiffies), "time.assume_ec2=true")


def test_keyring_quota_needs_a_container_runtime_and_reads_the_live_quota() -> None:
    sysctls = {k: _read(f"/proc/sys/kernel/keys/{k.rsplit('.', 1)[1]}")
               for k in ("kernel.keys.maxkeys", "kernel.keys.maxbytes")}
    runtime = [{"name": "containerd", "found": True, "path": "/usr/bin/containerd"}]
    got = findings(snapshot(kernel={"sysctls": sysctls}, binaries=runtime))
    assert ("kres.keyring-quota-low" in got) == keyring_quota_low()
    assert "kres.keyring-quota-low" not in findings(snapshot(kernel={"sysctls": sysctls}, binaries=[]))
    low = {"kernel.keys.maxkeys": "200", "kernel.keys.maxbytes": "20000"}  # the values runc#726 hit
    [found] = findings(snapshot(kernel={"sysctls": low}, binaries=runtime))["kres.keyring-quota-low"]
    assert found.evidence["runtimes"] == ["/usr/bin/containerd"]


# --- image roots ---------------------------------------------------------------------------------------

def image(root: Path) -> dict[str, Any]:
    result = collect_host(HostSpec(root.name, f"image://{root}"), binaries=["kubelet", "containerd"])
    assert result.status == "ok", result.error
    return result.snapshot


def timesyncd(root: Path, state: str) -> None:
    """Debian's timesyncd unit, and its state as `systemctl enable` / `mask` leave it."""
    unit = root / "usr/lib/systemd/system" / TIMESYNCD
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text("[Unit]\nDescription=Network Time Synchronization\nConditionVirtualization=!container\n"
                    "[Service]\nExecStart=/lib/systemd/systemd-timesyncd\n[Install]\nWantedBy=sysinit.target\n")
    if state == "enabled":
        wants = root / "etc/systemd/system/sysinit.target.wants"
        wants.mkdir(parents=True, exist_ok=True)
        os.symlink(f"/usr/lib/systemd/system/{TIMESYNCD}", wants / TIMESYNCD)
    elif state == "masked":
        os.symlink("/dev/null", root / "etc/systemd/system" / TIMESYNCD)


def test_image_without_an_enabled_sync_daemon_fires_and_enabling_one_passes(tmp_path: Path) -> None:
    masked = make_root(tmp_path / "masked")
    timesyncd(masked, "masked")
    [found] = findings(image(masked))["time.no-sync-daemon"]
    assert {"name": TIMESYNCD, "state": "masked"}.items() <= found.evidence["sync_units"][0].items()
    enabled = make_root(tmp_path / "enabled")
    timesyncd(enabled, "enabled")
    assert "time.no-sync-daemon" not in findings(image(enabled))


def test_image_node_declaring_low_inotify_limits_fires_a_plain_image_does_not(tmp_path: Path) -> None:
    node = make_root(tmp_path / "node")  # has a kubelet: a Kubernetes node image
    timesyncd(node, "enabled")
    (node / "etc/sysctl.d").mkdir()
    (node / "etc/sysctl.d/60-inotify.conf").write_text("fs.inotify.max_user_instances = 128\n")
    [found] = findings(image(node))["kres.inotify-limits-low"]
    assert found.evidence["declared_max_user_instances"] == "128"
    assert found.evidence["declared_max_user_instances_in"] == "/etc/sysctl.d/60-inotify.conf"
    assert "128" in found.title and "/etc/sysctl.d/60-inotify.conf" in found.title
    (node / "etc/sysctl.d/60-inotify.conf").write_text(
        "fs.inotify.max_user_instances = 8192\nfs.inotify.max_user_watches = 524288\n")
    assert findings(image(node)) == {}  # the fixed node image: none of these packs' findings
    plain = make_root(tmp_path / "plain")
    (plain / "usr/local/bin/kubelet").unlink()  # a plain host: no kubelet, no CNI configuration
    timesyncd(plain, "enabled")
    (plain / "etc/sysctl.d").mkdir()
    (plain / "etc/sysctl.d/60-inotify.conf").write_text("fs.inotify.max_user_instances = 128\n")
    snap = image(plain)
    assert findings(snap) == {}
    assert {"proc", "disk", "cpu"} <= set(snap["not_applicable"])  # the live rules do not apply to an image


# --- the fleet: b3 ---------------------------------------------------------------------------------------

class B3:
    """The triggers and fixes on fleet host b3, and the exact restore."""

    def __init__(self, fleet: Fleet, tmp: Path):
        self.fleet, self.tmp = fleet, tmp
        self.root = fleet.host("b3").root
        self.inventory = combined_inventory(tmp / "b3.yaml", [(fleet, "b3")])
        self.mounts: list[str] = []
        self.created: list[Path] = []
        self.pid_max_before: str | None = None
        self.timesyncd_mask = self.root / "etc/systemd/system" / TIMESYNCD
        self.chrony_wants = self.root / "etc/systemd/system/multi-user.target.wants" / CHRONY

    def sh(self, script: str, check: bool = True) -> str:
        return self.fleet.exec("b3", ["sh", "-c", script], timeout=60, check=check).stdout

    def in_pid_ns(self, script: str) -> str:
        """Run in b3's pid namespace but this machine's mount namespace (whose /proc/sys is writable):
        kernel.pid_max is per pid namespace on this kernel."""
        pid = self.fleet.init_pid("b3")
        return subprocess.run(["nsenter", "-t", str(pid), "-p", "--", "sh", "-c", script], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()

    def write(self, rel: str, text: str, mode: int = 0o644) -> None:
        path = self.root / rel
        assert not path.exists() and not path.is_symlink(), path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
        self.created.append(path)

    def collect(self, name: str) -> dict[str, Any]:
        out_dir = self.tmp / name
        out = io.StringIO()
        code = main(["collect", "-i", str(self.inventory), "-o", str(out_dir)], Env(out, io.StringIO()))
        assert code == 0, out.getvalue()
        [path] = out_dir.glob("*.json")
        return json.loads(path.read_text())

    def zombies(self) -> int:
        return int(self.sh("ps -eo stat= | grep -c '^Z'", check=False) or 0)

    def per_ns_pid_max(self) -> bool:
        return self.in_pid_ns("cat /proc/sys/kernel/pid_max") != _read("/proc/sys/kernel/pid_max")

    def trigger(self) -> dict[str, Any]:
        facts: dict[str, Any] = {}
        # a supervisor that never reaps: after the exec, sleep is the parent of 600 exited children
        self.write(f"etc/systemd/system/{ZOMBIE_UNIT}",
                   f"[Unit]\nDescription=Supervisor that never reaps its children\n[Service]\n"
                   f"ExecStart={ZOMBIE_EXEC}\n[Install]\nWantedBy=multi-user.target\n")
        self.sh(f"systemctl daemon-reload && systemctl start {ZOMBIE_UNIT}")
        deadline = time.monotonic() + 60
        while self.zombies() < 600:
            assert time.monotonic() < deadline, f"zombies: {self.zombies()}"
            time.sleep(0.5)
        facts["zombie_parent"] = self.sh(f"systemctl show -p MainPID --value {ZOMBIE_UNIT}").strip()
        # little pid headroom: this pid namespace's pid_max lowered to ~1.3x the tasks it holds
        if self.per_ns_pid_max():
            self.pid_max_before = self.in_pid_ns("cat /proc/sys/kernel/pid_max")
            tasks = int(self.sh("ls -d /proc/[0-9]*/task/[0-9]* | wc -l"))
            facts["pid_max"] = str(max(int(tasks / 0.75), tasks + 150))
            self.in_pid_ns(f"echo {facts['pid_max']} > /proc/sys/kernel/pid_max")
        # a container runtime (its state directory becomes a small filesystem below)
        self.write("usr/local/bin/containerd", "#!/bin/sh\nexit 0\n", 0o755)
        # declared sysctls: inotify below the EKS values, and a swappiness the kernel does not run with
        self.write("etc/sysctl.d/60-inotify.conf", "fs.inotify.max_user_instances = 128\n")
        live = self.sh("cat /proc/sys/vm/swappiness").strip()
        facts["swappiness"] = "7" if live != "7" else "8"
        self.write("etc/sysctl.d/90-swappiness.conf", f"vm.swappiness = {facts['swappiness']}\n")
        # no time sync daemon: the fleet's base root masks timesyncd already (checked, not assumed)
        assert os.readlink(self.timesyncd_mask) == "/dev/null" and not self.chrony_wants.is_symlink()
        # /var/log on a 4 MB filesystem 90 % full; the runtime's state on one out of inodes
        self.sh("mount -t tmpfs -o size=4m tmpfs /var/log")
        self.mounts.append("/var/log")
        self.sh("mkdir -p /var/log/ecs && dd if=/dev/zero of=/var/log/app.log bs=1k count=3700 2>/dev/null")
        assert not (self.root / "var/lib/containerd").exists()
        self.sh("mkdir /var/lib/containerd && mount -t tmpfs -o size=4m,nr_inodes=64 tmpfs /var/lib/containerd")
        self.created.append(self.root / "var/lib/containerd")
        self.mounts.append("/var/lib/containerd")
        self.sh("cd /var/lib/containerd && for i in $(seq 62); do : > snapshot-$i; done")
        return facts

    def fix(self, swappiness_live: str) -> None:
        self.sh(f"systemctl stop {ZOMBIE_UNIT}")
        if self.pid_max_before is not None:
            self.in_pid_ns(f"echo {self.pid_max_before} > /proc/sys/kernel/pid_max")
        (self.root / "etc/sysctl.d/60-inotify.conf").write_text(
            "fs.inotify.max_user_instances = 8192\nfs.inotify.max_user_watches = 524288\n")
        (self.root / "etc/sysctl.d/90-swappiness.conf").write_text(f"vm.swappiness = {swappiness_live}\n")
        # a sync daemon enabled as its package enables it (not started: the clock is this machine's)
        self.write(f"etc/systemd/system/{CHRONY}", "[Unit]\nDescription=chrony, an NTP client/server\n"
                   "[Service]\nExecStart=/usr/sbin/chronyd -F 1\n[Install]\nWantedBy=multi-user.target\n")
        os.symlink(f"/etc/systemd/system/{CHRONY}", self.chrony_wants)
        self.created.append(self.chrony_wants)
        self.sh("systemctl daemon-reload")
        self.sh("rm -f /var/log/app.log /var/lib/containerd/snapshot-*")

    def restore(self) -> None:
        self.sh(f"systemctl stop {ZOMBIE_UNIT}", check=False)
        if self.pid_max_before is not None:
            self.in_pid_ns(f"echo {self.pid_max_before} > /proc/sys/kernel/pid_max")
        for point in reversed(self.mounts):
            self.sh(f"umount {point}")
        for path in reversed(self.created):
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.is_dir():
                path.rmdir()
        self.sh("systemctl daemon-reload")


def state_of(root: Path) -> dict[str, str]:
    """What the test touches on b3, as the host sees it."""
    paths = [f"etc/systemd/system/{ZOMBIE_UNIT}", f"etc/systemd/system/{TIMESYNCD}", f"etc/systemd/system/{CHRONY}",
             "etc/systemd/system/multi-user.target.wants", "usr/local/bin/containerd",
             "etc/sysctl.d", "var/lib/containerd", "var/log"]
    out = {}
    for rel in paths:
        p = root / rel
        out[rel] = (f"-> {os.readlink(p)}" if p.is_symlink() else
                    "dir " + ",".join(sorted(c.name for c in p.iterdir())) if p.is_dir() else
                    p.read_text() if p.exists() else "absent")
    return out


@pytest.fixture
def b3(fleet: Fleet, tmp_path: Path) -> Iterator[B3]:
    host = B3(fleet, tmp_path)
    before = state_of(host.root)
    mounts_before = host.sh("cat /proc/self/mounts")
    try:
        yield host
    finally:
        host.restore()
        assert state_of(host.root) == before
        assert host.sh("cat /proc/self/mounts") == mounts_before
        assert host.zombies() == 0


def judged(snap: dict[str, Any]) -> dict[str, list[Any]]:
    return findings(snap)


def shared_kernel_expectations(snap: dict[str, Any]) -> set[str]:
    """The rules this machine's own kernel values make fire on every container, read here."""
    expected = set()
    # time.not-synchronized: the fleet runs no chrony and its timesyncd is masked, so no daemon says (null)
    if file_handles_ratio() >= 0.8:
        expected.add("kres.file-handles-near-max")
    if slow_clocksource():
        expected.add("time.slow-clocksource")
    if inotify_low():
        expected.add("kres.inotify-limits-low")
    lines = snap["facts"]["network"]["kernel_log"]["lines"]
    if any(p in line for line in lines for p in ("fork rejected by pids", "VFS: file-max limit")):
        expected.add("kres.pid-headroom" if any("fork rejected" in x for x in lines) else "kres.file-handles-near-max")
    if any(p in line for line in lines for p in ("EXT4-fs error", "read-only", "Shutting down filesystem",
                                                   "Buffer I/O error")):
        expected.add("disk.fs-errors")
    return expected


@pytest.mark.fleet
def test_b3_every_trigger_fires_every_fix_passes_and_the_host_is_restored(b3: B3) -> None:
    swappiness_live = b3.sh("cat /proc/sys/vm/swappiness").strip()
    laid = b3.trigger()
    snap = b3.collect("triggered")
    got = judged(snap)
    shared = shared_kernel_expectations(snap)

    [zombies] = got["kres.zombie-pileup"]
    assert snap["facts"]["proc"]["zombies"] >= 600
    assert f"sleep (pid {laid['zombie_parent']})" in zombies.title
    assert zombies.evidence["zombie_parents"][0] == {"pid": int(laid["zombie_parent"]), "comm": "sleep",
                                                     "zombies": 600}
    assert zombies.rule == "kres.zombie-pileup" and "kres.pid-headroom" in got  # its chain's next link
    if "pid_max" in laid:
        [headroom] = got["kres.pid-headroom"]
        assert headroom.evidence["pid_max"] == laid["pid_max"] and headroom.evidence["used_ratio"] >= 0.7
        # the 32-bit-era branch on the same real snapshot: pid_max <= 32768 from this machine's CPU count
        cpus = snap["facts"]["cpu"]["count"]
        assert "kres.pid-headroom" in findings(snap, "kres.pid_used_ratio=2", f"kres.pid_max_small_min_cpus={cpus}")
        assert ("kres.pid-headroom" in findings(snap, "kres.pid_used_ratio=2")) == (cpus >= 16)
    [runtime] = [b for b in snap["facts"]["binaries"] if b["name"] == "containerd"]
    assert runtime["found"] and runtime["path"] == "/usr/local/bin/containerd"
    assert ("kres.keyring-quota-low" in got) == keyring_quota_low()
    [inotify] = got["kres.inotify-limits-low"]
    assert inotify.evidence["declared_max_user_instances"] == "128"
    assert inotify.evidence["declared_max_user_instances_in"] == "/etc/sysctl.d/60-inotify.conf"
    drift = {f.item: f for f in got["kres.sysctl-declared-not-applied"]}
    assert drift["vm.swappiness"].evidence == {"live": swappiness_live, "declared": laid["swappiness"],
                                               "declared_in": "/etc/sysctl.d/90-swappiness.conf"}
    assert "/etc/sysctl.d/90-swappiness.conf" in drift["vm.swappiness"].title
    if "pid_max" in laid:  # systemd's 50-pid-max.conf declares 4194304: the lowered value is not it
        assert drift["kernel.pid_max"].evidence["live"] == laid["pid_max"]
    # a container's clock is its host's: the masked timesyncd is not judged live; the same facts on a VM are
    assert snap["host"]["container"] == "systemd-nspawn" and "time.no-sync-daemon" not in got
    [no_sync] = judged({**snap, "host": {**snap["host"], "container": None}})["time.no-sync-daemon"]
    assert {"name": TIMESYNCD, "state": "masked"}.items() <= no_sync.evidence["sync_units"][0].items()
    [log] = got["disk.filling"]
    assert log.item == "/var/log" and 85 <= log.evidence["used_pct"] < 95
    [state] = got["disk.filling-critical"]
    assert state.item == "/var/lib/containerd" and state.evidence["inodes_used_pct"] >= 95
    laid_rules = {"kres.zombie-pileup", "kres.inotify-limits-low", "kres.sysctl-declared-not-applied",
                  "disk.filling", "disk.filling-critical"}
    laid_rules |= {"kres.pid-headroom"} if "pid_max" in laid else set()
    laid_rules |= {"kres.keyring-quota-low"} if keyring_quota_low() else set()
    assert set(got) == laid_rules | shared

    b3.fix(swappiness_live)
    fixed = b3.collect("fixed")
    assert b3.zombies() == 0 and fixed["facts"]["proc"]["zombies"] == 0
    got = judged(fixed)
    # a healthy Kubernetes node (kubelet, a container runtime): only what this machine's kernel imposes on
    # every container is left; a declared value the live kernel lacks is still reported (here: none)
    remaining = shared_kernel_expectations(fixed) | ({"kres.keyring-quota-low"} if keyring_quota_low() else set())
    if "kres.sysctl-declared-not-applied" in got:
        assert {f.item for f in got["kres.sysctl-declared-not-applied"]} <= {"fs.inotify.max_user_instances",
                                                                           "fs.inotify.max_user_watches"}
        remaining.add("kres.sysctl-declared-not-applied")
    assert set(got) == remaining
