"""The incident library as an SRE meets it: a healthy EKS-style node image, then the same image with ONE
configuration that caused a public outage laid on it (issue 34's list), each scanned through the real CLI
(`collect image://…`, the judge with every built-in pack). Each must be flagged by its own rule and by no
other rule of the library; the healthy node and a plain host must get none of the library's findings.

The live-only ones of that list are laid on real fleet hosts: zombies piling up and /var/log full in
tests/system/test_rules_kres_time_disk.py, a fabric manager not running on an NVSwitch instance type in
tests/system/test_rules_gpupkg.py (a unit's running state is no image fact); the Pinterest chain in
tests/unit/test_chains.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from tests.system.test_rules_k8s import EKS_NODE, collect, image_root

# the packs the incident library added (the Pinterest chain's and image hygiene's packs predate it)
LIBRARY = ("pkg.", "k8s.", "net.", "gpu.", "kres.", "time.", "disk.", "known.")
DPKG_ROW = "Package: {0}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {1}\nMaintainer: x\n" \
           "Description: x\n\n"
CHRONY = "usr/lib/systemd/system/chrony.service"
CHRONY_WANTS = "etc/systemd/system/multi-user.target.wants/chrony.service"
NETWORKD = "usr/lib/systemd/system/systemd-networkd.service"
NETWORKD_WANTS = "etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
UPGRADE_TIMER = "usr/lib/systemd/system/apt-daily-upgrade.timer"
UPGRADE_WANTS = "etc/systemd/system/timers.target.wants/apt-daily-upgrade.timer"
UNIT = "[Unit]\nDescription={0}\n[Service]\nExecStart={1}\n[Install]\nWantedBy={2}\n"


def healthy_node(root: Path, kubelet: bool = True) -> Path:
    """An EKS-style node image as shipped: kubelet and containerd on the systemd cgroup driver, the VPC CNI,
    reserved kubelet ports, chrony enabled, runc and containerd at fixed versions, no automatic upgrades."""
    image_root(root, EKS_NODE if kubelet else {"etc/resolv.conf": "nameserver 10.0.0.2\n"}, kubelet=kubelet)
    files = {CHRONY: UNIT.format("chrony, an NTP client/server", "/usr/sbin/chronyd -F 1", "multi-user.target"),
             NETWORKD: UNIT.format("Network Configuration", "/lib/systemd/systemd-networkd", "multi-user.target"),
             UPGRADE_TIMER: "[Unit]\nDescription=Daily apt upgrade\n[Timer]\nOnCalendar=*-*-* 6:00\n"
                            "[Install]\nWantedBy=timers.target\n",
             "var/lib/dpkg/status": DPKG_ROW.format("runc", "1.1.12-1") + DPKG_ROW.format("containerd", "1.7.24-1")}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    enable(root, CHRONY, CHRONY_WANTS)
    return root


def enable(root: Path, unit: str, wants: str) -> None:
    (root / wants).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(f"/{unit}", root / wants)


def add_package(root: Path, name: str, version: str) -> None:
    status = root / "var/lib/dpkg/status"
    status.write_text(status.read_text().replace(f"Package: {name}\n", f"Package: {name}-old\n")
                      + DPKG_ROW.format(name, version))


def unattended_upgrades(root: Path) -> None:
    """Ubuntu's default: the stock timer enabled, 20auto-upgrades "1", the package installed (Datadog 2023)."""
    enable(root, UPGRADE_TIMER, UPGRADE_WANTS)
    (root / "etc/apt/apt.conf.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/apt/apt.conf.d/20auto-upgrades").write_text(
        'APT::Periodic::Update-Package-Lists "1";\nAPT::Periodic::Unattended-Upgrade "1";\n')
    add_package(root, "unattended-upgrades", "2.9.1+nmu3")


def networkd_under_cni(root: Path) -> None:
    """systemd-networkd enabled (systemd 252), nothing telling it to leave the CNI's rules alone."""
    enable(root, NETWORKD, NETWORKD_WANTS)


