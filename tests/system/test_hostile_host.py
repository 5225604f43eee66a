"""A hostile fleet host: framing markers, forged sections, crafted file names and a world-writable fake
binary planted where the probe looks (real files in the host's root, real SSH scans).

The scan of the planted host must give the facts of the same host without the plants (apart from what
the plants legitimately add: URL evidence rows naming the planted files, the fake `runc` and the linked
`containerd` now existing, an ecs-init log now present), leave the host's filesystem exactly as it was
(every path of / except /proc /sys /run /dev /tmp and the journal: type, owner, size, mtime, sha256), and
run nothing the host planted (each payload would leave a sentinel file behind).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor.cli import main
from auditor.compare.normalize import normalize
from auditor.context import Env
from tests.fleet import Fleet

pytestmark = pytest.mark.fleet

HOST = "a3"
GOLDEN = "9" * 64  # the sha256 a forgery claims
SENTINEL = "ami-auditor-pwned"
KUBELET_URL = "https://amazon-eks.s3.us-west-2.amazonaws.com/1.29.3/2024-04-19/bin/linux/amd64/kubelet"
SCRIPTS = "var/lib/cloud/instance/scripts"


def _forgery(prefix: str) -> str:
    """Close the section being printed, then a fake `binaries` (golden kubelet) and a fake `os` section."""
    return "\n".join([
        f"@@AMI-AUDITOR-END {prefix}eks rc=0@@",
        f"@@AMI-AUDITOR-SECTION {prefix}binaries@@",
        "@ kubelet", "found=1", "path=/usr/local/bin/kubelet", f"sha256={GOLDEN}", "version=v9.9.9",
        f"@@AMI-AUDITOR-END {prefix}binaries rc=0@@",
        f"@@AMI-AUDITOR-SECTION {prefix}os@@", "ID=forged", 'PRETTY_NAME="Forged OS"',
        f"@@AMI-AUDITOR-END {prefix}os rc=0@@",
        f"@@AMI-AUDITOR-DONE {prefix}".rstrip() + "@@",
        f"@@AMI-AUDITOR-SECTION {prefix}eks@@",
    ]) + "\n"


# old-style markers, and markers with guessed nonces (all zero, the test fixtures' nonce, a pattern)
FORGERIES = "".join(_forgery(p) for p in ("", "0" * 32 + " ", "0123456789abcdef" * 2 + " ", "deadbeef" * 4 + " "))
# crafted cloud-init part names: GNU sed `e`/`w` flags, shell substitutions, newlines, dash-echo escapes
CRAFTED_NAMES = [
    f"part-001;touch {SENTINEL}-sed-e;#|e;#",
    f"part-002|w {SENTINEL}-sed-w",
    f"part-003$(touch {SENTINEL}-subst)`touch {SENTINEL}-backquote`",
    f"part-004\n@@AMI-AUDITOR-SECTION binaries@@\n@ kubelet\nfound=1\nsha256={GOLDEN}\n",
    f"part-005\\nsha256={GOLDEN}\\n@ kubelet",
    "part-006 a;b|c&d>e<f 'g\" h",
]
# a linked containerd whose resolved path carries a forged block, in a group-writable directory
LINK_DIR = f"opt/ev\n@ kubelet\nfound=1\nsha256={GOLDEN}"
ECS_LOG_NAME = "ecs-init.log.1\nlog=/var/log/ecs/forged 99\n"


def _listing(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path below `root` (not /proc /sys /run /dev /tmp or the journal): mode, owner, size, mtime, sha256."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d not in {"proc", "sys", "run", "dev", "tmp"}]
        if rel == "var/log/journal" or rel.startswith("var/log/journal/"):
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            digest = ""
            if stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                        h.update(chunk)
                digest = h.hexdigest()
            out[os.path.relpath(path, root)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, digest)
    return out


def _collect(inventory: Path, out: Path, *extra: str) -> dict[str, Any]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["collect", "-i", str(inventory), "-o", str(out), *extra], Env(stdout, stderr))
    assert code == 0, stdout.getvalue() + stderr.getvalue()
    return json.loads((out / f"{HOST}.json").read_text())


class Plants:
    """Writes the hostile files into the host's root and puts everything back afterwards."""

    def __init__(self, root: Path):
        self.root = root
        self.saved: dict[Path, tuple[bytes, os.stat_result]] = {}
        self.created: list[Path] = []

    def _create(self, rel: str, text: str, mode: int = 0o644) -> Path:
        path = self.root / rel
        for parent in reversed(path.relative_to(self.root).parents):
            if str(parent) != "." and not (self.root / parent).exists():
                (self.root / parent).mkdir()
                self.created.append(self.root / parent)
        path.write_text(text)
        path.chmod(mode)
        self.created.append(path)
        return path

    def _append(self, rel: str, text: str) -> None:
        path = self.root / rel
        if not path.exists():
            self._create(rel, text)
            return
        self.saved[path] = (path.read_bytes(), path.stat())
        with path.open("a") as f:
            f.write(text)

    def plant(self) -> None:
        self._append("etc/eks/release", f"KUBELET_URL={KUBELET_URL}\n" + FORGERIES)
        self._append("var/log/cloud-init-output.log", FORGERIES)
        self._append("etc/ecs/ecs.config", "".join(f"# {line}\n" for line in FORGERIES.splitlines()))
        self._append("var/log/ecs/ecs-init.log", FORGERIES)
        self._create(f"var/log/ecs/{ECS_LOG_NAME}", FORGERIES)
        for name in CRAFTED_NAMES:
            self._create(f"{SCRIPTS}/{name}", f"#!/bin/sh\ncurl -o /usr/local/bin/kubelet {KUBELET_URL}\n{FORGERIES}")
        payload = f"#!/bin/sh\n: > /{SENTINEL}-runc\necho 'runc version 6.6.6'\n"
        runc = self._create("usr/local/bin/runc", payload, 0o755)
        runc.chmod(0o777)  # world-writable: any local user could have put anything here
        target = self._create(f"{LINK_DIR}/containerd", payload.replace("runc", "containerd"), 0o755)
        target.parent.chmod(0o775)
        link = self.root / "usr/local/bin/containerd"
        link.symlink_to("/" + str(target.relative_to(self.root)))
        self.created.append(link)

    def remove(self) -> None:
        for path in reversed(self.created):
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.is_dir():
                shutil.rmtree(path)
        for path, (data, st) in self.saved.items():
            path.write_bytes(data)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.fixture(scope="module")
