"""The AMI hygiene pack (rules/image.yaml): what an image must not carry, found without reading secrets.

Image roots are real directories (and, on the fleet, the real roots of booted hosts); the live-host
side runs the real probe over SSH against the same filesystem the image reader reads.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from auditor.collect.probe import DEFAULT_BINARIES
from auditor.judge.engine import Judge
from auditor.judge.params import parse_set
from auditor.judge.rules import load_rules
from auditor.models import HostSpec
from auditor.run.live_hosts import collect_host
from auditor.targets.inventory import load_inventory
from tests.unit.test_image_transport import make_root

SECRET = "hunter2-SUPERSECRET-value"
IDENTITY_RULES = {"image.ssh-host-keys-baked", "image.machine-id-populated", "image.cloud-init-state",
                  "image.shell-history", "image.root-authorized-keys"}


def judge(snap: dict) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in Judge(load_rules(builtin=True)).judge(snap):
        if f.rule.startswith("image."):
            out.setdefault(f.rule, []).append(f)
    return out


def image(root: Path) -> dict:
    result = collect_host(HostSpec(root.name, f"image://{root}"), binaries=[])
    assert result.status == "ok", result.error
    return result.snapshot


def dirty(root: Path) -> Path:
    """A build instance's leftovers: keys, machine-id, cloud-init state, history, credentials, a big cache."""
    make_root(root)
    (root / "etc/ssh").mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "etc/ssh/ssh_host_ed25519_key")],
                   check=True)
    (root / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    (root / "var/lib/cloud/instances/i-0123456789abcdef0").mkdir(parents=True)
    (root / "root/.ssh").mkdir(parents=True)
    (root / "root/.ssh/authorized_keys").write_text("# builder\nssh-ed25519 AAAAC3Nza builder@ci\n")
    (root / "root/.bash_history").write_text(f"export DB_PASSWORD={SECRET}\n")
    (root / "home/ubuntu/.aws").mkdir(parents=True)
    (root / "home/ubuntu/.aws/credentials").write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    (root / "etc/environment").write_text(f'PATH="/usr/bin"\nGITHUB_TOKEN="{SECRET}"\n')
    (root / "etc/default").mkdir()
    (root / "etc/default/app").write_text("AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP\n")
    (root / "var/cache/apt/archives").mkdir(parents=True)
    (root / "var/cache/apt/archives/big.deb").write_bytes(os.urandom(3 << 20))
    return root


def test_hygiene_pack_flags_a_dirty_image_without_reading_its_secrets(tmp_path: Path) -> None:
    snap = image(dirty(tmp_path / "dirty"))
    assert SECRET not in json.dumps(snap) and "AKIAABCDEFGHIJKLMNOP" not in json.dumps(snap)
    hygiene = snap["facts"]["hygiene"]
    pub = (tmp_path / "dirty/etc/ssh/ssh_host_ed25519_key.pub")
    keygen = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True).stdout
    assert hygiene["ssh_host_keys"] == [{"path": "/etc/ssh/ssh_host_ed25519_key", "type": "ed25519",
                                         "fingerprint": keygen.split()[1]}]
    assert {c["path"]: c["kinds"] for c in hygiene["credential_files"]} == {
        "/etc/default/app": ["aws-access-key-id"], "/etc/environment": ["secret-variable"],
        "/home/ubuntu/.aws/credentials": ["aws-credentials"]}
    found = judge(snap)
    assert set(found) == IDENTITY_RULES | {"image.credential-file"}  # 3 MiB cache is under the 100 MiB default
    assert len(found["image.credential-file"]) == 3
    assert hygiene["machine_id_state"] == "populated" and "0123456789abcdef" not in json.dumps(hygiene)
    small = Judge(load_rules(builtin=True, overrides=[parse_set("image.package_cache_max_mb=1")])).judge(snap)
    assert [f.evidence["path"] for f in small if f.rule == "image.package-cache"] == ["/var/cache/apt"]


def test_hygiene_pack_is_silent_on_a_clean_image(tmp_path: Path) -> None:
    root = make_root(tmp_path / "clean")
    (root / "etc/machine-id").write_text("uninitialized\n")
    (root / "etc/ssh").mkdir()
    (root / "etc/ssh/sshd_config").write_text("PermitRootLogin no\n")
    (root / "root/.ssh").mkdir(parents=True)
    (root / "root/.ssh/authorized_keys").write_text("")
    (root / "root/.bash_history").write_text("")
    snap = image(root)
    assert snap["facts"]["hygiene"]["image"] is True
    assert judge(snap) == {}


@pytest.fixture
def overlay(tmp_path: Path) -> Iterator[callable]:
    """overlay(lower) → a writable copy-on-write view of `lower` (unmounted after the test)."""
    mounted: list[Path] = []

    def make(lower: Path) -> Path:
        n = len(mounted)
        upper, work, merged = (tmp_path / f"o{n}-{d}" for d in ("upper", "work", "merged"))
        for d in (upper, work, merged):
            d.mkdir()
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lower},upperdir={upper},workdir={work}", str(merged)],
                       check=True, capture_output=True)
        mounted.append(merged)
        return merged

    yield make
    for m in reversed(mounted):
        subprocess.run(["umount", str(m)], check=False)


@pytest.mark.fleet
def test_fleet_golden_root_as_an_image_and_a_cleaned_copy(fleet, overlay) -> None:
    """golden's real root read as an image: baked host keys, machine-id, root's key; cleaned: silent."""
    golden = fleet.host("golden").root
    found = judge(image(golden))
    keys = {f.evidence["path"] for f in found["image.ssh-host-keys-baked"]}
    assert keys == {f"/etc/ssh/ssh_host_{k}_key" for k in ("ecdsa", "ed25519", "rsa")}
    assert found["image.machine-id-populated"] and found["image.root-authorized-keys"]
    assert "image.credential-file" not in found
    clean = overlay(golden)
    for key in (clean / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (clean / "etc/machine-id").write_text("")
    (clean / "root/.ssh/authorized_keys").unlink()
    assert judge(image(clean)) == {}


@pytest.mark.fleet
def test_live_probe_and_image_reader_agree_on_the_same_filesystem(fleet) -> None:
    """The probe (over SSH, inside a1) and the image reader (a1's root from outside) give the same facts;
    on the live host the identity rules stay silent (a host must have its own keys)."""
    spec = next(s for s in load_inventory(fleet.inventory_path) if s.name == "a1")
    live = collect_host(spec, DEFAULT_BINARIES).snapshot
    offline = image(fleet.host("a1").root)
    live_h, off_h = dict(live["facts"]["hygiene"]), dict(offline["facts"]["hygiene"])
    assert (live_h.pop("image"), off_h.pop("image")) == (False, True)
    live_caches, off_caches = live_h.pop("package_caches"), off_h.pop("package_caches")
    assert [c["path"] for c in live_caches] == [c["path"] for c in off_caches]  # sizes: du vs st_blocks
    assert live_h == off_h and len(live_h["ssh_host_keys"]) == 3
    # the configuration files (sysctl.d, apt, units, resolv.conf, …): one reading, live or offline
    assert live["facts"]["config"] == offline["facts"]["config"] and live["facts"]["config"]["files"]
    assert live["facts"]["kernel"]["installed"] == offline["facts"]["kernel"]["installed"]
    assert set(judge(live)) == set()
