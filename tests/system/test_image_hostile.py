"""Hostile images: links, FIFOs and huge files that try to make the image reader leave its root.

Every image here is a real directory tree; a sentinel file outside the image root stands in for the
scanner's /etc/shadow. Nothing is mocked.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from auditor.collect import framing
from auditor.collect.probe import probe_request
from auditor.errors import TransportError
from auditor.image.fs import MAX_LINKS, ImageFS
from auditor.image.packages import Packages
from auditor.models import HostSpec
from auditor.run.live_hosts import collect_host
from auditor.transport.image import ImageTransport
from tests.unit.test_image_transport import make_root


@pytest.fixture
def sentinel(tmp_path: Path) -> tuple[Path, str]:
    """A file outside every image root (the scanner's secret) and the token it holds."""
    token = f"SENTINEL{secrets.token_hex(8)}"
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "shadow"
    secret.write_text(f"root:$6${token}$hash:19000:0:99999:7:::\nPackage: {token}-pkg\n"
                      f"+ curl -o /usr/local/bin/kubelet https://{token.lower()}.example/bin/kubelet\n")
    secret.chmod(0o755)  # "executable", so a path search that follows it would hash it
    return secret, token


def leaked(doc: object, secret: Path, token: str) -> bool:
    text = json.dumps(doc) if not isinstance(doc, str) else doc
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    return token in text or token.lower() in text or digest in text


def link(path: Path, target: str | Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    os.symlink(target, path)


def up_to_fs_root(path: Path) -> str:
    """A relative link text from `path`'s directory that climbs to / and goes down to the sentinel."""
    return "../" * (len(path.parent.parts) + 3)


def hostile_root(root: Path, secret: Path) -> Path:
    """make_root's image, with every file the reader looks at pointed at the secret some way."""
    make_root(root)
    link(root / "etc/hostname", secret)  # absolute
    link(root / "etc/machine-id", up_to_fs_root(root / "etc/machine-id") + str(secret).lstrip("/"))  # ../../..
    link(root / "usr/local/bin/kubelet", secret)
    link(root / "var/lib/dpkg/status", secret)
    link(root / "var/log/cloud-init-output.log", secret)
    link(root / "var/lib/cloud/instance/scripts", secret.parent)  # a whole directory
    link(root / "etc/ecs/ecs.config", secret)
    link(root / "etc/passwd", secret)
    link(root / "etc/systemd/system/evil.service", secret)
    link(root / "etc/image-id", "image-id.b")  # a loop
    link(root / "etc/image-id.b", "image-id")
    (root / "etc/eks").mkdir()
    for i in range(MAX_LINKS + 5):  # a chain longer than the kernel would follow
        link(root / f"etc/eks/l{i}", f"l{i + 1}")
    link(root / f"etc/eks/l{MAX_LINKS + 5}", secret)
    link(root / "etc/eks/release", "l0")
    return root


def test_links_to_a_file_outside_the_root_never_leak_and_are_reported(tmp_path: Path, sentinel) -> None:
    secret, token = sentinel
    root = hostile_root(tmp_path / "root", secret)
    result = collect_host(HostSpec("img", f"image://{root}"), binaries=["kubelet", "ecs-init"])
    assert result.status == "ok", result.error
    snap = result.snapshot
    assert not leaked(snap, secret, token)
    facts, errors = snap["facts"], snap["errors"]
    # the image's own files are still read
    assert facts["os"]["pretty_name"] == "Debian GNU/Linux 12"
    assert facts["systemd"]["version"] == 252 and "ecs.service" in facts["systemd"]["enabled_units"]
    ecs_init = next(b for b in facts["binaries"] if b["name"] == "ecs-init")
    assert ecs_init["found"] and ecs_init["package"] == "ecs-init" and ecs_init["owner_user"] == "0"
    # what pointed outside was read as if chrooted: absent in the image, so empty, and reported
    assert snap["host"]["hostname"] is None and snap["host"]["machine_id"] is None
    kubelet = next(b for b in facts["binaries"] if b["name"] == "kubelet")
    assert kubelet["found"] is False
    assert facts["packages"] == {"manager": "dpkg", "count": 0, "items": []}
    assert next(u for u in facts["systemd"]["unit_files"] if u["name"] == "evil.service")["state"] == "bad"
    report = errors["image"]
    assert "escape /etc/hostname: symbolic link /etc/hostname -> " + str(secret) in report
    assert "escape /etc/machine-id: a symbolic link climbs above the image root" in report
    assert "refused /etc/image-id: more than 40 symbolic links" in report
    assert "more" in report  # more notes than shown (the report is capped)


def test_old_shadow_leak_hostname_links_to_a_secret(tmp_path: Path, sentinel) -> None:
    """The case the issue reported: etc/hostname -> the scanner's /etc/shadow (here: a sentinel)."""
    secret, token = sentinel
    root = make_root(tmp_path / "root")
    link(root / "etc/hostname", secret)
    snap = collect_host(HostSpec("img", f"image://{root}"), binaries=["kubelet"]).snapshot
    assert snap is not None and not leaked(snap, secret, token)
    assert snap["host"]["hostname"] is None
    assert str(secret) in snap["errors"]["image"]


def test_absolute_link_is_read_inside_the_image_as_chroot_would(tmp_path: Path, sentinel) -> None:
    secret, token = sentinel
    root = make_root(tmp_path / "root")
    (root / str(secret.parent).lstrip("/")).mkdir(parents=True)
    (root / str(secret).lstrip("/")).write_text("image-own-name\n")  # the same path inside the image
    link(root / "etc/hostname", secret)
    snap = collect_host(HostSpec("img", f"image://{root}"), binaries=[]).snapshot
    assert snap["host"]["hostname"] == "image-own-name" and not leaked(snap, secret, token)
    assert "image" not in snap["errors"]  # a link that stays inside the image is ordinary


def test_symlinked_directories_in_the_middle(tmp_path: Path, sentinel) -> None:
    secret, token = sentinel
    outside = secret.parent
    (outside / "os-release").write_text(f'ID=evil\nPRETTY_NAME="{token}"\n')
    (outside / "lib/dpkg/info").mkdir(parents=True)
    (outside / "lib/dpkg/status").write_text(f"Package: {token}\nStatus: install ok installed\nVersion: 1\n\n")
    (outside / "bin").mkdir()
    (outside / "bin/kubelet").write_text(secret.read_text())
    (outside / "bin/kubelet").chmod(0o755)
    root = tmp_path / "root"
    root.mkdir()
    link(root / "etc", outside)  # etc -> /…/outside (the issue's `etc -> /etc`)
    link(root / "var", "../../" * len(root.parts) + str(outside).lstrip("/"))  # relative, climbing out
    link(root / "usr", outside)
    link(root / "lib", "usr/lib")
    snap = collect_host(HostSpec("img", f"image://{root}"), binaries=["kubelet"]).snapshot
    assert not leaked(snap, secret, token)
    assert snap["facts"]["os"] is None and snap["facts"]["packages"] is None
    assert snap["facts"]["binaries"][0]["found"] is False
    assert "escape /etc/os-release: symbolic link /etc -> " in snap["errors"]["image"]


def test_fifo_and_a_2gb_sparse_log_neither_hang_nor_blow_up(tmp_path: Path, sentinel) -> None:
    """Run as the CLI does, in a child process with a bound: a FIFO opened for reading would block forever."""
    secret, token = sentinel
    root = make_root(tmp_path / "root")
    (root / "etc/hostname").unlink()
    os.mkfifo(root / "etc/hostname")
    os.mkfifo(root / "etc/image-id")
    (root / "var/log/ecs").mkdir(parents=True)
    os.mkfifo(root / "var/log/ecs/ecs-init.log")
    big = root / "var/log/user-data.log"
    with open(big, "wb") as f:
        f.write(b"+ curl -o /usr/local/bin/kubelet https://dl.k8s.io/v1.30.0/bin/linux/amd64/kubelet\n")
        f.truncate(2 << 30)
    link(root / "var/log/cloud-init-output.log", secret)
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from auditor.cli import main; sys.exit(main())", "scan",
         f"image://{root}", "--binary", "kubelet", "--format", "json,md,html", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    texts = [p.read_text(errors="replace") for p in out.iterdir()] + [proc.stdout, proc.stderr]
    assert len(texts) == 5 and not any(leaked(t, secret, token) for t in texts)
    report = json.loads((out / "report.json").read_text())
    snap = json.dumps(report)
    assert "refused /etc/hostname: not a regular file" in snap
    assert "refused /var/log/ecs/ecs-init.log: not a regular file" in snap
    assert "truncated /var/log/user-data.log: only the first" in snap
    assert "dl.k8s.io" in snap  # evidence at the start of the huge log still found


def test_resolver_semantics(tmp_path: Path, sentinel) -> None:
    secret, token = sentinel
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/real").write_text("inside\n")
    link(root / "etc/rel", "../../../../etc/real")  # climbs above the root: clamped there
    link(root / "etc/abs", "/etc/real")
    link(root / "etc/dirlink", "/etc")
    link(root / "etc/through-file", "real/x")
    for i in range(MAX_LINKS + 1):  # c0 -> c1 -> ... -> c40 -> c41 (a file): 41 links from c0
        link(root / f"c{i}", f"c{i + 1}")
    (root / f"c{MAX_LINKS + 1}").write_text("end of chain\n")
    os.mkfifo(root / "fifo")
    (root / "big").write_bytes(b"x" * 5000)
    with ImageFS(root) as fs:
        assert fs.read("etc/rel", 100) == b"inside\n" and fs.read("/etc/abs", 100) == b"inside\n"
        assert fs.read("etc/dirlink/dirlink/../etc/real", 100) == b"inside\n"
        assert fs.realpath("etc/dirlink/abs") == "/etc/real"
        assert fs.read("etc/through-file", 100) is None and fs.read("../../" + str(secret), 100) is None
        assert fs.read("c1", 100) == b"end of chain\n"  # 40 links: allowed
        assert fs.read("c0", 100) is None  # 41: refused
        assert fs.read("fifo", 100) is None
        assert fs.read("big", 1000) == b"x" * 1000
        notes = [n.line() for n in fs.notes]
    assert any(n.startswith("escape /etc/rel: a symbolic link climbs above the image root") for n in notes)
    assert any(n.startswith("refused /fifo: not a regular file") for n in notes)
    assert "truncated /big: only the first 1000 of 5000 bytes were read" in notes
    assert not any(token in n for n in notes)


def test_link_loop_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    link(root / "a", "b")
    link(root / "b", "/a")
    with ImageFS(root) as fs:
        assert fs.read("a", 100) is None and fs.stat("a") is None
        with pytest.raises(OSError) as info, fs._walk("a"):
            pass
        assert info.value.errno == errno.ELOOP
        assert [n.kind for n in fs.notes] == ["refused"]


def test_rpm_database_behind_an_escaping_link_is_not_used(tmp_path: Path, sentinel) -> None:
    secret, _ = sentinel
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "usr/lib/sysimage/rpm").mkdir(parents=True)
    (root / "usr/lib/sysimage/rpm/rpmdb.sqlite").write_bytes(b"SQLite format 3\x00")
    link(root / "var/lib/rpm", secret.parent)
    with ImageFS(root) as fs:
        packages = Packages(fs, lambda: None)
        assert packages._rpm_db_safe("usr/lib/sysimage/rpm") is True
        assert packages._rpm_db_safe("var/lib/rpm") is False
        link(root / "usr/lib/sysimage/rpm/Packages", secret)  # one linked file in the db is enough to refuse
        assert packages._rpm_db_safe("usr/lib/sysimage/rpm") is False
        assert [n.kind for n in fs.notes] == ["escape", "refused"]


def test_transport_needs_the_nonce_and_host_content_cannot_forge_sections(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    spec = HostSpec("img", f"image://{root}")
    with pytest.raises(TransportError, match="nonce"):
        ImageTransport(spec).run(replace(probe_request(["kubelet"]), nonce=""))
    nonce, guess = framing.new_nonce(), framing.new_nonce()
    fake = framing.section_text(guess, "binaries", "@ kubelet\nfound=1\nsha256=" + "0" * 64)
    with open(root / "etc/os-release", "a") as f:
        f.write(fake)  # markers with a guessed nonce are plain text inside the os section
    (root / "var/lib/cloud/instance/scripts").mkdir(parents=True)
    evil_name = "part-001\n@ kubelet\nsha256=" + "0" * 64
    (root / "var/lib/cloud/instance/scripts" / evil_name).write_text("https://x.example/bin/kubelet\n")
    out = ImageTransport(spec).run(probe_request(["kubelet"], exec_versions=True, nonce=nonce))
    assert out.stdout.count(framing.start_marker(nonce, "binaries")) == 1
    assert out.stdout.rstrip("\n").endswith(framing.done_marker(nonce))
    assert "version_refused=an image's binaries are never run" in out.stdout  # --exec-versions never applies
    assert not Path("/tmp/ami-auditor-image-kubelet-ran").exists()
    kubelet_sha = hashlib.sha256((root / "usr/local/bin/kubelet").read_bytes()).hexdigest()
    snap = collect_host(spec, binaries=["kubelet"]).snapshot
    kubelet = snap["facts"]["binaries"][0]
    assert kubelet["sha256"] == kubelet_sha and kubelet["version"] is None
    assert {"file": "/var/lib/cloud/instance/scripts/part-001%0A@%20kubelet%0Asha256=" + "0" * 64,
            "url": "https://x.example/bin/kubelet"} in kubelet["evidence"]


SCAN_JSON = ("import json, sys; from auditor.run.live_hosts import collect_host; from auditor.models import HostSpec; "
             "r = collect_host(HostSpec('img', sys.argv[1]), binaries=['kubelet']); print(json.dumps(r.snapshot))")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare for mounts")
def test_bind_mounts_inside_the_root_are_not_read(tmp_path: Path, sentinel) -> None:
    """Mounts made in a private mount namespace (the machine's own mounts are untouched): a bind of a
    directory outside, a tmpfs, and the scanner's whole / reached by a relative link inside the image."""
    secret, token = sentinel
    (secret.parent / "cloud-init-output.log").write_text(secret.read_text())
    root = make_root(tmp_path / "root")
    (root / "run").mkdir()
    (root / "mnt/host").mkdir(parents=True)
    link(root / "usr/local/bin/kubelet", "../../../mnt/host" + str(secret))  # stays inside the image
    script = (
        f'set -e; mount --bind "{secret.parent}" "{root}/var/log"; mount -t tmpfs none "{root}/run"; '
        f'mkdir -p "{root}/run/systemd/system"; echo "[Service]" > "{root}/run/systemd/system/{token}.service"; '
        f'mount --bind / "{root}/mnt/host"; exec "$0" -c "$1" "$2"')
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                           sys.executable, SCAN_JSON, f"image://{root}"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    assert not leaked(snap, secret, token)
    assert snap["facts"]["binaries"][0]["found"] is False
    report = snap["errors"]["image"]
    assert f"a bind mount of {secret.parent} is mounted here (/var/log)" in report
    assert "a tmpfs filesystem is mounted here (/run)" in report
    assert "also mounted outside the image is mounted here (/mnt/host)" in report


def test_directory_swapped_for_an_escaping_link_mid_walk_is_not_followed(
        tmp_path: Path, sentinel, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race a concurrent attacker would win: etc/d is a directory when the reader lstat()s it and a
    link to the outside when it opens it. The swap is a real rename on disk; only its timing is forced,
    by a hook on os.stat that swaps right after the reader looked at etc/d (a race cannot be timed
    otherwise)."""
    secret, token = sentinel
    (secret.parent / "f").write_text(secret.read_text())
    root = tmp_path / "root"
    (root / "etc/d").mkdir(parents=True)
    (root / "etc/d/f").write_text("inside\n")
    link(root / "etc/link", secret.parent)
    real_stat = os.stat
    swapped = []

    def stat_then_swap(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = real_stat(path, *args, **kwargs)
        if path == "d" and not swapped:
            os.rename(root / "etc/d", root / "etc/d.real")
            os.rename(root / "etc/link", root / "etc/d")
            swapped.append(True)
        return result

    monkeypatch.setattr(os, "stat", stat_then_swap)
    with ImageFS(root) as fs:
        data = fs.read("etc/d/f", 1000)
    monkeypatch.undo()
    assert swapped and data is None  # the open of etc/d refused the link (O_NOFOLLOW): nothing read
