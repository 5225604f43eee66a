"""The Kubernetes-node pack (rules/k8s.yaml): each trigger laid down as a node has it, on fleet host a1
(the real probe over SSH, the real CLI), on image roots (image://), and /proc/swaps from real captures.

The fleet's containers share this machine's kernel: the live values the pack reads (ip_forward, the
ephemeral port range, /proc/swaps) are this machine's, read here from /proc, never assumed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor.cli import main
from auditor.context import Env
from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from auditor.models import Finding
from tests.unit.test_parsers_real import REAL, facts_of

# the rules an image (or any root's files) can trigger: all but k8s.swap-enabled, which reads /proc/swaps
STATIC_RULES = {"k8s.ip-forward-off", "k8s.cgroup-driver-mismatch", "k8s.coredns-loop-stub-resolver",
                "k8s.runtime-tasksmax-low", "k8s.runtime-nofile-limit", "k8s.ports-not-reserved",
                "k8s.no-resource-reservations", "k8s.container-log-rotation-missing"}
CONTAINERD_UNIT = "etc/systemd/system/containerd.service"
TASKS_DROPIN = "etc/systemd/system/containerd.service.d/10-tasks.conf"
NOFILE_DROPIN = "etc/systemd/system/containerd.service.d/20-nofile.conf"
KUBEADM_CONFIG = "var/lib/kubelet/config.yaml"
PORTS_FIX = "etc/sysctl.d/99-zz-kubernetes.conf"

# one node's worth of the configurations that broke real nodes, all at once
TRIGGERS: dict[str, str] = {
    # a hardening baseline (dev-sec sysctl-01) and a tuning file that widens the ephemeral range
    "etc/sysctl.d/99-hardening.conf": "# CIS / dev-sec linux-baseline\nnet.ipv4.ip_forward = 0\n",
    "etc/sysctl.d/60-ephemeral-ports.conf": "net.ipv4.ip_local_port_range = 1024 65000\n",
    # kubeadm's kubelet configuration (systemd driver), without reservations, resolvConf or failSwapOn
    KUBEADM_CONFIG: (
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "authentication:\n  anonymous:\n    enabled: false\n  webhook:\n    enabled: true\n"
        "cgroupDriver: systemd\nclusterDNS:\n- 10.96.0.10\nclusterDomain: cluster.local\n"
        "containerRuntimeEndpoint: unix:///var/run/containerd/containerd.sock\n"
        "staticPodPath: /etc/kubernetes/manifests\n"),
    # `containerd config default` before the systemd driver is switched on
    "etc/containerd/config.toml": (
        "version = 2\n\n[plugins]\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n"
        "    [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n      default_runtime_name = \"runc\"\n"
        "      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n"
        "        runtime_type = \"io.containerd.runc.v2\"\n"
        "        [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n"
        "          SystemdCgroup = false\n"),
    "etc/docker/daemon.json": '{\n  "log-driver": "json-file",\n  "live-restore": true\n}\n',
    # systemd-resolved's stub file (the fleet boots with --resolv-conf=off: the file is the host's own)
    "etc/resolv.conf": ("# This is /run/systemd/resolve/stub-resolv.conf managed by man:systemd-resolved(8).\n"
                        "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch ec2.internal\n"),
    "etc/cni/net.d/10-aws.conflist": json.dumps({
        "cniVersion": "0.4.0", "name": "aws-cni", "disableCheck": True,
        "plugins": [{"type": "aws-cni", "name": "aws-cni"},
                    {"type": "portmap", "capabilities": {"portMappings": True}}]}),
    CONTAINERD_UNIT: ("[Unit]\nDescription=containerd container runtime (stub)\nAfter=network.target\n\n"
                      "[Service]\nExecStart=/bin/sleep infinity\nDelegate=yes\nKillMode=process\n\n"
                      "[Install]\nWantedBy=multi-user.target\n"),
    TASKS_DROPIN: "[Service]\nTasksMax=512\n",
    NOFILE_DROPIN: "[Service]\nLimitNOFILE=infinity\n",
}

# the fixes, laid over the triggers: what a healthy node has
FIXES: dict[str, str] = {
    PORTS_FIX: ("net.ipv4.ip_forward = 1\n"
                "net.ipv4.ip_local_reserved_ports = 2703,9808-9809,10249-10250,10256,61678-61679,30000-32767\n"),
    KUBEADM_CONFIG: TRIGGERS[KUBEADM_CONFIG] + (
        "resolvConf: /run/systemd/resolve/resolv.conf\n"
        "kubeReserved:\n  cpu: 70m\n  memory: 442Mi\n  ephemeral-storage: 1Gi\n"
        "systemReserved:\n  cpu: 100m\n  memory: 100Mi\n"
        "evictionHard:\n  memory.available: 100Mi\n  nodefs.available: 10%\n"
        "failSwapOn: false\nmemorySwap:\n  swapBehavior: LimitedSwap\n"),
    "etc/containerd/config.toml": TRIGGERS["etc/containerd/config.toml"].replace("SystemdCgroup = false",
                                                                                 "SystemdCgroup = true"),
    "etc/docker/daemon.json": ('{\n  "log-driver": "json-file",\n  "log-opts": {"max-size": "10m", "max-file": "10"},\n'
                               '  "live-restore": true\n}\n'),
    TASKS_DROPIN: "[Service]\nTasksMax=infinity\n",
    NOFILE_DROPIN: "[Service]\nLimitNOFILE=1048576\n",
}

# EKS (AL2) lays a node out like this: kubelet-config.json with kubeReserved, containerd on systemd, the
# VPC resolver, the VPC CNI, containerd's unit without task limit
EKS_NODE: dict[str, str] = {
    "etc/kubernetes/kubelet/kubelet-config.json": json.dumps({
        "kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "address": "0.0.0.0", "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True}},
        "cgroupDriver": "systemd", "clusterDomain": "cluster.local", "clusterDNS": ["10.100.0.10"],
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
        "kubeReserved": {"cpu": "70m", "ephemeral-storage": "1Gi", "memory": "442Mi"},
        "featureGates": {"RotateKubeletServerCertificate": True}, "serverTLSBootstrap": True}, indent=2),
    "etc/containerd/config.toml": (
        "version = 2\nroot = \"/var/lib/containerd\"\nstate = \"/run/containerd\"\n\n[grpc]\n"
        "address = \"/run/containerd/containerd.sock\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
        "default_runtime_name = \"runc\"\ndiscard_unpacked_layers = true\n\n"
        "[plugins.\"io.containerd.grpc.v1.cri\"]\n"
        "sandbox_image = \"602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/pause:3.5\"\n\n"
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n\n"
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\nSystemdCgroup = true\n"),
    "etc/resolv.conf": "nameserver 10.0.0.2\nsearch ec2.internal\n",
    "etc/cni/net.d/10-aws.conflist": TRIGGERS["etc/cni/net.d/10-aws.conflist"],
    "etc/sysctl.d/99-eks-reserved-ports.conf":
        "net.ipv4.ip_local_reserved_ports = 2703,9808-9809,10249-10250,10256,61678-61679\n",
    "usr/lib/systemd/system/containerd.service": (
        "[Unit]\nDescription=containerd container runtime\nAfter=network.target local-fs.target\n\n[Service]\n"
        "ExecStartPre=-/sbin/modprobe overlay\nExecStart=/usr/bin/containerd\nType=notify\nDelegate=yes\n"
        "KillMode=process\nRestart=always\nRestartSec=5\nLimitNPROC=infinity\nLimitCORE=infinity\n"
        "LimitNOFILE=1048576\nTasksMax=infinity\nOOMScoreAdjust=-999\n\n[Install]\nWantedBy=multi-user.target\n"),
}


def k8s_findings(snap: dict[str, Any]) -> dict[str, list[Finding]]:
    """The k8s pack's findings on one snapshot, judged with every built-in pack loaded (leads_to resolves)."""
    out: dict[str, list[Finding]] = {}
    for f in Judge(load_rules(builtin=True)).judge(snap):
        if f.rule.startswith("k8s."):
            assert f.evidence.get("status") not in ("unknown", "error"), (f.rule, f.title)
            out.setdefault(f.rule, []).append(f)
    return out


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def image_root(root: Path, files: dict[str, str], kubelet: bool = True) -> Path:
    """An unbooted Debian 12 root (os-release, systemd 252's shared library), `files`, and (a node) a
    kubelet binary in /usr/bin."""
    write(root, {"etc/os-release": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
                 "usr/lib/systemd/libsystemd-shared-252.so": "", **files})
    if kubelet:
        (root / "usr/bin").mkdir(parents=True, exist_ok=True)
        (root / "usr/bin/kubelet").write_text("#!/bin/sh\necho 'Kubernetes v1.29.3-eks-ae9a62a'\n")
        (root / "usr/bin/kubelet").chmod(0o755)
    return root


