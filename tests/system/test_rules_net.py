"""The networking/CNI pack (rules/net.yaml), proven three ways:

- R: on fleet host a2, every configuration trigger laid down as a real node has it (networkd enabled by its
  symlink, udev's 99-default.link, a dummy amazon-ec2-net-utils .deb installed with dpkg, a hardening
  sysctl.d file, CNI conflists, no br_netfilter in modules-load.d), one collect with the real CLI → every
  rule fires naming its file, unit or value; every fix → one collect → none; a2 restored as it was.
- image: the same static triggers in an unbooted root (image://) fire before launch; the fixes clear them.
- CAP: kernel-log lines real nodes printed (tests/data/real/kernel_log) through the probe's filter and the
  parser, then the rules: the fleet shares this machine's kernel, so its log and live sysctls are no proof.
A healthy node (fleet a1, the recorded EKS/kubeadm/DLAMI outputs) and a plain host get no net finding.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor.cli import main
from auditor.collect.parsers.network import parse_kernel_log
from auditor.context import Env
from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from auditor.models import Finding, HostSpec
from auditor.run.live_hosts import collect_host
from tests.paths import DATA
from tests.probe_shell import probe_filter
from tests.unit.test_image_transport import make_root
from tests.unit.test_parsers_real import read_capture
from tests.unit.test_rules_builtin import recorded

REAL_LOG = DATA / "real" / "kernel_log"
STATIC_RULES = {"net.networkd-manages-foreign-rules", "net.mac-address-policy-persistent-on-veth",
                "net.ec2-net-utils-vs-vpc-cni", "net.rp-filter-strict-with-vpc-cni", "net.br-netfilter-missing"}

# Debian 12's udev ships this as /usr/lib/systemd/network/99-default.link (as quoted from Ubuntu 22.04 in
# aws/amazon-vpc-cni-k8s#3155); the fleet's minbase root has no udev, so the test lays it down.
DEFAULT_LINK = """# This file is part of systemd (udev).
[Match]
OriginalName=*

