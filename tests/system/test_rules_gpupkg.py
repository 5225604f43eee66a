"""rules/pkg.yaml and rules/gpu.yaml, each rule made to fire and then to pass:

- R: on a real fleet host (golden), the triggers laid down as real hosts have them (Debian's stock
  apt-daily-upgrade.timer, /etc/apt/apt.conf.d/20auto-upgrades, dummy .debs built with dpkg-deb and installed
  with dpkg -i, units started by the host's systemd, containerd's config.toml, a kernel package newer than the
  running kernel), collected with the real CLI; then the fixes; then the host restored byte for byte.
- image: the static triggers on an unbooted root (image://), then the fixes.
- CAP: real public captures (tests/data/real/kernel_log: Xid and fallen-off-bus lines;
  tests/data/real/gpu_rules/console: a /proc/driver/nvidia/version line with the package beside it, lsmod
  without a peer-memory module) fed through the parsers, then the rules.
- gates: a healthy node, a plain host and a plain image get none of these findings.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import jmespath
import pytest
import yaml

from auditor.cli import main
from auditor.collect.parsers.gpu import parse_gpu
from auditor.collect.parsers.kernel import parse_kernel, release_order
from auditor.collect.parsers.network import parse_kernel_log
from auditor.collect.parsers.packages import parse_packages
from auditor.context import Env
from auditor.judge.engine import Judge
from auditor.judge.functions import OPTIONS
from auditor.judge.rules import load_rules
from auditor.models import Finding, HostSpec
from auditor.run.live_hosts import collect_host
from tests.paths import DATA
from tests.probe_shell import probe_filter
from tests.unit.test_image_transport import make_root

REAL = DATA / "real"
MINE = ("pkg.", "gpu.")
STATIC = {"pkg.unattended-upgrades-on-node", "gpu.nvidia-runtime-missing", "gpu.module-missing-for-installed-kernel"}
BASE_ROOT = Path(os.environ.get("AMI_AUDITOR_FLEET_CACHE", "/var/cache/ami-auditor-fleet")) / "base-bookworm"


def fired(snapshot: dict[str, Any]) -> dict[str, list[Finding]]:
    """This pack's findings by rule (not-evaluated ones are a failure here: every area they read was collected)."""
    out: dict[str, list[Finding]] = {}
    for f in Judge(load_rules(builtin=True)).judge(snapshot):
        if f.rule.startswith(MINE):
            assert f.evidence.get("status") not in ("unknown", "error"), f.title
            out.setdefault(f.rule, []).append(f)
    return out


def capture(path: Path) -> str:
    head, sep, raw = path.read_text().partition("# ---\n")
    assert sep and "# source: https://" in head, path
    return raw


# --- facts the rules stand on ---------------------------------------------------------------------------------

def test_installed_kernels_are_ordered_by_their_numbers_not_as_strings() -> None:
    kernels = "\n".join(f"release {r}" for r in ("6.1.0-9-cloud-amd64", "6.1.0-27-cloud-amd64",
                                                   "6.1.0-28-cloud-amd64", "6.1.0-27-rt-amd64"))
    rows = {r["release"]: r for r in parse_kernel("release=6.1.0-27-cloud-amd64", "",
                                                  kernels + "\nnvidia 6.1.0-27-cloud-amd64")["installed"]}
    assert rows["6.1.0-9-cloud-amd64"]["newer_than_running"] is False  # "9" > "2" as text; 9 < 27 as a number
    assert rows["6.1.0-28-cloud-amd64"]["newer_than_running"] is True
    assert rows["6.1.0-27-rt-amd64"]["newer_than_running"] is False  # same numbers, another flavour
    assert [r for r, row in rows.items() if row["running"]] == ["6.1.0-27-cloud-amd64"]
    assert rows["6.1.0-27-cloud-amd64"]["nvidia_module"] and not rows["6.1.0-28-cloud-amd64"]["nvidia_module"]
    al2 = parse_kernel("release=5.10.228-219.884.amzn2.x86_64", "",
                       "release 5.10.228-219.884.amzn2.x86_64\nrelease 5.10.229-220.889.amzn2.x86_64")
    assert [r["newer_than_running"] for r in al2["installed"]] == [False, True]
    unknown = parse_kernel("", "", "release 6.1.0-28-cloud-amd64")["installed"]
    assert unknown == [{"release": "6.1.0-28-cloud-amd64", "nvidia_module": False, "running": None,
                        "newer_than_running": None}]
    assert release_order("vmlinuz") is None