def collect(targets: list[str], out_dir: Path, inventory: Path | None = None) -> dict[str, dict[str, Any]]:
    """`ami-auditor collect` (the real CLI) → snapshots by file stem."""
    out = io.StringIO()
    argv = ["collect", *(["-i", str(inventory)] if inventory else []), *targets, "-o", str(out_dir)]
    assert main(argv, Env(out, io.StringIO())) == 0, out.getvalue()
    return {p.stem: json.loads(p.read_text()) for p in out_dir.glob("*.json")}


def image_snapshot(root: Path) -> dict[str, Any]:
    [snap] = collect([f"image://{root}"], root.parent / f"{root.name}-snaps").values()
    return snap


def with_swaps(snap: dict[str, Any], capture: str) -> dict[str, Any]:
    """`snap` with the proc facts of a real /proc/swaps capture (the live value this kernel cannot give)."""
    out = json.loads(json.dumps(snap))
    out["facts"]["proc"] = facts_of(REAL / "proc_swaps" / f"{capture}.txt")
    out["not_applicable"] = {k: v for k, v in (out.get("not_applicable") or {}).items() if k != "proc"}
    return out


def test_static_triggers_fire_on_an_image_root_with_evidence_naming_files_and_values(tmp_path: Path) -> None:
    fired = k8s_findings(image_snapshot(image_root(tmp_path / "node", TRIGGERS)))
    assert set(fired) == STATIC_RULES, {r: [f.title for f in fs] for r, fs in fired.items()}
    assert all(len(fs) == 1 for fs in fired.values())
    [fwd] = fired["k8s.ip-forward-off"]
    assert (fwd.evidence["declared"], fwd.evidence["declared_in"]) == ("0", "/etc/sysctl.d/99-hardening.conf")
    assert fwd.evidence["live"] is None and fwd.severity == "critical"  # an image has no live value
    [cg] = fired["k8s.cgroup-driver-mismatch"]
    assert (cg.item, cg.evidence["kubelet_driver"], cg.evidence["runtime_driver"]) == (
        "containerd", "systemd", "cgroupfs")
    assert cg.evidence["runtime_config"] == "/etc/containerd/config.toml" and cg.evidence["runtime_setting"] is False
    assert cg.evidence["kubelet_config"] == "/var/lib/kubelet/config.yaml"
    [dns] = fired["k8s.coredns-loop-stub-resolver"]
    assert dns.evidence["loopback"] == ["127.0.0.53"] and dns.evidence["kubelet_resolv_conf"] is None
    [tasks] = fired["k8s.runtime-tasksmax-low"]
    assert (tasks.item, tasks.evidence["declared"], tasks.evidence["live"]) == ("containerd.service", "512", None)
    assert tasks.evidence["dropins"] == ["/" + TASKS_DROPIN, "/" + NOFILE_DROPIN]
    [nofile] = fired["k8s.runtime-nofile-limit"]
    assert (nofile.item, nofile.evidence["declared"]) == ("containerd.service", "infinity")
    [ports] = fired["k8s.ports-not-reserved"]
    assert ports.item == "declared" and ports.evidence["range"] == [1024, 65000]
    assert ports.evidence["range_file"] == "/etc/sysctl.d/60-ephemeral-ports.conf"
    assert ports.evidence["unreserved_ports"] == [2703, 9808, 9809, 10249, 10250, 10256, 61678, 61679]
    assert ports.evidence["covers_nodeports"] is True
    [reserve] = fired["k8s.no-resource-reservations"]
    assert reserve.evidence["kubelet_config"] == "/var/lib/kubelet/config.yaml"
    assert reserve.evidence["kube_reserved"] == reserve.evidence["system_reserved"] == {}
    [logs] = fired["k8s.container-log-rotation-missing"]
    assert (logs.evidence["daemon_json"], logs.evidence["log_driver"], logs.evidence["log_max_size"]) == (
        "/etc/docker/daemon.json", "json-file", None)