[Link]
NamePolicy=keep kernel database onboard slot path
AlternativeNamesPolicy=database onboard slot path
MACAddressPolicy=persistent
"""
# misc/10-aws.conflist of aws/amazon-vpc-cni-k8s with its placeholders filled as the aws-node init does
AWS_CONFLIST = {"cniVersion": "0.4.0", "name": "aws-cni", "disableCheck": True, "plugins": [
    {"name": "aws-cni", "type": "aws-cni", "vethPrefix": "eni", "mtu": "9001", "podSGEnforcingMode": "strict",
     "pluginLogFile": "/var/log/aws-routed-eni/plugin.log", "pluginLogLevel": "DEBUG"},
    {"name": "egress-cni", "type": "egress-cni", "mtu": "9001", "enabled": "false"},
    {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True}]}
CALICO_CONFLIST = {"name": "k8s-pod-network", "cniVersion": "0.3.1", "plugins": [
    {"type": "calico", "log_level": "info", "datastore_type": "kubernetes", "mtu": 0,
     "ipam": {"type": "calico-ipam"}, "policy": {"type": "k8s"},
     "kubernetes": {"kubeconfig": "/etc/cni/net.d/calico-kubeconfig"}},
    {"type": "portmap", "snat": True, "capabilities": {"portMappings": True}},
    {"type": "bandwidth", "capabilities": {"bandwidth": True}}]}
FLANNEL_CONFLIST = {"name": "cbr0", "cniVersion": "0.3.1", "plugins": [
    {"type": "flannel", "delegate": {"hairpinMode": True, "isDefaultGateway": True}},
    {"type": "portmap", "capabilities": {"portMappings": True}}]}
POLICY_ROUTES_UNIT = """[Unit]
Description=Set up policy routes for %I (test stub of amazon-ec2-net-utils)
[Service]
Type=oneshot
ExecStart=/bin/true
"""

# what a node carries, relative to its root: path → text (None: a symlink, below)
TRIGGERS: dict[str, str] = {
    "etc/cni/net.d/10-aws.conflist": json.dumps(AWS_CONFLIST, indent=2) + "\n",
    "etc/cni/net.d/10-calico.conflist": json.dumps(CALICO_CONFLIST, indent=2) + "\n",
    "etc/cni/net.d/10-flannel.conflist": json.dumps(FLANNEL_CONFLIST, indent=2) + "\n",
    "usr/lib/systemd/network/99-default.link": DEFAULT_LINK,
    # a CIS/dev-sec style hardening file (sysctl-02): strict reverse-path filtering
    "etc/sysctl.d/99-hardening.conf": "net.ipv4.conf.all.rp_filter = 1\nnet.ipv4.conf.default.rp_filter = 1\n",
}
NETWORKD_WANTS = "etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
NETWORKD_MASK = "etc/systemd/system/systemd-networkd.service"
FIXES: dict[str, str] = {
    "etc/systemd/networkd.conf.d/80-cni.conf":
        "[Network]\nManageForeignRoutingPolicyRules=no\nManageForeignRoutes=no\n",
    "etc/systemd/network/99-default.link.d/99-no-mac-policy.conf": "[Link]\nMACAddressPolicy=none\n",
    "etc/sysctl.d/99-zz-kubernetes.conf": "net.ipv4.conf.all.rp_filter = 2\nnet.ipv4.conf.default.rp_filter = 2\n",
    "etc/modules-load.d/k8s.conf": "overlay\nbr_netfilter\n",
}
POLICY_ROUTES_MASK = "etc/systemd/system/policy-routes@.service"


def net_findings(snapshot: dict[str, Any]) -> dict[str, list[Finding]]:
    """The net pack's findings that fired (not the could-not-be-evaluated ones), by rule."""
    out: dict[str, list[Finding]] = {}
    for f in Judge(load_rules()).judge(snapshot):
        if f.rule.startswith("net.") and f.evidence.get("status") not in ("unknown", "error"):
            out.setdefault(f.rule, []).append(f)
    return out


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def dummy_deb(out_dir: Path) -> Path:
    """amazon-ec2-net-utils as a real .deb (dpkg-deb --build) shipping its per-ENI unit, nothing else."""
    pkg = out_dir / "amazon-ec2-net-utils"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN/control").write_text(
        "Package: amazon-ec2-net-utils\nVersion: 2.5.0-1\nArchitecture: all\nMaintainer: ami-auditor tests <t@t>\n"
        "Description: test stub of amazon-ec2-net-utils (its policy-routes@.service only)\n")
    unit = pkg / "usr/lib/systemd/system/policy-routes@.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(POLICY_ROUTES_UNIT)
    deb = out_dir / "amazon-ec2-net-utils_2.5.0-1_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg), str(deb)], check=True,
                   capture_output=True)
    return deb


# --- image roots (before launch) -----------------------------------------------------------------------------

def image_with_triggers(root: Path, node: bool = True) -> Path:
    make_root(root)  # os-release, systemd 252, a dpkg database, /usr/local/bin/kubelet
    if not node:
        (root / "usr/local/bin/kubelet").unlink()
    write(root, {k: v for k, v in TRIGGERS.items() if node or not k.startswith("etc/cni/")})
    write(root, {"usr/lib/systemd/system/systemd-networkd.service":
                 "[Service]\nExecStart=/lib/systemd/systemd-networkd\n[Install]\nWantedBy=multi-user.target\n",
                 "usr/lib/systemd/system/policy-routes@.service": POLICY_ROUTES_UNIT})
    os.symlink("/usr/lib/systemd/system/systemd-networkd.service", root / NETWORKD_WANTS)
    with (root / "var/lib/dpkg/status").open("a") as status:
        status.write("Package: amazon-ec2-net-utils\nStatus: install ok installed\nArchitecture: all\n"
                     "Version: 2.5.0-1\nMaintainer: x\nDescription: stub\n\n")
    return root