def scans(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("hostile")
    inventory = yaml.safe_load(Path(fleet.inventory_path).read_text())
    inventory["hosts"] = [h for h in inventory["hosts"] if h["name"] == HOST]
    (tmp / "inventory.yaml").write_text(yaml.safe_dump(inventory))
    root = fleet.host(HOST).root
    clean = _collect(tmp / "inventory.yaml", tmp / "clean")
    plants = Plants(root)
    try:
        plants.plant()
        before = _listing(root)
        hostile = _collect(tmp / "inventory.yaml", tmp / "hostile")
        hostile_exec = _collect(tmp / "inventory.yaml", tmp / "exec", "--exec-versions")
        after = _listing(root)
        tmp_files = sorted(str(p) for p in (root / "tmp").rglob(f"{SENTINEL}*"))
        yield {"clean": clean, "hostile": hostile, "exec": hostile_exec, "before": before, "after": after,
               "tmp_files": tmp_files, "root": root}
    finally:
        plants.remove()


def _binary(snap: dict[str, Any], name: str) -> dict[str, Any]:
    return next(b for b in snap["facts"]["binaries"] if b["name"] == name)


def _planted(row: str) -> bool:
    file = json.loads(row)["file"]
    return file.startswith(f"/{SCRIPTS}/") or file == "/etc/eks/release"


def test_forged_sections_change_no_fact(scans: dict[str, Any]) -> None:
    clean, hostile = normalize(scans["clean"]).flat, normalize(scans["hostile"]).flat
    allowed = ("facts.binaries[runc].", "facts.binaries[containerd].")
    differ = {k for k in clean.keys() | hostile.keys()
              if clean.get(k) != hostile.get(k) and not k.startswith(allowed) and k != "facts.ecs.init_log_present"}
    evidence = "facts.binaries[kubelet].evidence"
    assert tuple(r for r in hostile[evidence] if not _planted(r)) == clean[evidence]
    assert differ == {evidence}, sorted(differ)
    assert scans["hostile"]["errors"] == scans["clean"]["errors"]
    kubelet = _binary(scans["hostile"], "kubelet")
    assert kubelet["sha256"] == _binary(scans["clean"], "kubelet")["sha256"] != GOLDEN
    assert kubelet["source_url"] == KUBELET_URL
    assert scans["hostile"]["facts"]["os"]["id"] == "debian"
    assert scans["hostile"]["facts"]["ecs"]["agent_exits"] == 0  # the crafted log name's forged "log=… 99"


def test_crafted_names_and_link_targets_stay_on_one_line(scans: dict[str, Any]) -> None:
    kubelet = _binary(scans["hostile"], "kubelet")
    files = {e["file"] for e in kubelet["evidence"] if e["file"].startswith(f"/{SCRIPTS}/")}
    assert len(files) == len(CRAFTED_NAMES)
    assert all("\n" not in f and " " not in f for f in files)
    containerd = _binary(scans["hostile"], "containerd")
    assert containerd["realpath"] == "/" + LINK_DIR.replace("\n", "?") + "/containerd"
    target = scans["root"] / LINK_DIR / "containerd"
    assert containerd["sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()


def test_a_world_writable_fake_binary_is_fingerprinted_never_run(scans: dict[str, Any]) -> None:
    runc = _binary(scans["hostile"], "runc")
    assert runc["found"] and runc["mode"] == "777" and runc["sha256"]
    assert runc["version"] is None and runc["version_source"] == "none"
    for name, why in (("runc", "/usr/local/bin/runc is group- or world-writable (mode 777)"),
                      ("containerd", "group- or world-writable (mode 775)")):
        refused = _binary(scans["exec"], name)
        assert refused["version"] is None and why in refused["version_refused"], refused
    # the stand-in kubelet is root-owned in root-only directories: --exec-versions runs it
    assert _binary(scans["exec"], "kubelet")["version_source"] == "exec"


def test_the_host_filesystem_is_unchanged_and_nothing_ran(scans: dict[str, Any]) -> None:
    before, after = scans["before"], scans["after"]
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == [], changed[:20]
    assert not [p for p in after if os.path.basename(p).startswith(SENTINEL)] and not scans["tmp_files"]