def cgroupfs_containerd(root: Path) -> None:
    """`containerd config default` before SystemdCgroup is switched on; the kubelet stays on systemd."""
    path = root / "etc/containerd/config.toml"
    path.write_text(path.read_text().replace("SystemdCgroup = true", "SystemdCgroup = false"))


def runc_escape(root: Path) -> None:
    """runc 1.1.11: CVE-2024-21626 (Leaky Vessels), a container escape through a leaked fd."""
    add_package(root, "runc", "1.1.11-1")


def no_time_sync(root: Path) -> None:
    """chrony removed from the boot and timesyncd masked, as a minimal image build leaves it."""
    (root / CHRONY_WANTS).unlink()
    (root / "etc/systemd/system/systemd-timesyncd.service").symlink_to("/dev/null")


def forwarding_off(root: Path) -> None:
    """A CIS / dev-sec hardening baseline's sysctl file on a node."""
    (root / "etc/sysctl.d/99-hardening.conf").write_text("# dev-sec sysctl-01\nnet.ipv4.ip_forward = 0\n")


def port_range_over_kubelet(root: Path) -> None:
    """A tuning file widening the ephemeral range over 10250, without the EKS reserved-ports file."""
    (root / "etc/sysctl.d/99-eks-reserved-ports.conf").unlink()
    (root / "etc/sysctl.d/60-ephemeral-ports.conf").write_text("net.ipv4.ip_local_port_range = 1024 65000\n")


# (the configuration, what else it needs, the rule that must flag it)
INCIDENTS: list[tuple[Any, dict[str, str], str]] = [
    (unattended_upgrades, {}, "pkg.unattended-upgrades-on-node"),
    (networkd_under_cni, {}, "net.networkd-manages-foreign-rules"),
    (cgroupfs_containerd, {}, "k8s.cgroup-driver-mismatch"),
    (runc_escape, {}, "known.runc-cve-2024-21626"),
    (no_time_sync, {}, "time.no-sync-daemon"),
    (forwarding_off, {}, "k8s.ip-forward-off"),
    (port_range_over_kubelet, {}, "k8s.ports-not-reserved"),
]


def library_findings(snap: dict[str, Any]) -> dict[str, list[str]]:
    """The incident library's findings by rule (titles); a rule that could not be evaluated fails the test:
    every area an image can have was read."""
    out: dict[str, list[str]] = {}
    for f in Judge(load_rules(builtin=True)).judge(snap):
        if f.rule.startswith(LIBRARY):
            assert f.evidence.get("status") not in ("unknown", "error"), (f.rule, f.title)
            out.setdefault(f.rule, []).append(f.title)
    return out


def scan(root: Path, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """`ami-auditor collect image://ROOT` through the CLI, with an inventory when the host has labels."""
    inventory = None
    if labels:
        inventory = root.parent / f"{root.name}-inventory.yaml"
        inventory.write_text(yaml.safe_dump({"hosts": [{"name": root.name, "target": f"image://{root}",
                                                        "labels": labels}]}))
        [snap] = collect([], root.parent / f"{root.name}-snaps", inventory).values()
        return snap
    [snap] = collect([f"image://{root}"], root.parent / f"{root.name}-snaps").values()
    return snap


def test_a_healthy_node_and_a_plain_host_get_none_of_the_librarys_findings(tmp_path: Path) -> None:
    assert library_findings(scan(healthy_node(tmp_path / "node"))) == {}
    assert library_findings(scan(healthy_node(tmp_path / "plain", kubelet=False))) == {}
    # labelled as an inventory labels it (the label names no GPU instance type: no GPU rule applies)
    assert library_findings(scan(healthy_node(tmp_path / "labelled"), {"instance_type": "m6i.4xlarge"})) == {}


@pytest.mark.parametrize(("lay", "labels", "rule"), INCIDENTS, ids=[i[2] for i in INCIDENTS])
def test_each_outage_configuration_is_flagged_by_its_own_rule(tmp_path: Path, lay: Any, labels: dict[str, str],
                                                               rule: str) -> None:
    root = healthy_node(tmp_path / "node")
    lay(root)
    found = library_findings(scan(root, labels))
    assert set(found) == {rule}, found
    assert len(found[rule]) == 1