def image_snapshot(root: Path) -> dict[str, Any]:
    result = collect_host(HostSpec(root.name, f"image://{root}"), binaries=["kubelet"])
    assert result.status == "ok", result.error
    return result.snapshot


def test_static_triggers_fire_on_an_image_root_and_the_fixes_clear_them(tmp_path: Path) -> None:
    root = image_with_triggers(tmp_path / "node-image")
    snap = image_snapshot(root)
    assert {"kernel", "config", "systemd", "packages"}.isdisjoint(snap["not_applicable"])
    fired = net_findings(snap)
    assert set(fired) == STATIC_RULES, {r: [f.title for f in fs] for r, fs in fired.items()}

    [networkd] = fired["net.networkd-manages-foreign-rules"]
    assert networkd.evidence["systemd_version"] == 252 and networkd.evidence["unit"] == "systemd-networkd.service"
    assert networkd.evidence["manage_foreign_routing_policy_rules"] is None  # not set: systemd's default, yes
    assert "routing policy rules and routes" in networkd.title
    [mac] = fired["net.mac-address-policy-persistent-on-veth"]
    assert mac.evidence["link_file"] == "/usr/lib/systemd/network/99-default.link"
    assert mac.evidence["mac_address_policy"] == "persistent"
    [utils] = fired["net.ec2-net-utils-vs-vpc-cni"]
    assert (utils.evidence["package"], utils.evidence["version"]) == ("amazon-ec2-net-utils", "2.5.0-1")
    [rp] = fired["net.rp-filter-strict-with-vpc-cni"]
    assert rp.evidence["declared_in"]["net.ipv4.conf.all.rp_filter"] == "/etc/sysctl.d/99-hardening.conf"
    assert "in /etc/sysctl.d/99-hardening.conf" in rp.title and "live" not in rp.title
    [br] = fired["net.br-netfilter-missing"]
    assert br.evidence["bridge_plugins"] == ["flannel"] and br.evidence["boot_missing"] is True
    assert br.evidence["live_missing"] is False  # an image has no live sysctls: only the boot half judges it

    write(root, FIXES)
    os.symlink("/dev/null", root / POLICY_ROUTES_MASK)
    assert net_findings(image_snapshot(root)) == {}


def test_a_plain_host_with_the_same_files_but_no_kubelet_or_cni_gets_no_net_finding(tmp_path: Path) -> None:
    snap = image_snapshot(image_with_triggers(tmp_path / "plain-image", node=False))
    assert snap["facts"]["config"]["links"] and "systemd-networkd.service" in snap["facts"]["systemd"]["enabled_units"]
    assert net_findings(snap) == {}


def test_first_matching_link_decides_an_earlier_veth_override_wins(tmp_path: Path) -> None:
    root = image_with_triggers(tmp_path / "veth-override")
    write(root, {"etc/systemd/network/50-veth.link": "[Match]\nDriver=veth\n\n[Link]\nMACAddressPolicy=none\n"})
    assert "net.mac-address-policy-persistent-on-veth" not in net_findings(image_snapshot(root))


@pytest.mark.parametrize("name", ["al2", "al2023", "ubuntu2004-dlami"])
def test_healthy_recorded_nodes_get_no_net_finding(name: str) -> None:
    # EKS AL2 and AL2023 (VPC CNI; networkd told to leave foreign rules, MACAddressPolicy=none) and a kubeadm
    # DLAMI node (calico, a 98-veth.link before 99-default.link, br_netfilter in modules-load.d)
    snap = recorded(name)
    assert snap["facts"]["config"]["cni"]["files"]
    assert net_findings(snap) == {}


# --- CAP: kernel-log lines real nodes printed ---------------------------------------------------------------

def with_kernel_log(capture: str) -> dict[str, Any]:
    """The recorded healthy EKS AL2023 node with this boot's kernel log replaced by a real capture."""
    snap = recorded("al2023")
    _, raw = read_capture(REAL_LOG / f"{capture}.txt")
    snap["facts"]["network"]["kernel_log"] = parse_kernel_log(probe_filter("trouble_lines", raw))
    return snap


