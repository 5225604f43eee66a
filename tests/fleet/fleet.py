"""The real test fleet: systemd-nspawn containers on overlays of debootstrapped Debian base roots.

Each host boots real systemd and a real sshd listening on its own loopback address (port 22) in the
host's network namespace. The scenario mirrors the incident in FIELD-NOTES §1: `ecs.service`
crash-loops on the AZ-b hosts only, and their kubelet came from another download source.
The main fleet runs bookworm; `Fleet(releases=[...])` is a second, separate fleet with one AZ-a and
one AZ-b host per Debian release (bullseye, bookworm, trixie), trixie on a cgroup v2 hierarchy.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import builder

# AMI_AUDITOR_FLEET_NET=N puts the fleet on 127.0.N.x (extra hosts on 127.0.N+1.x) with its own state
# root and lock, so several checkouts on one machine can each run a fleet (default 2: 127.0.2.x).
NET = int(os.environ.get("AMI_AUDITOR_FLEET_NET") or "2")
if not 2 <= NET <= 250:
    raise ValueError("AMI_AUDITOR_FLEET_NET: 2..250")
STATE_ROOT = Path(os.environ.get("AMI_AUDITOR_FLEET_STATE")
                  or ("/var/tmp/ami-auditor-fleet" if NET == 2 else f"/var/tmp/ami-auditor-fleet-net{NET}"))
# The multi-release fleet has its own state root and lock, so it can run beside the main fleet.
RELEASES_STATE_ROOT = STATE_ROOT.with_name(STATE_ROOT.name + "-releases")
PAYLOAD = Path(__file__).with_name("payload")
AMI_ID = "ami-0c7217cdde317cfec"
REGION = "us-east-1"
AZ_IDS = {"us-east-1a": "use1-az1", "us-east-1b": "use1-az2"}
EKS_KUBELET_URL = "https://amazon-eks.s3.us-west-2.amazonaws.com/1.29.3/2024-04-19/bin/linux/amd64/kubelet"
UPSTREAM_KUBELET_URL = "https://dl.k8s.io/release/v1.29.3/bin/linux/amd64/kubelet"
EXTRA_UNIT = "node-exporter-extra.service"
SSH_PORT = 22
NSPAWN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
# Releases booted with a unified (cgroup v2) hierarchy although this host is hybrid, so the v2 reading
# (cgroup.stat) runs on a real kernel: nspawn puts the host's cgroup2 hierarchy (the tracking-only
# /sys/fs/cgroup/unified; the memory controller stays bound to v1) under a cgroup namespace. Without it
# nspawn picks hybrid here, which systemd 257 also boots on ("System is tainted: cgroupsv1").
UNIFIED_RELEASES = frozenset({"trixie"})
DEBIAN_VERSION = {"bullseye": "11", "bookworm": "12", "trixie": "13"}
# The multi-release fleet of the tests (conftest `release_fleet`): bookworm comes from the main fleet.
RELEASE_FLEET = ("bullseye", "trixie")
EXEC_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
            "LANG": "C.UTF-8", "TERM": "dumb"}


@dataclass(frozen=True)
class HostSpec:
    """One host of the scenario: its name, loopback address and labels."""

    name: str
    address: str
    labels: dict[str, str]
    enabled_units: tuple[str, ...] = ()
    kubelet: str = "eks"  # "eks" or "upstream": where the node bootstrap downloaded kubelet from
    release: str = builder.RELEASE  # the Debian release of the base root

    @property
    def unified_cgroup(self) -> bool:
        """True when the host boots with a cgroup v2 (unified) hierarchy."""
        return self.release in UNIFIED_RELEASES

    @property
    def az(self) -> str:
        return self.labels["az"]


SCENARIO: tuple[HostSpec, ...] = (
    HostSpec("golden", f"127.0.{NET}.10", {"az": "us-east-1a", "role": "golden"}),
    HostSpec("a1", f"127.0.{NET}.11", {"az": "us-east-1a"}),
    HostSpec("a2", f"127.0.{NET}.12", {"az": "us-east-1a"}, enabled_units=(EXTRA_UNIT,)),
    HostSpec("a3", f"127.0.{NET}.13", {"az": "us-east-1a"}),
    HostSpec("b1", f"127.0.{NET}.21", {"az": "us-east-1b"}, enabled_units=("ecs.service",), kubelet="upstream"),
    HostSpec("b2", f"127.0.{NET}.22", {"az": "us-east-1b"}, enabled_units=("ecs.service",), kubelet="upstream"),
    HostSpec("b3", f"127.0.{NET}.23", {"az": "us-east-1b"}, enabled_units=("ecs.service",), kubelet="upstream"),
)
AZ_B_HOSTS = tuple(h.name for h in SCENARIO if h.az == "us-east-1b")


def release_hosts(releases: Iterable[str]) -> list[HostSpec]:
    """Two hosts per Debian release, in both AZ roles: `<release>-a` like golden (ecs.service disabled,
    EKS kubelet) and `<release>-b` like b1 (ecs.service enabled and crash-looping, upstream kubelet).

    Addresses 127.0.NET.(31+10*i)/(32+10*i) by the release's place in builder.RELEASES (bullseye .31/.32,
    bookworm .41/.42, trixie .51/.52): apart from the main scenario's, so both fleets can run at once.
    """
    specs = []
    for release in releases:
        i = builder.RELEASES.index(release)
        labels = {"release": release}
        specs += [
            HostSpec(f"{release}-a", f"127.0.{NET}.{31 + 10 * i}", {"az": "us-east-1a", **labels}, release=release),
            HostSpec(f"{release}-b", f"127.0.{NET}.{32 + 10 * i}", {"az": "us-east-1b", **labels},
                     enabled_units=("ecs.service",), kubelet="upstream", release=release),
        ]
    return specs


def extra_hosts(n: int) -> list[HostSpec]:
    """`n` benchmark hosts x01..xNN on 127.0.NET+1.N, cloned like a1."""
    if not 0 <= n <= 250:
        raise ValueError("extra hosts: 0..250")
    return [HostSpec(f"x{i:02d}", f"127.0.{NET + 1}.{i}", {"az": "us-east-1a"}) for i in range(1, n + 1)]


@dataclass
class Host:
    """A running (or stopped) fleet host."""

    spec: HostSpec
    dir: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    nspawn_pid: int | None = None  # set also when attached to a fleet another process booted

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def address(self) -> str:
        return self.spec.address

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.spec.labels)

    @property
    def az(self) -> str:
        return self.spec.az

    @property
    def target(self) -> str:
        return f"ssh://root@{self.address}"

    @property
    def root(self) -> Path:
        """The merged overlay: the host's root filesystem as seen from outside."""
        return self.dir / "merged"

    @property
    def upper(self) -> Path:
        return self.dir / "upper"

    @property
    def console_log(self) -> Path:
        return self.dir / "console.log"

    @property
    def running(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return self.nspawn_pid is not None and _pid_alive(self.nspawn_pid)


def unavailable_reason() -> str | None:
    """Why the fleet cannot run on this machine, or None when it can."""
    if os.geteuid() != 0:
        return "the test fleet needs root (overlay mounts, systemd-nspawn)"
    missing = [t for t in ("debootstrap", "systemd-nspawn", "nsenter", "ssh-keygen", "mount") if not shutil.which(t)]
    if missing:
        return f"the test fleet needs {', '.join(missing)} (apt-get install debootstrap systemd-container " \
               "openssh-client util-linux)"
    if not Path("/proc/filesystems").read_text().count("overlay"):
        return "the test fleet needs overlayfs (modprobe overlay)"
    return None


def _log(msg: str) -> None:
    builder._log(msg)


# Every container's systemd, journald, logind, dbus... takes inotify instances from root's shared
# per-user budget (default 128): about 7 hosts' worth. Beyond that, units fail with EMFILE.
SYSCTL_MINIMUMS = {"fs/inotify/max_user_instances": 8192, "fs/inotify/max_user_watches": 524288}


def tune_kernel() -> None:
    """Raise the host-wide limits that many booted containers exhaust (never lowers them)."""
    for key, minimum in SYSCTL_MINIMUMS.items():
        path = Path("/proc/sys") / key
        if int(path.read_text()) < minimum:
            _log(f"raising {key.replace('/', '.')} to {minimum} for the fleet")
            path.write_text(f"{minimum}\n")


# ---------------------------------------------------------------------------------------------
# sockets and processes
# ---------------------------------------------------------------------------------------------

def _proc_addr(hexaddr: str, v6: bool) -> str:
    """Address text of a /proc/net/tcp{,6} column ("::" for the IPv6 wildcard)."""
    if v6:
        return "::" if int(hexaddr, 16) == 0 else hexaddr
    return socket.inet_ntoa(bytes.fromhex(hexaddr)[::-1])


def _listeners(port: int) -> list[tuple[str, int]]:
    """(address, socket inode) of TCP sockets listening on `port` (IPv4 and IPv6)."""
    out: list[tuple[str, int]] = []
    for path, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(path).read_text().splitlines()[1:]:
                cols = line.split()
                addr, hexport = cols[1].split(":")
                if cols[3] != "0A" or int(hexport, 16) != port:
                    continue
                out.append((_proc_addr(addr, v6), int(cols[9])))
    return out


def _socket_owners(inodes: set[int]) -> dict[int, str]:
    """pid → cmdline of processes holding any of the socket `inodes`."""
    owners: dict[int, str] = {}
    targets = {f"socket:[{i}]" for i in inodes}
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (pid_dir / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in targets:
                        cmd = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                        owners[int(pid_dir.name)] = cmd.strip()
                        break
    return owners


def check_port_free(addresses: Iterable[str], port: int = SSH_PORT) -> None:
    """Make sure the fleet's sshds can bind `address:port`.

    A host sshd on 0.0.0.0:22 / [::]:22 (openssh-server's postinst may start one on a fresh CI machine)
    blocks every container sshd. With `CI=true` or `AMI_AUDITOR_FLEET_STOP_HOST_SSHD=1` it is stopped;
    otherwise the fleet fails with a message that says what to do.
    """
    wanted = set(addresses) | {"0.0.0.0", "::"}
    busy = [(a, i) for a, i in _listeners(port) if a in wanted]
    if not busy:
        return
    owners = _socket_owners({i for _, i in busy})
    desc = ", ".join(f"{a}:{port}" for a, _ in busy)
    who = "; ".join(f"pid {p}: {c}" for p, c in owners.items()) or "unknown process"
    stop = os.environ.get("CI") == "true" or os.environ.get("AMI_AUDITOR_FLEET_STOP_HOST_SSHD") == "1"
    host_sshd = owners and all("sshd" in c for c in owners.values())
    if stop and host_sshd:
        _log(f"stopping the host's sshd ({who}): it holds {desc}, which the fleet needs")
        if shutil.which("service") and Path("/etc/init.d/ssh").exists():
            subprocess.run(["service", "ssh", "stop"], capture_output=True)
        for pid in owners:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and [b for b in _listeners(port) if b[0] in wanted]:
            time.sleep(0.1)
        if not [b for b in _listeners(port) if b[0] in wanted]:
            return
    raise RuntimeError(
        f"port {port} is taken on {desc} by {who}; the fleet's sshds need 127.0.x.y:{port}. "
        "Stop the host's sshd (e.g. `service ssh stop`, or set ListenAddress on it), "
        "or set AMI_AUDITOR_FLEET_STOP_HOST_SSHD=1 to let the fleet stop it."
    )


def _ssh_banner(address: str, port: int = SSH_PORT, timeout: float = 2.0) -> str | None:
    """The SSH identification line at address:port, or None when nothing answers yet."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as s:
            data = s.recv(256)
    except OSError:
        return None
    line = data.split(b"\n", 1)[0].decode(errors="replace").strip()
    return line if line.startswith("SSH-") else None


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def _ns_init_pid(nspawn_pid: int) -> int | None:
    """PID (host view) of the container's init: the nspawn child that is PID 1 in its namespace."""
    for kid in _children(nspawn_pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{kid}/status").read_text().splitlines():
                if line.startswith("NSpid:") and line.split()[-1] == "1" and len(line.split()) > 2:
                    return kid
    return None


def _mounts_under(path: Path) -> list[Path]:
    """Mount points at or below `path`, deepest first (from /proc/self/mountinfo)."""
    prefix = str(path.resolve())
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _umount(point: Path) -> None:
    if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def _start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (tells a reused pid from the original)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _owner_alive(meta: dict[str, object]) -> bool:
    """True when the process that booted a fleet run still runs (and is the same process)."""
    pid = int(str(meta.get("owner_pid", 0)))
    if not pid or not _pid_alive(pid):
        return False
    started = meta.get("owner_start")
    return started is None or started == _start_time(pid)


def _pid_alive(pid: int) -> bool:
    """True when `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _nspawn_pids_for(run_dir: Path) -> list[int]:
    """systemd-nspawn processes whose root directory lies under `run_dir`."""
    return list(_nspawn_roots(run_dir).values())


def _nspawn_roots(run_dir: Path) -> dict[str, int]:
    """Root directory → pid of the live systemd-nspawn processes whose root lies under `run_dir`."""
    prefix = str(run_dir.resolve()) + "/"
    pids: dict[str, int] = {}
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (pid_dir / "cmdline").read_bytes().split(b"\0")
            roots = [a.decode(errors="replace") for a in argv if a.startswith(prefix.encode())]
            if argv[0].endswith(b"systemd-nspawn") and roots and _pid_alive(int(pid_dir.name)):
                pids[roots[0]] = int(pid_dir.name)
    return pids


def _kill_nspawn(pid: int, timeout: float) -> None:
    """Orderly container shutdown (nspawn turns SIGTERM into a poweroff), then SIGKILL."""
    init = _ns_init_pid(pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _pid_alive(pid):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
        time.sleep(0.1)
    if _pid_alive(pid):
        for p in (init, pid):
            if p:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


CGROUP_GROUP = "ami-auditor-fleet"


def _tracking_hierarchies() -> list[Path]:
    """Mount points of the cgroup hierarchies systemd tracks processes in (name=systemd v1, cgroup2).

    The v1 controller hierarchies (memory...) are left alone: per-host memcgs would turn into dying
    memcgs at teardown and disturb the dying-memcg tests.
    """
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        fstype, _src, opts = (post.split() + ["", "", ""])[:3]
        if fstype == "cgroup2" or (fstype == "cgroup" and "name=systemd" in opts.split(",")):
            found.append(Path(pre.split()[4]))
    return found


def _fstype(mount: Path) -> str | None:
    """Filesystem type of the mount point `mount` (from /proc/self/mountinfo)."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        if Path(pre.split()[4]) == mount:
            return post.split()[0]
    return None


def host_cgroups(run: str, host: str) -> list[Path]:
    """The per-host cgroup directories (one per tracking hierarchy) a host's nspawn runs in."""
    return [h / CGROUP_GROUP / run / host for h in _tracking_hierarchies()]


def _remove_cgroups(run: str) -> None:
    """rmdir a run's cgroup trees (all hierarchies)."""
    _remove_cgroup_trees([h / CGROUP_GROUP / run for h in _tracking_hierarchies()])
    for h in _tracking_hierarchies():
        with contextlib.suppress(OSError):
            (h / CGROUP_GROUP).rmdir()  # fails while another run uses it: fine


def _remove_cgroup_trees(tops: Iterable[Path]) -> None:
    """rmdir cgroup trees deepest first (nspawn and the containers' systemd made subgroups)."""
    for top in tops:
        if not top.is_dir():
            continue
        dirs = sorted((Path(d) for d, _, _ in os.walk(top)), key=lambda p: len(p.parts), reverse=True)
        for _ in range(50):
            for d in dirs:
                with contextlib.suppress(FileNotFoundError, OSError):
                    d.rmdir()
            if not top.exists():
                break
            time.sleep(0.1)


def cleanup_run(run_dir: Path, timeout: float = 15.0) -> None:
    """Stop every container of a fleet run, unmount its overlays, remove its cgroups and state dir."""
    pids = _nspawn_pids_for(run_dir)
    with ThreadPoolExecutor(max_workers=max(1, len(pids))) as pool:
        list(pool.map(lambda p: _kill_nspawn(p, timeout), pids))
    _remove_cgroups(run_dir.name)
    for point in _mounts_under(run_dir):
        _umount(point)
    left = _mounts_under(run_dir)
    if left:
        raise RuntimeError(f"could not unmount {', '.join(map(str, left))}; not removing {run_dir}")
    shutil.rmtree(run_dir, ignore_errors=True)


def cleanup_stale(force: bool = False, root: Path | None = None) -> list[Path]:
    """Clean fleet runs under `root` (default: the main fleet's) whose owner process is gone (all runs with
    `force`). Returns what was cleaned."""
    root = root or STATE_ROOT
    cleaned: list[Path] = []
    if not root.is_dir():
        return cleaned
    for run_dir in sorted(root.iterdir()):
        if not run_dir.is_dir():
            continue
        meta: dict[str, object] = {}
        with contextlib.suppress(OSError, ValueError):
            meta = json.loads((run_dir / "fleet.json").read_text())
        if force or not _owner_alive(meta) or meta.get("owner_pid") == os.getpid():
            cleanup_run(run_dir)
            cleaned.append(run_dir)
    return cleaned


# ---------------------------------------------------------------------------------------------
# the fleet
# ---------------------------------------------------------------------------------------------

class Fleet:
    """Boot, drive and tear down the test fleet. Use as a context manager or call up()/down()."""

    def __init__(self, extra: int = 0, state_dir: Path | None = None, boot_timeout: float | None = None,
                 releases: Sequence[str] | None = None):
        """The main scenario (golden, a1-a3, b1-b3 + `extra` benchmark hosts), or with `releases` the
        multi-release fleet (`release_hosts`): its own state root and lock, so both can run at once."""
        self.releases = tuple(releases) if releases else None
        specs = release_hosts(self.releases) if self.releases else list(SCENARIO) + extra_hosts(extra)
        self.state_root = RELEASES_STATE_ROOT if self.releases else STATE_ROOT
        run = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}" + ("-releases" if self.releases else "")
        self.dir = Path(state_dir) if state_dir else self.state_root / run
        self.hosts: list[Host] = [Host(s, self.dir / "hosts" / s.name) for s in specs]
        self._by_name = {h.name: h for h in self.hosts}
        self.identity_file = self.dir / "id_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.inventory_path = self.dir / "inventory.yaml"
        self.boot_timeout = boot_timeout or 90.0 + 2.0 * len(self.hosts)
        self.bases: dict[str, Path] = {}
        self.timings: dict[str, float] = {}
        self._lock_file: object | None = None
        self._down = False
        self._attached = False
        self._mutex = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Fleet:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    @property
    def az_b_hosts(self) -> list[str]:
        """Names of this fleet's AZ-b hosts (ecs.service enabled and crash-looping)."""
        return [h.name for h in self.hosts if h.az == "us-east-1b"]

    def host(self, name: str) -> Host:
        """The host called `name` (KeyError if there is none)."""
        return self._by_name[name]

    def up(self) -> Fleet:
        """Build (or reuse) the base, prepare every host, boot them in parallel, wait for sshd."""
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        self._take_lock()
        atexit.register(self.down)
        _install_term_handler()
        try:
            t0 = time.monotonic()
            # missing base roots are debootstrapped side by side (mostly download and unpack waits)
            releases = sorted({h.spec.release for h in self.hosts}, key=builder.RELEASES.index)
            with ThreadPoolExecutor(max_workers=len(releases)) as pool:
                self.bases = dict(zip(releases, pool.map(builder.ensure_base, releases)))
            self.timings["base"] = time.monotonic() - t0
            check_port_free(h.address for h in self.hosts)
            tune_kernel()
            t1 = time.monotonic()
            self._prepare()
            self.timings["prepare"] = time.monotonic() - t1
            t2 = time.monotonic()
            for h in self.hosts:
                self._spawn(h)
            self._wait_ssh(self.hosts)
            self.timings["boot"] = time.monotonic() - t2
            self._write_meta(ready=True)
        except BaseException:
            self.down()
            raise
        _log(f"fleet up: {len(self.hosts)} hosts, inventory {self.inventory_path} "
             f"(prepare {self.timings['prepare']:.1f} s, boot {self.timings['boot']:.1f} s)")
        return self

    @classmethod
    def attach(cls, run_dir: Path | None = None) -> Fleet:
        """Use a fleet that another live process booted (e.g. `python -m tests.fleet up`).

        `run_dir` defaults to the newest live run. down() of an attached fleet leaves it running.
        """
        runs = [run_dir] if run_dir else sorted(STATE_ROOT.glob("*/fleet.json"), reverse=True)
        for run in runs:
            run = Path(run)
            meta_path = run / "fleet.json" if run.is_dir() else run
            with contextlib.suppress(OSError, ValueError, KeyError):
                meta = json.loads(meta_path.read_text())
                if _owner_alive(meta) and meta.get("ready", True):
                    fleet = cls(extra=int(meta.get("extra", 0)), state_dir=meta_path.parent)
                    fleet._attached = True
                    fleet._down = False
                    roots = _nspawn_roots(fleet.dir)
                    for h in fleet.hosts:
                        h.nspawn_pid = roots.get(str(h.root.resolve()))
                    return fleet
        raise RuntimeError(f"no running test fleet to attach to under {run_dir or STATE_ROOT}")

    def down(self) -> None:
        """Stop every container, unmount every overlay, remove the state dir. Idempotent."""
        with self._mutex:
            if self._down:
                return
            self._down = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.down)
        if self._attached:
            return
        for h in self.hosts:
            h.proc = None
            h.nspawn_pid = None
        if self.dir.exists():
            cleanup_run(self.dir)
        if self._lock_file is not None:
            self._lock_file.close()  # type: ignore[attr-defined]
            self._lock_file = None

    def _take_lock(self) -> None:
        """One fleet per machine at a time (they would share 127.0.NET.x:22): wait for the lock."""
        root = self.state_root
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / ".lock", "a+")  # noqa: SIM115 - held for the fleet's lifetime
        wait = float(os.environ.get("AMI_AUDITOR_FLEET_LOCK_WAIT", "900"))
        deadline = time.monotonic() + wait
        said = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    lock.close()
                    raise RuntimeError(f"another test fleet holds {root}/.lock for over {wait:.0f} s") \
                        from None
                if not said:
                    _log(f"another test fleet is running; waiting up to {wait:.0f} s for {root}/.lock "
                         "(AMI_AUDITOR_FLEET_ATTACH=1 makes the tests use that fleet instead)")
                    said = True
                time.sleep(1)
        self._lock_file = lock
        cleanup_stale(root=root)
        self.dir.mkdir(parents=True)
        self._write_meta(ready=False)

    def _write_meta(self, ready: bool) -> None:
        meta = {"owner_pid": os.getpid(), "owner_start": _start_time(os.getpid()),
                "extra": 0 if self.releases else len(self.hosts) - len(SCENARIO),
                "releases": list(self.releases or ()), "ready": ready, "inventory": str(self.inventory_path)}
        tmp = self.dir / "fleet.json.tmp"
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, self.dir / "fleet.json")

    # -- preparing hosts ------------------------------------------------------------------------

    def _prepare(self) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ami-auditor-fleet",
                        "-f", str(self.identity_file)], check=True)
        pub = (self.dir / "id_ed25519.pub").read_text()
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda h: self._prepare_host(h, pub), self.hosts))
        lines = []
        for h in self.hosts:
            for key in sorted((h.root / "etc/ssh").glob("ssh_host_*_key.pub")):
                kind, blob = key.read_text().split()[:2]
                lines.append(f"{h.address} {kind} {blob}\n")
        self.known_hosts.write_text("".join(lines))
        self._write_inventory()

    @property
    def base(self) -> Path | None:
        """The bookworm base root (the main fleet's only one), once up() has built it."""
        return self.bases.get(builder.RELEASE)

    def _prepare_host(self, h: Host, client_pub: str) -> None:
        base = self.bases[h.spec.release]
        for d in ("upper", "work", "merged"):
            (h.dir / d).mkdir(parents=True)
        subprocess.run(
            ["mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={base},upperdir={h.upper},workdir={h.dir / 'work'}", str(h.root)],
            check=True, capture_output=True,
        )
        r = h.root
        (r / "etc/hostname").write_text(h.name + "\n")
        (r / "etc/hosts").write_text(f"127.0.0.1\tlocalhost\n{h.address}\t{h.name}\n")
        (r / "etc/machine-id").write_text(uuid.uuid4().hex + "\n")
        # RSA keys cost ~1.5 s of CPU each: only the main scenario hosts get one (benchmark and release
        # hosts don't).
        kinds = ["ed25519", "ecdsa"] + (["rsa"] if h.spec in SCENARIO else [])
        for kind in kinds:
            subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", f"root@{h.name}",
                            "-f", str(r / f"etc/ssh/ssh_host_{kind}_key")], check=True, capture_output=True)
        (r / "etc/ssh/sshd_config.d/20-listen.conf").write_text(f"ListenAddress {h.address}:{SSH_PORT}\n")
        ssh_dir = r / "root/.ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(client_pub)
        os.chmod(ssh_dir / "authorized_keys", 0o600)
        _install_scenario(h.spec, r)

    def _write_inventory(self) -> None:
        doc = {
            "defaults": {"ssh": {"user": "root", "identity_file": str(self.identity_file),
                                 "known_hosts": str(self.known_hosts)}},
            "hosts": [{"name": h.name, "target": h.target, "labels": h.labels} for h in self.hosts],
        }
        self.inventory_path.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))

    # -- running hosts --------------------------------------------------------------------------

    def _spawn(self, h: Host) -> None:
        if h.running:
            raise RuntimeError(f"{h.name} is already running")
        # Each host gets its own cgroup: with --keep-unit nspawn runs the container in <own cgroup>/payload,
        # and in the root cgroup all hosts' systemds would share (and fight over) the same unit cgroups.
        cgroups = host_cgroups(self.dir.name, h.name)
        for cg in cgroups:
            cg.mkdir(parents=True, exist_ok=True)
        enter = " && ".join(f"echo $$ > {cg / 'cgroup.procs'}" for cg in cgroups) or "true"
        env = dict(NSPAWN_ENV)
        if h.spec.unified_cgroup:
            env["SYSTEMD_NSPAWN_UNIFIED_HIERARCHY"] = "1"
        with open(h.console_log, "ab") as log:
            h.nspawn_pid = None
            h.proc = subprocess.Popen(
                ["/bin/sh", "-c", f'{enter} && exec "$@"', "sh",
                 "systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "--boot",
                 "--console=read-only", "--link-journal=no", "--resolv-conf=off", "--timezone=off",
                 f"--machine={h.name}", "-D", str(h.root)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True,
            )
            h.nspawn_pid = h.proc.pid

    def _wait_ssh(self, hosts: Sequence[Host], timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.boot_timeout)
        pending = list(hosts)
        while pending:
            for h in list(pending):
                if not h.running:
                    code = h.proc.returncode if h.proc is not None else "?"
                    raise RuntimeError(f"{h.name}: systemd-nspawn exited with {code}\n"
                                       f"{self.console_tail(h.name)}")
                if _ssh_banner(h.address, timeout=0.5):
                    pending.remove(h)
            if pending and time.monotonic() > deadline:
                h = pending[0]
                raise TimeoutError(f"no SSH banner from {', '.join(p.name for p in pending)} after "
                                   f"{timeout or self.boot_timeout:.0f} s; {h.name} console:\n"
                                   f"{self.console_tail(h.name)}")
            if pending:
                time.sleep(0.25)

    def console_tail(self, name: str, lines: int = 40) -> str:
        """The last lines of a host's console log."""
        with contextlib.suppress(OSError):
            text = self.host(name).console_log.read_text(errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return "(no console log)"

    def init_pid(self, name: str) -> int:
        """Host PID of the container's init (systemd)."""
        h = self.host(name)
        if not h.running:
            raise RuntimeError(f"{name} is not running")
        assert h.nspawn_pid is not None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid = _ns_init_pid(h.nspawn_pid)
            if pid:
                return pid
            time.sleep(0.05)
        raise RuntimeError(f"{name}: no container init under nspawn pid {h.nspawn_pid}")

    def cgroup2_root(self, name: str) -> Path:
        """Host path of the cgroup2 directory a unified host sees as its `/sys/fs/cgroup` (its cgroup
        namespace root): the host-side path of its init's cgroup minus the path seen inside."""
        mount = next((m for m in _tracking_hierarchies() if _fstype(m) == "cgroup2"), None)
        if mount is None:
            raise RuntimeError("no cgroup2 hierarchy on this machine")

        def v2_path(text: str) -> str:
            return next(line[3:] for line in text.splitlines() if line.startswith("0::"))

        outside = v2_path(Path(f"/proc/{self.init_pid(name)}/cgroup").read_text())
        inside = v2_path(self.exec(name, ["cat", "/proc/1/cgroup"], check=True).stdout)
        if inside != "/" and not outside.endswith(inside):
            raise RuntimeError(f"{name}: init's cgroup {outside!r} does not end with {inside!r}")
        base = outside[: len(outside) - len(inside)] if inside != "/" else outside
        return mount / base.strip("/")

    def exec(self, name: str, argv: Sequence[str], timeout: float = 30.0, check: bool = False,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run `argv` inside the host (its mount/uts/ipc/pid/cgroup namespaces) and capture text output."""
        pid = self.init_pid(name)
        cmd = ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-p", "-C", "--", *argv]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=check,
                              input=input, env=EXEC_ENV)

    def stop(self, name: str, timeout: float = 20.0) -> None:
        """Power the host off (SIGKILL after `timeout`). Its disk (overlay upper dir) is kept."""
        h = self.host(name)
        if h.nspawn_pid is None:
            return
        _kill_nspawn(h.nspawn_pid, timeout)
        if h.proc is not None:
            h.proc.wait()
        h.proc = None
        h.nspawn_pid = None
        _remove_cgroup_trees(host_cgroups(self.dir.name, h.name))

    def start(self, name: str, timeout: float | None = None) -> None:
        """Boot a stopped host and wait for its sshd."""
        h = self.host(name)
        check_port_free([h.address])
        self._spawn(h)
        self._wait_ssh([h], timeout)

    def systemctl_show(self, name: str, unit: str, props: Sequence[str]) -> dict[str, str]:
        """`systemctl show -p ...` for one unit inside a host, as a dict."""
        out = self.exec(name, ["systemctl", "show", "-p", ",".join(props), unit], check=True).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def wait_for(self, name: str, predicate: Callable[[Fleet, Host], bool], timeout: float = 60.0,
                 interval: float = 0.5, what: str = "condition") -> None:
        """Poll `predicate(fleet, host)` until it is true; TimeoutError after `timeout` seconds."""
        h = self.host(name)
        deadline = time.monotonic() + timeout
        while not predicate(self, h):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: {what} not reached within {timeout:.0f} s")
            time.sleep(interval)

    def wait_crashloop(self, names: Sequence[str] | None = None, min_restarts: int | None = None,
                       timeout: float = 90.0) -> dict[str, int]:
        """Wait until ecs.service has NRestarts >= `min_restarts` on `names` (default: this fleet's AZ-b
        hosts); returns the counts.

        The default is what the built-in crash-loop rule needs (read from its pack, not a copy), so a
        test that scans right after this wait sees the finding even on a slow, loaded machine."""
        if min_restarts is None:
            min_restarts = crashloop_threshold()
        counts: dict[str, int] = {}

        def restarted(fleet: Fleet, h: Host) -> bool:
            n = int(fleet.systemctl_show(h.name, "ecs.service", ["NRestarts"]).get("NRestarts", "0") or 0)
            counts[h.name] = n
            return n >= min_restarts

        for n in names if names is not None else self.az_b_hosts:
            self.wait_for(n, restarted, timeout=timeout, what=f"ecs.service NRestarts >= {min_restarts}")
        return counts

    def memory_usage(self) -> dict[str, int]:
        """Proportional set size (bytes) of all processes in each running host."""
        usage: dict[str, int] = {}
        for h in self.hosts:
            if not h.running:
                continue
            ns = os.readlink(f"/proc/{self.init_pid(h.name)}/ns/pid")
            total = 0
            for pid_dir in Path("/proc").iterdir():
                if not pid_dir.name.isdigit():
                    continue
                with contextlib.suppress(OSError):
                    if os.readlink(pid_dir / "ns/pid") != ns:
                        continue
                    for line in (pid_dir / "smaps_rollup").read_text().splitlines():
                        if line.startswith("Pss:"):
                            total += int(line.split()[1]) * 1024
            usage[h.name] = total
        return usage


def combined_inventory(path: Path, members: Iterable[tuple[Fleet, str]]) -> Path:
    """Write an inventory of hosts taken from one or more fleets (each host keeps its fleet's client key
    and known_hosts as per-host SSH options); every host gets a `release` label."""
    hosts = []
    for fleet, name in members:
        h = fleet.host(name)
        hosts.append({"name": h.name, "target": h.target, "labels": {**h.labels, "release": h.spec.release},
                      "ssh": {"user": "root", "identity_file": str(fleet.identity_file),
                              "known_hosts": str(fleet.known_hosts)}})
    path.write_text(yaml.safe_dump({"hosts": hosts}, sort_keys=False, default_flow_style=None))
    return path


# ---------------------------------------------------------------------------------------------
# the scenario written into each host
# ---------------------------------------------------------------------------------------------

def crashloop_threshold() -> int:
    """`crashloop_min_restarts` of the built-in systemd pack, as the product loads it."""
    from auditor.judge.rules import load_rules

    return int(load_rules(builtin=True).packs["systemd"].params["crashloop_min_restarts"])


def _instance_id(name: str) -> str:
    return "i-0" + hashlib.sha256(name.encode()).hexdigest()[:16]


def _write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    os.chmod(path, mode)


def _enable(root: Path, unit: str) -> None:
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / unit
    if not link.is_symlink():
        os.symlink(f"/etc/systemd/system/{unit}", link)


def _install_scenario(spec: HostSpec, root: Path) -> None:
    """Write the incident scenario (FIELD-NOTES §1, §6) into a host's root filesystem."""
    p = PAYLOAD
    _write(root / "etc/systemd/system/ecs.service", (p / "ecs.service").read_text())
    _write(root / "usr/libexec/amazon-ecs-init", (p / "amazon-ecs-init").read_text(), 0o755)
    _write(root / "etc/ecs/ecs.config", (p / "ecs.config").read_text())
    (root / "var/log/ecs").mkdir(parents=True, exist_ok=True)
    _write(root / "etc/systemd/system" / EXTRA_UNIT, (p / EXTRA_UNIT).read_text())
    for unit in spec.enabled_units:
        _enable(root, unit)

    kubelet = (p / f"kubelet-{spec.kubelet}").read_bytes()
    _write(root / "usr/local/bin/kubelet", kubelet, 0o755)
    digest = hashlib.sha256(kubelet).hexdigest()
    url = EKS_KUBELET_URL if spec.kubelet == "eks" else UPSTREAM_KUBELET_URL
    user_data = (
        "#!/bin/bash\n"
        "# node bootstrap (user data)\n"
        "set -euxo pipefail\n"
        f"KUBELET_URL={url}\n"
        'curl -sSL --retry 5 -o /usr/local/bin/kubelet "$KUBELET_URL"\n'
        'curl -sSL --retry 5 -o /tmp/kubelet.sha256 "$KUBELET_URL.sha256"\n'
        'echo "$(cat /tmp/kubelet.sha256)  /usr/local/bin/kubelet" | sha256sum -c -\n'
        "chmod +x /usr/local/bin/kubelet\n"
        "/usr/local/bin/kubelet --version\n"
    )
    version = "Kubernetes v1.29.3-eks-ae9a62a" if spec.kubelet == "eks" else "Kubernetes v1.29.3"
    _write(root / "var/lib/cloud/instance/user-data.txt", user_data, 0o600)
    _write(root / "var/log/cloud-init-output.log", (
        "Cloud-init v. 23.4.4-0ubuntu0~20.04.1 running 'init' at Fri, 19 Apr 2024 10:02:11 +0000. Up 6.12 seconds.\n"
        "Cloud-init v. 23.4.4-0ubuntu0~20.04.1 running 'modules:final' at Fri, 19 Apr 2024 10:02:19 +0000. "
        "Up 14.40 seconds.\n"
        f"+ KUBELET_URL={url}\n"
        f"+ curl -sSL --retry 5 -o /usr/local/bin/kubelet {url}\n"
        f"+ curl -sSL --retry 5 -o /tmp/kubelet.sha256 {url}.sha256\n"
        "++ cat /tmp/kubelet.sha256\n"
        f"+ echo '{digest}  /usr/local/bin/kubelet'\n"
        "+ sha256sum -c -\n"
        "/usr/local/bin/kubelet: OK\n"
        "+ chmod +x /usr/local/bin/kubelet\n"
        "+ /usr/local/bin/kubelet --version\n"
        f"{version}\n"
        "Cloud-init v. 23.4.4-0ubuntu0~20.04.1 finished at Fri, 19 Apr 2024 10:02:31 +0000. Up 26.02 seconds\n"
    ), 0o640)

    iid = _instance_id(spec.name)
    data = {
        "v1": {
            "availability_zone": spec.az, "cloud_name": "aws", "instance_id": iid,
            "instance_type": "p4d.24xlarge", "local_hostname": spec.name, "platform": "ec2",
            "region": REGION, "distro": "debian", "distro_release": spec.release,
        },
        "ds": {"meta_data": {
            "ami-id": AMI_ID, "instance-id": iid, "instance-type": "p4d.24xlarge",
            "local-hostname": spec.name, "local-ipv4": spec.address,
            "placement": {"availability-zone": spec.az, "availability-zone-id": AZ_IDS[spec.az],
                          "region": REGION},
        }},
    }
    _write(root / "var/lib/cloud/data/instance-data.json", json.dumps(data, indent=2) + "\n")
    _write(root / "etc/tmpfiles.d/cloud-init-fleet.conf", (p / "cloud-init-fleet.conf").read_text())
    _write(root / "etc/image-id", (
        f'image_name="Deep Learning Base OSS Nvidia Driver AMI (Debian {DEBIAN_VERSION[spec.release]}) '
        'Version 72.1"\n'
        'image_version="72.1"\nimage_arch="x86_64"\n'
        f'image_file="{AMI_ID}"\nimage_date="20240419"\nrecipe_name="dlami-base"\n'
    ))


_TERM_INSTALLED = False


def _install_term_handler() -> None:
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt (when nobody else handles them).

    pytest then stops the session and runs fixture finalizers; atexit handlers run too.
    """
    global _TERM_INSTALLED
    if _TERM_INSTALLED or threading.current_thread() is not threading.main_thread():
        return

    def _raise(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _raise)
    _TERM_INSTALLED = True