def test_the_fixes_clear_every_static_trigger_on_an_image_root(tmp_path: Path) -> None:
    root = image_root(tmp_path / "node", TRIGGERS)
    write(root, FIXES)
    assert k8s_findings(image_snapshot(root)) == {}


def test_healthy_node_layouts_and_a_plain_host_get_no_k8s_finding(tmp_path: Path) -> None:
    assert k8s_findings(image_snapshot(image_root(tmp_path / "eks", EKS_NODE))) == {}
    kubeadm = {**FIXES, "etc/containerd/config.toml": FIXES["etc/containerd/config.toml"],
               "etc/cni/net.d/10-calico.conflist": json.dumps({"cniVersion": "0.3.1", "name": "k8s-pod-network",
                                                               "plugins": [{"type": "calico"}]}),
               "etc/resolv.conf": "nameserver 192.168.122.1\n"}
    del kubeadm[TASKS_DROPIN], kubeadm[NOFILE_DROPIN]  # no containerd unit in this image
    assert k8s_findings(image_snapshot(image_root(tmp_path / "kubeadm", kubeadm))) == {}
    # every trigger file, but no kubelet and no CNI configuration: not a node, nothing to say
    plain = {k: v for k, v in TRIGGERS.items() if not k.startswith("etc/cni/")}
    assert k8s_findings(image_snapshot(image_root(tmp_path / "plain", plain, kubelet=False))) == {}