@pytest.mark.parametrize(("capture", "rule", "events"), [
    ("conntrack-table-full-k8s-18604", "net.conntrack-near-full", 14),
    ("conntrack-table-full-centos7-k8s-71261", "net.conntrack-near-full", 4),
    ("conntrack-table-full-double-prefix-kube-aws", "net.conntrack-near-full", 4),
    ("unregister-netdevice-gke-k8s-64743", "net.unregister-netdevice-hang", 1),
    ("unregister-netdevice-syslogd-wall", "net.unregister-netdevice-hang", 1),
    ("neighbor-table-overflow-router7", "net.neighbor-table-overflow", 2),
    ("neighbour-table-overflow-old-wording-gluon", "net.neighbor-table-overflow", 1),
])
def test_real_kernel_log_lines_fire_their_rule_with_the_lines(capture: str, rule: str, events: int) -> None:
    fired = net_findings(with_kernel_log(capture))
    assert set(fired) == {rule}
    [finding] = fired[rule]
    count = {"net.conntrack-near-full": "table_full_events", "net.unregister-netdevice-hang": "events",
             "net.neighbor-table-overflow": "overflow_events"}[rule]
    assert finding.evidence[count] == events
    assert len(finding.evidence["lines"]) == events  # the kernel's own lines, not the kubelet's around them
    assert str(events) in finding.title


def test_ena_and_oom_lines_fire_no_net_rule() -> None:
    for capture in ("ena-soft-lockup-reset", "oom-memcg-killed-process-ubuntu2004"):
        assert net_findings(with_kernel_log(capture)) == {}, capture


def test_conntrack_and_arp_use_from_live_counters() -> None:
    # the live half (runtime counters, which the fleet shares with this machine): each boundary both ways
    snap = recorded("al2023")
    sysctls = snap["facts"]["kernel"]["sysctls"]
    counters = snap["facts"]["kernel"].setdefault("sysctl_counters", {})
    sysctls["net.netfilter.nf_conntrack_max"] = "262144"
    counters["net.netfilter.nf_conntrack_count"] = "209715"
    assert "net.conntrack-near-full" not in net_findings(snap)  # 79.99 %
    counters["net.netfilter.nf_conntrack_count"] = "209716"  # 80.0 %
    [f] = net_findings(snap)["net.conntrack-near-full"]
    assert "209716 of 262144" in f.title
    counters["net.netfilter.nf_conntrack_count"] = "0"
    sysctls["net.ipv4.neigh.default.gc_thresh3"] = "1024"
    snap["facts"]["proc"]["arp_entries"] = 716
    assert net_findings(snap) == {}
    snap["facts"]["proc"]["arp_entries"] = 717  # 10 × 717 ≥ 7 × 1024
    assert set(net_findings(snap)) == {"net.neighbor-table-overflow"}
    sysctls["net.ipv4.neigh.default.gc_thresh3"] = "16384"  # a raised table: entries alone are no warning
    assert net_findings(snap) == {}


# --- R: fleet host a2 ---------------------------------------------------------------------------------------

