"""Auditing an unbooted root filesystem (image:///path): files read offline, nothing executed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from auditor.errors import InputError
from auditor.models import HostSpec
from auditor.run.live_hosts import collect_host
from auditor.transport.image import image_root

KUBELET = "#!/bin/sh\ntouch /tmp/ami-auditor-image-kubelet-ran\necho 'Kubernetes v1.29.3'\n"


def make_root(root: Path) -> Path:
    """A small but real root filesystem: os-release, an enabled unit, a dpkg database, a kubelet."""
    (root / "etc/systemd/system/multi-user.target.wants").mkdir(parents=True)
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12"\n')
    (root / "etc/machine-id").write_text("")  # empty in images: generated at first boot
    (root / "etc/hostname").write_text("image-builder\n")
    (root / "usr/lib/systemd/system/ecs.service").write_text(
        "[Unit]\nDescription=ECS agent\n[Service]\nExecStart=/usr/libexec/amazon-ecs-init\n"
        "[Install]\nWantedBy=multi-user.target\n")
    os.symlink("/usr/lib/systemd/system/ecs.service", root / "etc/systemd/system/multi-user.target.wants/ecs.service")
    (root / "usr/lib/systemd/libsystemd-shared-252.so").write_bytes(b"")
    (root / "var/lib/dpkg/info").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(
        "Package: ecs-init\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.82.1-1\n"
        "Maintainer: x\nDescription: ECS init\n\n")
    (root / "var/lib/dpkg/info/ecs-init.list").write_text("/usr/libexec/amazon-ecs-init\n")
    (root / "usr/libexec").mkdir(parents=True)
    (root / "usr/libexec/amazon-ecs-init").write_text("#!/bin/sh\nexit 1\n")
    (root / "usr/libexec/amazon-ecs-init").chmod(0o755)
    (root / "usr/local/bin").mkdir(parents=True)
    kubelet = root / "usr/local/bin/kubelet"
    kubelet.write_text(KUBELET)
    kubelet.chmod(0o755)
    (root / "var/log").mkdir(parents=True)
    (root / "var/log/cloud-init-output.log").write_text(
        "+ curl -sSL -o /usr/local/bin/kubelet https://dl.k8s.io/release/v1.29.3/bin/linux/amd64/kubelet\n")
    return root


def test_image_snapshot_reads_files_offline_and_runs_nothing(tmp_path: Path) -> None:
    marker = Path("/tmp/ami-auditor-image-kubelet-ran")
    marker.unlink(missing_ok=True)
    root = make_root(tmp_path / "root")
    result = collect_host(HostSpec("img", f"image://{root}"), binaries=["kubelet", "ecs-init"])
    assert result.status == "ok", result.error
    snap = result.snapshot
    facts = snap["facts"]
    assert facts["os"]["pretty_name"] == "Debian GNU/Linux 12"
    assert facts["systemd"]["version"] == 252
    assert "ecs.service" in facts["systemd"]["enabled_units"]
    assert facts["systemd"]["units"] == []  # no runtime state in an unbooted image
    kubelet = next(b for b in facts["binaries"] if b["name"] == "kubelet")
    assert kubelet["path"] == "/usr/local/bin/kubelet" and kubelet["source_host"] == "dl.k8s.io"
    assert kubelet["version"] is None and not marker.exists()  # the image's binary was never executed
    ecs_init = next(b for b in facts["binaries"] if b["name"] == "ecs-init")
    assert ecs_init["package"] == "ecs-init" and ecs_init["version"] == "1.82.1-1"  # from the dpkg database
    assert facts["packages"]["items"] == [{"name": "ecs-init", "version": "1.82.1-1", "arch": "amd64"}]
    assert snap["host"]["hostname"] == "image-builder" and snap["host"]["machine_id"] is None
    for area in ("cgroups", "cpu", "network"):
        assert facts[area] is None and "unbooted image" in snap["not_applicable"][area] and area not in snap["errors"]


def test_image_target_must_be_a_root_filesystem(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a root filesystem"):
        image_root(f"image://{tmp_path}")
    with pytest.raises(InputError, match="three slashes"):
        image_root("image://host/path")
    result = collect_host(HostSpec("img", f"image://{tmp_path}/missing"))
    assert result.status == "error" and "not a root filesystem" in result.error


def unit(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


def test_unit_file_states_match_systemd(tmp_path: Path) -> None:
    """Enablement computed from the image's files, as `systemctl --root` reports it (systemd 252)."""
    root = make_root(tmp_path / "root")
    lib = "usr/lib/systemd/system"
    unit(root, f"{lib}/static.service", "[Service]\nExecStart=/bin/true\n")
    unit(root, f"{lib}/off.service", "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n")
    unit(root, f"{lib}/also.service", "[Service]\nExecStart=/bin/true\n[Install]\nAlso=off.service\n")
    unit(root, f"{lib}/getty@.service", "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=getty.target\n")
    unit(root, f"{lib}/masked.timer", "[Timer]\nOnCalendar=daily\n[Install]\nWantedBy=timers.target\n")
    unit(root, f"{lib}/sshd.service", "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
                                      "Alias=ssh-alias.service\n")
    unit(root, "usr/lib/systemd/system-preset/90-x.preset", "disable off.service\nenable getty@.service\n")
    os.symlink("sshd.service", root / f"{lib}/procps-like.service")
    os.symlink("/dev/null", root / "etc/systemd/system/masked.timer")
    os.symlink("/dev/null", root / "etc/systemd/system/static.service")
    os.symlink("masked.timer", root / f"{lib}/alias-of-masked.timer")
    os.symlink("/usr/lib/systemd/system/sshd.service", root / "etc/systemd/system/ssh-alias.service")
    os.symlink("/usr/lib/systemd/system/sshd.service", root / "etc/systemd/system/multi-user.target.wants/sshd.service")
    from auditor.image.fs import ImageFS
    from auditor.image.units import list_unit_files

    with ImageFS(root) as fs:
        mine = list_unit_files(fs).splitlines()
    assert [" ".join(r.split()) for r in mine] == [
        "alias-of-masked.timer masked enabled",
        "also.service indirect enabled",
        "ecs.service enabled enabled",
        "getty@.service disabled enabled",
        "masked.timer masked enabled",
        "off.service disabled disabled",
        "procps-like.service alias -",
        "ssh-alias.service alias -",
        "sshd.service enabled enabled",
        "static.service masked enabled",
    ]
    version = subprocess.run(["systemctl", "--version"], capture_output=True, text=True).stdout \
        if shutil.which("systemctl") else ""
    if version.startswith("systemd 252 "):  # the version these states were checked against
        ref = subprocess.run(["systemctl", f"--root={root}", "list-unit-files", "--no-legend", "--no-pager"],
                             capture_output=True, text=True, check=True).stdout
        assert sorted(" ".join(r.split()) for r in ref.splitlines() if r.strip()) == \
            [" ".join(r.split()) for r in mine]


def test_systemd_version_from_a_lib64_layout(tmp_path: Path) -> None:
    """Fedora/AL2023 keep the shared library in usr/lib64/systemd (the shell probe only knew usr/lib)."""
    root = make_root(tmp_path / "root")
    (root / "usr/lib/systemd/libsystemd-shared-252.so").unlink()
    (root / "usr/lib64/systemd").mkdir(parents=True)
    (root / "usr/lib64/systemd/libsystemd-shared-255.5-1.amzn2023.so").write_bytes(b"")
    snap = collect_host(HostSpec("img", f"image://{root}"), binaries=[]).snapshot
    assert snap["facts"]["systemd"]["version"] == 255