def test_each_rule_keys_on_its_own_setting(tmp_path: Path) -> None:
    snap = image_snapshot(image_root(tmp_path / "node", TRIGGERS))
    config = snap["facts"]["config"]

    def fired_after(**changes: Any) -> set[str]:
        changed = json.loads(json.dumps(snap))
        for path, value in changes.items():
            area, key = path.split("__")
            changed["facts"]["config"][area][key] = value
        return set(k8s_findings(changed))

    # a kubelet told to use the real upstream list: no loop
    assert "k8s.coredns-loop-stub-resolver" not in fired_after(kubelet__resolv_conf="/run/systemd/resolve/resolv.conf")
    # a partial reservation is not "no reservation"
    assert "k8s.no-resource-reservations" not in fired_after(kubelet__system_reserved={"memory": "100Mi"})
    # docker counts only when containerd has no CRI settings: then docker's default cgroupfs meets systemd
    no_cri = fired_after(containerd__systemd_cgroup=None, containerd__runtimes=[])
    assert "k8s.cgroup-driver-mismatch" in no_cri
    assert "k8s.cgroup-driver-mismatch" not in fired_after(containerd__systemd_cgroup=None, containerd__runtimes=[],
                                                            docker__cgroup_driver="systemd")
    # the ports a node needs reserved: 10250 alone left out still fires, for 10250 only
    declared = dict(config["sysctl_declared"], **{
        "net.ipv4.ip_local_reserved_ports": "2703,9808-9809,10249,10256,61678-61679,30000-32767"})
    changed = json.loads(json.dumps(snap))
    changed["facts"]["config"]["sysctl_declared"] = declared
    [ports] = k8s_findings(changed)["k8s.ports-not-reserved"]
    assert ports.evidence["unreserved_ports"] == [10250] and ports.evidence["covers_nodeports"] is False
    # a live 0 counts on a configured node only (a kubelet binary alone is a node not yet joined)
    live_off = json.loads(json.dumps(snap))
    live_off["facts"]["kernel"]["sysctls"]["net.ipv4.ip_forward"] = "0"
    live_off["facts"]["config"]["sysctl_declared"]["net.ipv4.ip_forward"] = "1"
    [fwd] = k8s_findings(live_off)["k8s.ip-forward-off"]
    assert (fwd.evidence["live"], fwd.evidence["declared"]) == ("0", "1") and "now" in fwd.title
    live_off["facts"]["config"]["kubelet"]["path"], live_off["facts"]["config"]["cni"]["files"] = None, []
    assert "k8s.ip-forward-off" not in k8s_findings(live_off)
    # the kernel's default range covers none of them
    changed["facts"]["config"]["sysctl_declared"] = dict(config["sysctl_declared"],
                                                         **{"net.ipv4.ip_local_port_range": "32768 60999"})
    assert "k8s.ports-not-reserved" not in k8s_findings(changed)


@pytest.mark.parametrize("capture", sorted(p.stem for p in (REAL / "proc_swaps").glob("*.txt")))
def test_real_proc_swaps_fire_swap_rule_unless_the_kubelet_allows_swap(capture: str, tmp_path: Path) -> None:
    """CAP: /proc/swaps of kubelets that refused to start, with the kubelet configuration of the trigger
    (failSwapOn unset: true) and of the fix (failSwapOn false, LimitedSwap)."""
    root = image_root(tmp_path / "node", TRIGGERS)
    snap = with_swaps(image_snapshot(root), capture)
    [swap] = k8s_findings(snap)["k8s.swap-enabled"]
    assert swap.evidence["swaps"] == facts_of(REAL / "proc_swaps" / f"{capture}.txt")["swaps"] != []
    assert swap.evidence["fail_swap_on"] is None and swap.severity == "high"
    write(root, FIXES)
    fixed = with_swaps(image_snapshot(root), capture)
    assert fixed["facts"]["config"]["kubelet"]["fail_swap_on"] is False
    assert "k8s.swap-enabled" not in k8s_findings(fixed)