def _manifest(root: Path, rels: list[str]) -> dict[str, tuple[Any, ...]]:
    """Type, mode, link target and content hash of every path under `rels` (what restore must give back)."""
    out: dict[str, tuple[Any, ...]] = {}
    for rel in rels:
        top = root / rel
        paths = [top] if not top.is_dir() or top.is_symlink() else [top, *top.rglob("*")]
        for p in paths:
            if not os.path.lexists(p):
                continue
            st = p.lstat()
            if p.is_symlink():
                out[str(p.relative_to(root))] = ("link", os.readlink(p))
            elif p.is_dir():
                out[str(p.relative_to(root))] = ("dir", st.st_mode)
            else:
                out[str(p.relative_to(root))] = ("file", st.st_mode, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


WATCHED = ["etc/systemd/system", "etc/systemd/network", "etc/systemd/networkd.conf.d", "etc/cni",
           "etc/sysctl.d", "etc/modules-load.d", "usr/lib/systemd/network", "usr/lib/systemd/system",
           "var/lib/dpkg"]


def _live(key: str) -> str | None:
    path = Path("/proc/sys") / key.replace(".", "/")
    return path.read_text().strip() if path.exists() else None


NEW_DIRS = ["etc/systemd/network/99-default.link.d", "etc/systemd/network", "etc/systemd/networkd.conf.d",
            "etc/cni/net.d", "etc/cni", "etc/modules-load.d"]  # deepest first


@pytest.fixture
def a2(fleet, tmp_path: Path) -> Iterator[Path]:
    """Fleet host a2's root; afterwards a2 is put back as it was (checked path by path)."""
    root = fleet.host("a2").root
    before = _manifest(root, WATCHED)
    absent_dirs = [d for d in NEW_DIRS if not (root / d).exists()]
    dpkg_backup = tmp_path / "dpkg-backup"
    shutil.copytree(root / "var/lib/dpkg", dpkg_backup, symlinks=True)
    dpkg_log = (root / "var/log/dpkg.log").read_bytes() if (root / "var/log/dpkg.log").exists() else None
    try:
        yield root
    finally:
        fleet.exec("a2", ["dpkg", "--purge", "amazon-ec2-net-utils"])
        for rel in [*TRIGGERS, *FIXES, NETWORKD_WANTS, POLICY_ROUTES_MASK]:
            if os.path.lexists(root / rel):
                (root / rel).unlink()
        for rel in absent_dirs:
            if (root / rel).is_dir():
                (root / rel).rmdir()  # fails if something else was left in it
        if not os.path.lexists(root / NETWORKD_MASK):
            os.symlink("/dev/null", root / NETWORKD_MASK)
        shutil.rmtree(root / "var/lib/dpkg")
        shutil.copytree(dpkg_backup, root / "var/lib/dpkg", symlinks=True)
        if dpkg_log is None:
            (root / "var/log/dpkg.log").unlink(missing_ok=True)
        else:
            (root / "var/log/dpkg.log").write_bytes(dpkg_log)
        fleet.exec("a2", ["systemctl", "daemon-reload"], check=True)
        assert _manifest(root, WATCHED) == before


def _collect(fleet, hosts: list[str], out_dir: Path) -> dict[str, dict[str, Any]]:
    """`ami-auditor collect` (the real CLI, over SSH) of some fleet hosts."""
    inventory = yaml.safe_load(Path(fleet.inventory_path).read_text())
    inventory["hosts"] = [h for h in inventory["hosts"] if h["name"] in hosts]
    inv = out_dir / "inventory.yaml"
    out_dir.mkdir(parents=True, exist_ok=True)
    inv.write_text(yaml.safe_dump(inventory))
    out = io.StringIO()
    assert main(["collect", "-i", str(inv), "-o", str(out_dir / "snaps")], Env(out, io.StringIO())) == 0, out.getvalue()
    return {p.stem: json.loads(p.read_text()) for p in (out_dir / "snaps").glob("*.json")}


def _expected_live(snap: dict[str, Any]) -> set[str]:
    """Rules this machine's own kernel (shared by every container) makes fire, read from /proc here."""
    out = set()
    if "1" in (_live("net.ipv4.conf.all.rp_filter"), _live("net.ipv4.conf.default.rp_filter")):
        out.add("net.rp-filter-strict-with-vpc-cni")  # with a VPC CNI conflist laid down
    if _live("net.bridge.bridge-nf-call-iptables") in (None, "0"):
        out.add("net.br-netfilter-missing")  # with a bridge CNI conflist laid down
    events = snap["facts"]["network"]["kernel_log"]["events"]
    if events.get("conntrack_table_full"):
        out.add("net.conntrack-near-full")
    if events.get("unregister_netdevice_waiting"):
        out.add("net.unregister-netdevice-hang")
    if events.get("neighbor_table_overflow"):
        out.add("net.neighbor-table-overflow")
    count, most = _live("net.netfilter.nf_conntrack_count"), _live("net.netfilter.nf_conntrack_max")
    if count and most and int(most) > 0 and 5 * int(count) >= 4 * int(most):
        out.add("net.conntrack-near-full")
    return out


@pytest.mark.fleet
def test_fleet_host_a2_triggers_fire_with_evidence_and_fixes_clear_them(fleet, a2: Path, tmp_path: Path) -> None:
    root = a2
    assert os.readlink(root / NETWORKD_MASK) == "/dev/null"  # the fleet image masks networkd: unmask, enable
    assert not (root / "usr/lib/systemd/network/99-default.link").exists()  # minbase: no udev
    (root / NETWORKD_MASK).unlink()
    (root / NETWORKD_WANTS).parent.mkdir(parents=True, exist_ok=True)
    os.symlink("/lib/systemd/system/systemd-networkd.service", root / NETWORKD_WANTS)
    write(root, TRIGGERS)
    deb = dummy_deb(tmp_path / "deb")
    shutil.copy(deb, root / "root" / deb.name)  # not /tmp: the booted host has its own tmpfs there
    installed = fleet.exec("a2", ["dpkg", "-i", f"/root/{deb.name}"])
    (root / "root" / deb.name).unlink()
    assert installed.returncode == 0, installed.stderr
    fleet.exec("a2", ["systemctl", "daemon-reload"], check=True)
    # networkd cannot run here: nspawn without a private network drops CAP_NET_ADMIN (ConditionCapability)
    assert fleet.exec("a2", ["systemctl", "is-active", "systemd-networkd.service"]).stdout.strip() != "active"

    snaps = _collect(fleet, ["a2", "a1"], tmp_path / "triggers")
    snap = snaps["a2"]
    assert snap["errors"] == {}, snap["errors"]
    fired = net_findings(snap)
    expected = STATIC_RULES | _expected_live(snap)
    assert set(fired) == expected, {r: [f.title for f in fs] for r, fs in fired.items()}
    [networkd] = fired["net.networkd-manages-foreign-rules"]
    assert networkd.evidence["systemd_version"] == 252 and networkd.evidence["cni_files"] == [
        "10-aws.conflist", "10-calico.conflist", "10-flannel.conflist"]
    [mac] = fired["net.mac-address-policy-persistent-on-veth"]
    assert mac.evidence["link_file"] == "/usr/lib/systemd/network/99-default.link"
    [utils] = fired["net.ec2-net-utils-vs-vpc-cni"]
    assert utils.evidence["version"] == "2.5.0-1" and utils.evidence["policy_routes_unit_state"] != "masked"
    [rp] = fired["net.rp-filter-strict-with-vpc-cni"]
    assert rp.evidence["declared"] == {"net.ipv4.conf.all.rp_filter": "1", "net.ipv4.conf.default.rp_filter": "1"}
    assert rp.evidence["live"]["net.ipv4.conf.all.rp_filter"] == _live("net.ipv4.conf.all.rp_filter")
    [br] = fired["net.br-netfilter-missing"]
    assert br.evidence["boot_missing"] is True and br.evidence["modules_load"] == []
    # a healthy node (a1: kubelet, no CNI quirks) on the same kernel gets only what that kernel says
    assert set(net_findings(snaps["a1"])) == _expected_live(snaps["a1"]) - {
        "net.rp-filter-strict-with-vpc-cni", "net.br-netfilter-missing"}

    write(root, FIXES)
    fleet.exec("a2", ["systemctl", "mask", "policy-routes@.service"], check=True)
    fixed = _collect(fleet, ["a2"], tmp_path / "fixes")["a2"]
    assert fixed["facts"]["config"]["networkd"]["manage_foreign_routing_policy_rules"] is False
    assert set(net_findings(fixed)) == _expected_live(fixed)  # the live half: this kernel's values