def test_upstream_version_drops_epoch_and_revision() -> None:
    def up(v: str | None) -> Any:
        return jmespath.search("upstream_version(v)", {"v": v}, options=OPTIONS)
    assert [up(v) for v in ("3:535.183.01-1.el8", "535.183.01-0ubuntu0.22.04.1", "535.183.01", None)] == [
        "535.183.01", "535.183.01", "535.183.01", None]


# --- image roots: the static triggers before launch -------------------------------------------------------------

DPKG_ROW = ("Package: {0}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {1}\nMaintainer: x\n"
            "Description: x\n\n")
CONTAINERD_RUNC = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
"""
CONTAINERD_NVIDIA = CONTAINERD_RUNC.replace('default_runtime_name = "runc"', 'default_runtime_name = "nvidia"') + """\
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
  SystemdCgroup = true
"""


def gpu_node_image(root: Path, kubelet: bool = True, gpu: bool = True) -> Path:
    """A Debian/Ubuntu GPU node image as built: unattended upgrades on (the stock timer, 20auto-upgrades "1"),
    the NVIDIA driver packages, a DKMS module for the older kernel only, containerd with runc only."""
    make_root(root)
    if not kubelet:
        (root / "usr/local/bin/kubelet").unlink()
    (root / "usr/lib/systemd/system/apt-daily-upgrade.timer").write_text(
        "[Unit]\nDescription=Daily apt upgrade and clean activities\n[Timer]\nOnCalendar=*-*-* 6:00\n"
        "RandomizedDelaySec=60m\nPersistent=true\n[Install]\nWantedBy=timers.target\n")
    (root / "etc/systemd/system/timers.target.wants").mkdir(parents=True)
    os.symlink("/usr/lib/systemd/system/apt-daily-upgrade.timer",
               root / "etc/systemd/system/timers.target.wants/apt-daily-upgrade.timer")
    (root / "etc/apt/apt.conf.d").mkdir(parents=True)
    (root / "etc/apt/apt.conf.d/20auto-upgrades").write_text(
        'APT::Periodic::Update-Package-Lists "1";\nAPT::Periodic::Unattended-Upgrade "1";\n')
    rows = DPKG_ROW.format("unattended-upgrades", "2.9.1+nmu3")
    if gpu:
        rows += DPKG_ROW.format("libnvidia-compute-535", "535.183.01-0ubuntu0.22.04.1")
        rows += DPKG_ROW.format("nvidia-utils-535", "535.183.01-0ubuntu0.22.04.1")
        (root / "lib/modules/6.1.0-27-cloud-amd64/updates/dkms").mkdir(parents=True)
        (root / "lib/modules/6.1.0-27-cloud-amd64/updates/dkms/nvidia.ko").write_bytes(b"\x7fELF")
        (root / "lib/modules/6.1.0-28-cloud-amd64/kernel").mkdir(parents=True)  # installed after the driver
        (root / "etc/containerd").mkdir(parents=True)
        (root / "etc/containerd/config.toml").write_text(CONTAINERD_RUNC)
    with open(root / "var/lib/dpkg/status", "a") as status:
        status.write(rows)
    return root


def image(root: Path) -> dict[str, Any]:
    result = collect_host(HostSpec(root.name, f"image://{root}"), binaries=["kubelet", "containerd"])
    assert result.status == "ok", result.error
    return result.snapshot


def test_static_triggers_fire_on_a_gpu_node_image_and_the_fixes_pass(tmp_path: Path) -> None:
    root = gpu_node_image(tmp_path / "gpu-node")
    snap = image(root)
    found = fired(snap)
    assert set(found) == STATIC  # the runtime rules read facts an image has not: not applicable, not run
    [upgrades] = found["pkg.unattended-upgrades-on-node"]
    assert upgrades.evidence["apt_files"] == ["/etc/apt/apt.conf.d/20auto-upgrades"]
    assert upgrades.evidence["apt_unattended_upgrade"] == "1"
    assert upgrades.evidence["kubelet"] == "/usr/local/bin/kubelet"
    assert "APT::Periodic::Unattended-Upgrade \"1\"" in upgrades.title
    [runtime] = found["gpu.nvidia-runtime-missing"]
    assert runtime.evidence["containerd_config"] == "/etc/containerd/config.toml"
    assert runtime.evidence["containerd_runtimes"] == ["runc"]
    [kernel] = found["gpu.module-missing-for-installed-kernel"]
    assert kernel.item == "6.1.0-28-cloud-amd64" and kernel.evidence["running"] is True  # an image boots its newest
    assert kernel.evidence["kernels_with_module"] == ["6.1.0-27-cloud-amd64"]

    (root / "etc/apt/apt.conf.d/20auto-upgrades").write_text(
        'APT::Periodic::Update-Package-Lists "1";\nAPT::Periodic::Unattended-Upgrade "0";\n')
    (root / "etc/containerd/config.toml").write_text(CONTAINERD_NVIDIA)
    (root / "lib/modules/6.1.0-28-cloud-amd64/updates/dkms").mkdir(parents=True)
    (root / "lib/modules/6.1.0-28-cloud-amd64/updates/dkms/nvidia.ko.xz").write_bytes(b"\xfd7zXZ")
    assert fired(image(root)) == {}


def test_unattended_upgrades_alone_is_no_finding_on_a_plain_host_image(tmp_path: Path) -> None:
    """The same apt settings on a host that is neither a node nor a GPU host: the gates keep it silent."""
    snap = image(gpu_node_image(tmp_path / "plain", kubelet=False, gpu=False))
    assert snap["facts"]["config"]["apt_periodic"]["Unattended-Upgrade"] == "1"
    assert "apt-daily-upgrade.timer" in snap["facts"]["systemd"]["enabled_units"]
    assert fired(snap) == {}


@pytest.mark.skipif(not (BASE_ROOT / "etc/os-release").is_file(), reason="no fleet base root on this machine")
def test_a_plain_debian_root_gets_none_of_these_findings() -> None:
    assert fired(image(BASE_ROOT)) == {}


# --- captures: what only a GPU host's kernel and driver show --------------------------------------------------

def gpu_host(tmp_path: Path) -> dict[str, Any]:
    """A live-shaped snapshot of a GPU host (driver packages installed) with no GPU trouble: the image snapshot
    of gpu_node_image with its runtime areas filled the way a host without NVIDIA devices prints them."""
    snap = image(gpu_node_image(tmp_path / "gpu-host"))
    snap["not_applicable"] = {}
    snap["facts"]["gpu"] = parse_gpu("pci_gpus=0\npci_nvswitches=0\ninfiniband_devices=0\n")
    snap["facts"]["network"] = {"interfaces": [], "ena": {"present": False, "version": None, "out_of_tree": False,
                                                          "in_tree": False}, "kernel_log": parse_kernel_log("")}
    snap["facts"]["proc"] = {"reboot_required": False, "reboot_required_pkgs": []}
    return snap


# what gpu_host fires on its own: the image's static triggers, and no nvidia-persistenced running (no units ran)
GPU_HOST = STATIC | {"gpu.persistence-daemon-off"}


def with_kernel_log(snap: dict[str, Any], name: str) -> dict[str, Any]:
    snap = copy.deepcopy(snap)
    raw = capture(REAL / "kernel_log" / f"{name}.txt")
    snap["facts"]["network"]["kernel_log"] = parse_kernel_log(probe_filter("trouble_lines", raw))
    return snap


def test_xid_captures_fire_for_fatal_codes_only(tmp_path: Path) -> None:
    host = gpu_host(tmp_path)
    gsp = with_kernel_log(host, "gpud-xid-119-gsp-rpc-timeout")
    assert gsp["facts"]["network"]["kernel_log"]["events"]["xid"] == 5
    assert set(fired(host)) == GPU_HOST  # the same host without those lines
    found = fired(gsp)
    assert set(found) - GPU_HOST == {"gpu.xid-fatal"}
    [xid] = found["gpu.xid-fatal"]
    assert (xid.item, xid.evidence["count"], xid.evidence["devices"]) == ("119", 5, 1)
    assert "Xid 119 (GSP RPC timeout): 5 lines this boot on 1 GPU" in xid.title
    assert "Timeout after 6s of waiting for RPC response from GPU4 GSP" in xid.evidence["last"]

    app = with_kernel_log(host, "gpud-xid-13-graphics-exception")  # the workload's own faults
    xids = app["facts"]["network"]["kernel_log"]["xids"]
    assert {x["code"]: x["count"] for x in xids} == {13: 16, 43: 1}
    assert set(fired(app)) == GPU_HOST


def test_fallen_off_bus_captures_fire_with_and_without_an_xid(tmp_path: Path) -> None:
    host = gpu_host(tmp_path)
    hgx = fired(with_kernel_log(host, "gpud-sxid-readme-xid79-fallen-off-bus"))
    assert set(hgx) - GPU_HOST == {"gpu.fallen-off-bus", "gpu.xid-fatal"}
    [bus] = hgx["gpu.fallen-off-bus"]
    assert (bus.evidence["fallen_off_bus_lines"], bus.evidence["xid79_lines"]) == (2, 1)
    assert bus.evidence["last_line"].endswith("NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.")
    assert [f.item for f in hgx["gpu.xid-fatal"]] == ["79"]
    open_module = fired(with_kernel_log(host, "nvsentinel-155-fallen-off-bus-no-xid"))  # multi-line, no Xid
    assert set(open_module) - GPU_HOST == {"gpu.fallen-off-bus"}
    assert open_module["gpu.fallen-off-bus"][0].evidence["xid79_lines"] is None
    # the other half: the PCI bus lists more GPUs than the driver holds
    lost = copy.deepcopy(host)
    lost["facts"]["gpu"] = parse_gpu("pci_gpus=8\npci_nvswitches=4\ndriver_gpus=7\ninfiniband_devices=0\n")
    [count] = fired(lost)["gpu.fallen-off-bus"]
    assert "PCI bus lists 8 NVIDIA GPUs but the driver knows 7" in count.title
    lost["facts"]["gpu"]["driver_gpus"] = 8
    assert "gpu.fallen-off-bus" not in fired(lost)


def proc_version_and_packages(name: str) -> tuple[str, list[str]]:
    """The `NVRM version:` line and the `ii` rows of dpkg -l in a console capture."""
    raw = capture(REAL / "gpu_rules" / "console" / f"{name}.txt")
    line = next(x for x in raw.splitlines() if x.startswith("NVRM version:"))
    rows = ["\t".join(x.split()[1:4]) for x in raw.splitlines() if x.startswith("ii ")]
    return line, rows


def test_driver_library_mismatch_capture_fires_and_a_matching_package_passes(tmp_path: Path) -> None:
    line, rows = proc_version_and_packages("illinois-scicomp-70-module-520-smi-525")
    snap = gpu_host(tmp_path)
    snap["facts"]["kernel"]["nvidia_driver"] = parse_kernel(f"nvidia_driver={line}")["nvidia_driver"]
    snap["facts"]["packages"] = parse_packages("manager=dpkg\n" + "\n".join(rows))
    assert snap["facts"]["packages"]["items"] == [{"name": "nvidia-smi", "version": "525.85.12-1", "arch": "amd64"}]
    [mismatch] = fired(snap)["gpu.driver-library-mismatch"]
    assert mismatch.evidence["user_space_versions"] == ["525.85.12"] and "520.56.06" in mismatch.title
    snap["facts"]["packages"]["items"][0]["version"] = "520.56.06-1"  # the fix: module and library agree
    assert "gpu.driver-library-mismatch" not in fired(snap)
    # /sys/module/nvidia/version, when the probe read it, is the module's version
    snap["facts"]["gpu"]["module_version"] = "525.85.12"
    assert "gpu.driver-library-mismatch" in fired(snap)


def test_an_inventory_label_names_the_instance_type_where_imds_does_not(tmp_path: Path) -> None:
    """No fabric manager on a host the inventory calls a p4d (no IMDS answer): found; a g5 (no NVSwitch): not."""
    snap = gpu_host(tmp_path)
    assert snap["host"]["instance_type"] is None and "gpu.fabricmanager-not-running" not in fired(snap)
    snap["labels"] = {"instance_type": "p4d.24xlarge"}
    [fabric] = fired(snap)["gpu.fabricmanager-not-running"]
    assert fabric.evidence["instance_type"] == "p4d.24xlarge" and fabric.evidence["unit_file_state"] is None
    assert "nvidia-fabricmanager is not loaded (no unit file)" in fabric.title
    snap["labels"] = {"instance_type": "g5.48xlarge"}
    assert "gpu.fabricmanager-not-running" not in fired(snap)


def test_peermem_capture_fires_and_loading_the_module_passes(tmp_path: Path) -> None:
    raw = capture(REAL / "gpu_rules" / "console" / "nccl-988-no-peermem-with-infiniband.txt")
    greps = [x for x in raw.splitlines() if "lsmod | grep" in x]
    assert len(greps) == 2 and not [x for x in raw.splitlines() if re.match(r"^(nvidia_peermem|nv_peer_mem)\s", x)]
    hcas = sorted(set(re.findall(r"\](mlx5_\d+):", raw)))
    # the driver is loaded (NCCL ran on the A100s); neither peer-memory module is (both greps printed nothing)
    gpu = f"pci_gpus=0\npci_nvswitches=0\ninfiniband_devices={len(hcas)}\nmodule=nvidia\n"
    snap = gpu_host(tmp_path)
    snap["facts"]["gpu"] = parse_gpu(gpu)
    [peermem] = fired(snap)["gpu.peermem-not-loaded"]
    assert peermem.evidence["infiniband_devices"] == 8 and "8 InfiniBand devices" in peermem.title
    snap["facts"]["gpu"] = parse_gpu(gpu + "module=nvidia_peermem\n")
    assert "gpu.peermem-not-loaded" not in fired(snap)


# --- R: the real fleet host ----------------------------------------------------------------------------------

def deb(tmp: Path, name: str, version: str, files: dict[str, str] | None = None) -> Path:
    """A dummy package built with dpkg-deb (no maintainer scripts), its files as given."""
    pkg = tmp / f"{name}_{version}"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN/control").write_text(f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
                                        f"Maintainer: ami-auditor tests <tests@localhost>\nDescription: test dummy\n")
    for path, text in (files or {}).items():
        (pkg / path).parent.mkdir(parents=True, exist_ok=True)
        (pkg / path).write_text(text)
    out = tmp / f"{name}_{version}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg), str(out)], check=True,
                   capture_output=True)
    return out


def unit(description: str, exec_start: str) -> str:
    return (f"[Unit]\nDescription={description}\n[Service]\nExecStart={exec_start}\n"
            "[Install]\nWantedBy=multi-user.target\n")


WATCHED = ("etc", "var/lib/dpkg", "usr/lib/systemd/system", "usr/lib/modules", "var/log/dpkg.log", "var/tmp")


def manifest(root: Path) -> dict[str, str]:
    """Path → content digest (or link target, or `dir`) of what the test may touch on the host."""
    out: dict[str, str] = {}
    for top in WATCHED:
        base = root / top
        paths = [base] if base.is_file() else sorted(base.rglob("*")) if base.is_dir() else []
        for p in paths:
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() + f" {p.stat().st_mode:o}"
    return out


def newer_release(running: str) -> str:
    """A kernel release newer than `running` by its numbers (the running kernel is this machine's)."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", running)
    assert m, running
    newer = f"{m.group(1)}.{m.group(2)}.{int(m.group(3) or 0) + 1}-99-cloud-amd64"
    assert release_order(newer) > release_order(running)  # type: ignore[operator]
    return newer


def collect(fleet: Any, inventory: Path, out: Path) -> dict[str, Any]:
    err = io.StringIO()
    code = main(["collect", "-i", str(inventory), "-o", str(out)], Env(stdout=io.StringIO(), stderr=err))
    assert code == 0, err.getvalue()
    return json.loads((out / "golden.json").read_text())


@pytest.mark.fleet
def test_triggers_fire_on_a_real_host_and_its_fixes_pass(fleet: Any, tmp_path: Path) -> None:
    name = "golden"
    root = fleet.host(name).root

    def run(*argv: str) -> str:
        r = fleet.exec(name, list(argv), timeout=60)
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
        return r.stdout

    inventory = yaml.safe_load(Path(fleet.inventory_path).read_text())
    [spec] = [h for h in inventory["hosts"] if h["name"] == name]
    inventory["hosts"] = [spec]
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(inventory))

    # the Kubernetes node as it is: none of these. Its cloud-init identity says p4d.24xlarge (the fleet plays the
    # Deep Learning AMI), a GPU and NVSwitch instance type, but no NVIDIA driver is installed.
    healthy = collect(fleet, inv, tmp_path / "healthy")
    assert healthy["host"]["instance_type"] == "p4d.24xlarge"
    assert fired(healthy) == {}
    running = run("uname", "-r").strip()
    newer = newer_release(running)
    debs = tmp_path / "debs"
    debs.mkdir()
    packages = {
        "unattended-upgrades": deb(debs, "unattended-upgrades", "2.9.1+nmu3"),
        "libnvidia-compute-535": deb(debs, "libnvidia-compute-535", "535.183.01-0ubuntu0.22.04.1"),
        "nvidia-compute-utils-535": deb(debs, "nvidia-compute-utils-535", "535.183.01-0ubuntu0.22.04.1", {
            "usr/lib/systemd/system/nvidia-persistenced.service": unit("NVIDIA Persistence Daemon",
                                                                       "/bin/sleep infinity")}),
        "nvidia-fabricmanager-535": deb(debs, "nvidia-fabricmanager-535", "535.161.08-1", {
            "usr/lib/systemd/system/nvidia-fabricmanager.service": unit("NVIDIA fabric manager service",
                                                                        "/bin/false")}),
        f"linux-image-{newer}": deb(debs, f"linux-image-{newer}", "6.99.1-1", {
            f"usr/lib/modules/{newer}/modules.order": "kernel/drivers/net/ethernet/amazon/ena/ena.ko\n"}),
    }
    fm_fixed = deb(debs, "nvidia-fabricmanager-535", "535.183.01-1", {
        "usr/lib/systemd/system/nvidia-fabricmanager.service": unit("NVIDIA fabric manager service",
                                                                    "/bin/sleep infinity")})
    timer_masked = fleet.exec(name, ["systemctl", "is-enabled", "apt-daily-upgrade.timer"]).stdout.strip() == "masked"
    before = manifest(root)
    saved = {rel: (root / rel).read_bytes() for rel in ("var/lib/dpkg/status", "var/lib/dpkg/status-old",
                                                      "var/lib/dpkg/available")}
    log = root / "var/log/dpkg.log"
    saved_log = log.read_bytes() if log.exists() else None
    drop = root / "var/tmp/gpupkg"  # /tmp inside is the host's own tmpfs: not this overlay
    drop.mkdir()
    try:
        for path in [*packages.values(), fm_fixed]:
            (drop / path.name).write_bytes(path.read_bytes())
        # triggers
        run("dpkg", "-i", *(f"/var/tmp/gpupkg/{p.name}" for p in packages.values()))
        (root / "etc/apt/apt.conf.d/20auto-upgrades").write_text(
            'APT::Periodic::Update-Package-Lists "1";\nAPT::Periodic::Unattended-Upgrade "1";\n')
        (root / "etc/containerd").mkdir()
        (root / "etc/containerd/config.toml").write_text(CONTAINERD_RUNC)
        run("sh", "-c", "echo '*** System restart required ***' > /run/reboot-required && "
                        f"echo linux-image-{newer} > /run/reboot-required.pkgs")
        run("systemctl", "daemon-reload")
        if timer_masked:  # the fleet masks it (no apt runs on test hosts); Debian ships it enabled
            run("systemctl", "unmask", "apt-daily-upgrade.timer")
        run("systemctl", "enable", "apt-daily-upgrade.timer", "nvidia-fabricmanager.service")
        run("systemctl", "start", "nvidia-fabricmanager.service")  # exits 1 at once: failed
        snap = collect(fleet, inv, tmp_path / "trigger")
        found = fired(snap)
        assert set(found) == {"pkg.unattended-upgrades-on-node", "pkg.reboot-pending", "gpu.fabricmanager-not-running",
                              "gpu.persistence-daemon-off", "gpu.nvidia-runtime-missing",
                              "gpu.module-missing-for-installed-kernel"}, sorted(found)
        [upgrades] = found["pkg.unattended-upgrades-on-node"]
        assert "/etc/apt/apt.conf.d/20auto-upgrades" in upgrades.evidence["apt_files"]  # beside Debian's own
        assert upgrades.evidence["apt_unattended_upgrade"] == "1" and upgrades.evidence["apt_timer_enabled"] is True
        assert upgrades.evidence["unattended_upgrades_package"] == "2.9.1+nmu3"
        [reboot] = found["pkg.reboot-pending"]
        assert reboot.evidence["newer_kernels"] == [newer] and reboot.evidence["running"] == running
        assert reboot.evidence["reboot_required"] is True
        assert reboot.evidence["reboot_required_pkgs"] == [f"linux-image-{newer}"]
        [fabric] = found["gpu.fabricmanager-not-running"]
        assert (fabric.evidence["active_state"], fabric.evidence["unit_file_state"]) == ("failed", "enabled")
        assert fabric.evidence["fabricmanager_versions"] == ["535.161.08"]
        assert fabric.evidence["driver_version"] == "535.183.01"
        assert fabric.evidence["instance_type"] == "p4d.24xlarge"
        [persist] = found["gpu.persistence-daemon-off"]
        assert persist.evidence["unit_file_state"] == "disabled"
        assert persist.evidence["active_state"] in (None, "inactive")
        [runtime] = found["gpu.nvidia-runtime-missing"]
        assert runtime.evidence["containerd_config"] == "/etc/containerd/config.toml"
        [kernel] = found["gpu.module-missing-for-installed-kernel"]
        assert kernel.item == newer and kernel.evidence["newer_than_running"] is True
        # nothing of the GPU kernel log here (the containers share this machine's kernel: read, not assumed)
        log_events = snap["facts"]["network"]["kernel_log"]["events"]
        assert log_events["xid"] == 0 and log_events["fallen_off_bus"] == 0
        # the package half of the mismatch rule, with the /proc line of a real mismatch (CAP) beside it
        line, _ = proc_version_and_packages("illinois-scicomp-70-module-520-smi-525")
        mixed = copy.deepcopy(snap)
        mixed["facts"]["kernel"]["nvidia_driver"] = line
        [mismatch] = fired(mixed)["gpu.driver-library-mismatch"]
        assert {"name": "libnvidia-compute-535",
                "version": "535.183.01-0ubuntu0.22.04.1"} in mismatch.evidence["packages"]

        # fixes
        (root / "etc/apt/apt.conf.d/20auto-upgrades").write_text(
            'APT::Periodic::Update-Package-Lists "1";\nAPT::Periodic::Unattended-Upgrade "0";\n')
        (root / "etc/containerd/config.toml").write_text(CONTAINERD_NVIDIA)
        run("dpkg", "-P", f"linux-image-{newer}")  # the kernel the driver has no module for (or: reboot into it)
        run("rm", "-f", "/run/reboot-required", "/run/reboot-required.pkgs")
        run("dpkg", "-i", f"/var/tmp/gpupkg/{fm_fixed.name}")
        run("systemctl", "daemon-reload")
        run("systemctl", "reset-failed", "nvidia-fabricmanager.service")
        run("systemctl", "enable", "--now", "nvidia-fabricmanager.service", "nvidia-persistenced.service")
        fixed = collect(fleet, inv, tmp_path / "fixed")
        assert fired(fixed) == {}
        matched = copy.deepcopy(fixed)
        matched["facts"]["kernel"]["nvidia_driver"] = line.replace("520.56.06", "535.183.01")  # module reloaded
        assert fired(matched) == {}
    finally:
        fleet.exec(name, ["systemctl", "disable", "--now", "apt-daily-upgrade.timer", "nvidia-fabricmanager.service",
                          "nvidia-persistenced.service"])
        fleet.exec(name, ["dpkg", "-P", *packages])
        fleet.exec(name, ["rm", "-rf", "/var/tmp/gpupkg", "/etc/containerd", "/etc/apt/apt.conf.d/20auto-upgrades",
                          "/run/reboot-required", "/run/reboot-required.pkgs", f"/usr/lib/modules/{newer}"])
        if timer_masked:
            fleet.exec(name, ["systemctl", "mask", "apt-daily-upgrade.timer"])
        fleet.exec(name, ["systemctl", "daemon-reload"])
        fleet.exec(name, ["systemctl", "reset-failed"])
        for rel, data in saved.items():
            (root / rel).write_bytes(data)
        if saved_log is None:
            log.unlink(missing_ok=True)
        else:
            log.write_bytes(saved_log)
    after = manifest(root)
    assert {k: v for k, v in after.items() if before.get(k) != v} == {}
    assert sorted(set(before) - set(after)) == []