# --- R: fleet host a1 ---------------------------------------------------------------------------------------

WATCHED = ["etc/sysctl.d", "etc/systemd/system", "etc/resolv.conf", "etc/containerd", "etc/docker", "etc/cni",
           "var/lib/kubelet", "etc/kubernetes"]


def _manifest(root: Path) -> dict[str, tuple[Any, ...]]:
    """Type, mode, link target and content hash of every watched path (what the restore must give back)."""
    out: dict[str, tuple[Any, ...]] = {}
    for rel in WATCHED:
        top = root / rel
        for p in [top] if not top.is_dir() or top.is_symlink() else [top, *top.rglob("*")]:
            if not os.path.lexists(p):
                continue
            st = p.lstat()
            key = str(p.relative_to(root))
            if p.is_symlink():
                out[key] = ("link", os.readlink(p))
            elif p.is_dir():
                out[key] = ("dir", st.st_mode)
            else:
                out[key] = ("file", st.st_mode, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def _live(key: str) -> str | None:
    path = Path("/proc/sys") / key.replace(".", "/")
    return path.read_text().strip() if path.exists() else None


def _live_swaps() -> list[str]:
    return [line.split()[0] for line in Path("/proc/swaps").read_text().splitlines()[1:] if line.strip()]


def _expected_live(configured: bool, kubelet_allows_swap: bool = False) -> set[str]:
    """Rules this machine's own kernel (every container's) makes fire on a node, read from /proc here.
    Live values count on a configured node (a kubelet or CNI configuration), not on a bare kubelet binary."""
    out: set[str] = set()
    if not configured:
        return out
    if _live("net.ipv4.ip_forward") == "0":
        out.add("k8s.ip-forward-off")
    low, high = (int(x) for x in (_live("net.ipv4.ip_local_port_range") or "32768 60999").split())
    reserved = _live("net.ipv4.ip_local_reserved_ports") or ""
    ports = [2703, 9808, 9809, 10249, 10250, 10256, 61678, 61679]
    if any(low <= p <= high and str(p) not in reserved for p in ports) or (low <= 32767 and high >= 30000):
        out.add("k8s.ports-not-reserved")
    if _live_swaps() and not kubelet_allows_swap:
        out.add("k8s.swap-enabled")
    return out


@pytest.fixture
def a1(fleet, tmp_path: Path) -> Iterator[Path]:
    """Fleet host a1's root; afterwards a1 is put back as it was (checked path by path)."""
    root = fleet.host("a1").root
    before = _manifest(root)
    resolv = root / "etc/resolv.conf"
    assert resolv.is_file() and not resolv.is_symlink()
    resolv_text, resolv_mode = resolv.read_bytes(), resolv.stat().st_mode
    new_dirs = [d for d in ("etc/systemd/system/containerd.service.d", "etc/containerd", "etc/docker",
                            "etc/cni/net.d", "etc/cni", "var/lib/kubelet") if not (root / d).exists()]
    try:
        yield root
    finally:
        fleet.exec("a1", ["systemctl", "stop", "containerd.service"])
        for rel in {*TRIGGERS, *FIXES} - {"etc/resolv.conf"}:
            (root / rel).unlink(missing_ok=True)
        for rel in new_dirs:  # deepest first; rmdir fails if anything else was left in one
            if (root / rel).is_dir():
                (root / rel).rmdir()
        resolv.write_bytes(resolv_text)
        os.chmod(resolv, resolv_mode)
        fleet.exec("a1", ["systemctl", "daemon-reload"], check=True)
        fleet.exec("a1", ["systemctl", "reset-failed", "containerd.service"])
        assert _manifest(root) == before
        assert "containerd.service" not in fleet.exec("a1", ["systemctl", "list-units", "--all", "--no-legend",
                                                              "containerd.service"]).stdout


def _collect_a1(fleet, out_dir: Path) -> dict[str, Any]:
    inventory = yaml.safe_load(Path(fleet.inventory_path).read_text())
    inventory["hosts"] = [h for h in inventory["hosts"] if h["name"] == "a1"]
    out_dir.mkdir(parents=True)
    (out_dir / "inventory.yaml").write_text(yaml.safe_dump(inventory))
    snap = collect([], out_dir / "snaps", inventory=out_dir / "inventory.yaml")["a1"]
    assert snap["errors"] == {}, snap["errors"]
    return snap


@pytest.mark.fleet
def test_fleet_host_a1_triggers_fire_with_evidence_and_fixes_clear_them(fleet, a1: Path, tmp_path: Path) -> None:
    root = a1
    # a1 as booted: the EKS kubelet in /usr/local/bin, no configuration yet (a node before it joins): the
    # declared files say nothing wrong and live values wait for a configured node
    stock = _collect_a1(fleet, tmp_path / "stock")
    assert any(b["name"] == "kubelet" and b["found"] for b in stock["facts"]["binaries"])
    assert stock["facts"]["config"]["kubelet"]["path"] is None and stock["facts"]["config"]["cni"]["files"] == []
    assert k8s_findings(stock) == {}

    write(root, TRIGGERS)
    fleet.exec("a1", ["systemctl", "daemon-reload"], check=True)
    fleet.exec("a1", ["systemctl", "start", "containerd.service"], check=True)
    shown = fleet.systemctl_show("a1", "containerd.service", ["ActiveState", "TasksMax", "LimitNOFILE"])
    assert shown["ActiveState"] == "active" and shown["TasksMax"] == "512", shown
    snap = _collect_a1(fleet, tmp_path / "triggers")
    fired = k8s_findings(snap)
    assert set(fired) == STATIC_RULES | _expected_live(configured=True), {
        r: [f.title for f in fs] for r, fs in fired.items()}
    [fwd] = fired["k8s.ip-forward-off"]
    assert (fwd.evidence["declared"], fwd.evidence["live"]) == ("0", _live("net.ipv4.ip_forward"))
    assert fwd.evidence["declared_in"] == "/etc/sysctl.d/99-hardening.conf"
    [tasks] = fired["k8s.runtime-tasksmax-low"]
    assert (tasks.item, tasks.evidence["live"], tasks.evidence["declared"]) == ("containerd.service", 512, "512")
    assert "may run at most 512 tasks" in tasks.title and "/" + TASKS_DROPIN in tasks.title
    [nofile] = fired["k8s.runtime-nofile-limit"]
    assert nofile.evidence["live_infinite"] is True and nofile.evidence["declared"] == "infinity"
    [cg] = fired["k8s.cgroup-driver-mismatch"]
    assert (cg.evidence["kubelet_driver"], cg.evidence["runtime_driver"]) == ("systemd", "cgroupfs")
    [dns] = fired["k8s.coredns-loop-stub-resolver"]
    assert dns.evidence["nameservers"] == ["127.0.0.53"]
    ports = {f.item: f for f in fired["k8s.ports-not-reserved"]}
    assert ports["declared"].evidence["range"] == [1024, 65000]
    assert 10250 in ports["declared"].evidence["unreserved_ports"]
    [logs] = fired["k8s.container-log-rotation-missing"]
    assert logs.evidence["daemon_json"] == "/etc/docker/daemon.json"
    # the kubelet half of k8s.swap-enabled (failSwapOn unset) on this host, /proc/swaps from a real capture
    [swap] = k8s_findings(with_swaps(snap, "kubelet-ubuntu2204-swapfile"))["k8s.swap-enabled"]
    assert swap.evidence["swaps"] == ["/swapfile"] and swap.evidence["fail_swap_on"] is None

    write(root, FIXES)
    fleet.exec("a1", ["systemctl", "daemon-reload"], check=True)
    fleet.exec("a1", ["systemctl", "restart", "containerd.service"], check=True)
    fixed = _collect_a1(fleet, tmp_path / "fixes")
    limits = {row["name"]: row for row in fixed["facts"]["systemd"]["limits"]}
    assert limits["containerd.service"]["tasks_max_infinite"] is True
    assert limits["containerd.service"]["limit_nofile"] == limits["containerd.service"]["limit_nofile_soft"] == 1048576
    fixed_found = k8s_findings(fixed)
    assert set(fixed_found) == _expected_live(configured=True, kubelet_allows_swap=True), {
        r: [f.title for f in fs] for r, fs in fixed_found.items()}
    for f in fixed_found.get("k8s.ip-forward-off", []):  # only this kernel's value is left
        assert (f.evidence["declared"], f.evidence["declared_in"]) == ("1", "/" + PORTS_FIX)
    assert "k8s.swap-enabled" not in k8s_findings(with_swaps(fixed, "kubelet-ubuntu2204-swapfile"))
