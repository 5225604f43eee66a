"""A probe run without root never passes clean (issue 37, item 2).

`scan local` by a real non-root user (useradd, then runuser) and the probe over SSH as a user without sudo:
a file or directory the user may not read is that fact's named failure (shell_histories, root_authorized_keys,
package_caches…), the hygiene area is read in part (its other facts stand), the host incomplete (exit 3),
and the terminal says once which facts root would add. Before the fix the unreadable /root read as "no
history there", and a `du` denied on apt's `archives/partial` (0700 _apt on real hosts) failed the whole
hygiene area instead (every hygiene rule "could not be evaluated").

The local case runs in a private mount namespace where /root and /var/cache/apt are a real host's: /root
0700 holding a shell history, apt's cache with `archives/partial` 0700 _apt and a 3 MiB package. The
interpreter (which lives under /root on this machine) is bind-mounted where the user may run it.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from auditor.models import HostSpec, SSHOptions
from auditor.run.live_hosts import collect_host
from tests.paths import ROOT
from tests.system.test_ssh_transport import IN_CI, SSHD, _ensure_user, _keygen, _start_sshd

USER = "audnonroot"
_missing = [t for t in (SSHD, "useradd", "runuser", "unshare", "mount") if not shutil.which(t)]
pytestmark = pytest.mark.skipif(not IN_CI and (os.geteuid() != 0 or bool(_missing)),
                                reason=f"needs root and {', '.join(_missing) or 'sshd'}")
APT_USER = "_apt" if any(p.pw_name == "_apt" for p in pwd.getpwall()) else "nobody"


@pytest.fixture(scope="module")
def user() -> Iterator[str]:
    _ensure_user(USER)
    try:
        yield USER
    finally:
        subprocess.run(["userdel", "-r", USER], capture_output=True, check=False)


def real_host_dirs(base: Path) -> tuple[Path, Path]:
    """A /root and a /var/cache/apt as on a real host (bind-mounted over the real ones in the namespace)."""
    home = base / "root"
    home.mkdir()
    home.chmod(0o700)
    (home / ".bash_history").write_text("export DB_PASSWORD=hunter2\n")
    apt = base / "apt"
    (apt / "archives/partial").mkdir(parents=True)
    (apt / "archives/big.deb").write_bytes(os.urandom(3 << 20))
    shutil.chown(apt / "archives/partial", APT_USER)
    (apt / "archives/partial").chmod(0o700)
    return home, apt


HYGIENE = ("-c 'import json; from auditor.run.live_hosts import collect_host; from auditor.models import HostSpec; "
           "print(json.dumps(collect_host(HostSpec(\"local\", \"local\"), binaries=[]).snapshot))'")
SCAN = "-m auditor.cli scan local --no-store --binary kubelet --format json"


def scan_local(base: Path, as_user: str | None, args: str = SCAN) -> tuple[subprocess.CompletedProcess[str], dict]:
    """`scan local` (JSON on stdout, the summary on stderr), or other `args`, in a mount namespace with the
    host's /root and apt cache replaced by `real_host_dirs`, as `as_user` (None: root)."""
    prefix = Path(sys.base_prefix)
    packages = [Path(p) for p in site.getsitepackages() if Path(p).is_relative_to(prefix)]
    if not packages:
        pytest.skip("the interpreter's packages are not under its prefix (a venv): cannot lend it to a user")
    python = base / "python"
    python.mkdir(exist_ok=True)
    lent = [str(python / p.relative_to(prefix)) for p in packages]
    home, apt = base / "root", base / "apt"
    env = f"env HOME=/tmp LD_LIBRARY_PATH={python}/lib PYTHONPATH={ROOT}:{':'.join(lent)}"
    run = f"{env} {python}/bin/python3 {args}"
    script = (f"set -e; mount --bind {prefix} {python}; mount --bind {home} /root; "
              f"mount --bind {apt} /var/cache/apt; cd /tmp; "
              + (f"exec runuser -u {as_user} -- {run}" if as_user else f"exec {run}"))
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=180, check=False)
    report = json.loads(proc.stdout) if proc.stdout.startswith("{") else {}
    return proc, report


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="auditor-nonroot-"))
    path.chmod(0o755)
    real_host_dirs(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_root_sees_the_history_and_the_cache(base: Path) -> None:
    """The reference: the same namespace scanned by root reads both facts (so the non-root test is no
    vacuous "nothing there")."""
    proc, snapshot = scan_local(base, None, HYGIENE)
    assert "hygiene" not in snapshot["errors"], snapshot["errors"]
    hygiene = snapshot["facts"]["hygiene"]
    assert {"path": "/root/.bash_history", "bytes": 27} in hygiene["shell_histories"], hygiene
    apt = next(c for c in hygiene["package_caches"] if c["path"] == "/var/cache/apt")
    assert apt["mb"] is not None and apt["mb"] >= 3, hygiene


def test_a_non_root_scan_names_what_it_could_not_read(base: Path, user: str) -> None:
    proc, report = scan_local(base, user)
    assert proc.returncode == 3, proc.stderr  # never 0: not clean without proof
    (host,) = report["hosts"]
    assert host["status"] == "ok" and host["complete"] is False and "hygiene" in host["failed_areas"]
    reason = host["collector_errors"]["hygiene"]
    assert "shell_histories not read: /root: Permission denied" in reason, reason
    assert "root_authorized_keys not read: /root: Permission denied" in reason, reason
    assert ("package_caches not read: /var/cache/apt: du: cannot read directory '/var/cache/apt/archives/partial'"
            in reason), reason
    # only those facts: the area's other facts stand, so its rules are evaluated (no "could not be evaluated")
    unknown = [f for f in report["findings"] if "hygiene not collected" in f["title"]]
    assert unknown == [], [f["title"] for f in unknown]
    # the terminal says it once, on the host's line
    said = [ln for ln in proc.stderr.splitlines() if "permission denied, so unknown" in ln]
    assert len(said) == 1 and "shell_histories" in said[0] and "package_caches" in said[0], proc.stderr
    assert "root would read them" in said[0]


def test_the_probe_over_ssh_without_sudo_names_what_it_could_not_read(base: Path, user: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The same probe through a real sshd as the user, `sudo: false`: /root (0700 root on this host, as on
    any Debian) cannot be entered, and says so."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    tmp_path = base / "sshd"  # sshd reads the authorized keys as the user: a path the user may enter
    tmp_path.mkdir()
    key = _keygen(tmp_path / "client")
    authorized = tmp_path / "authorized_keys"
    authorized.write_text(Path(f"{key}.pub").read_text())
    authorized.chmod(0o644)
    (tmp_path / "empty_ssh_config").write_text("")
    sshd = _start_sshd(tmp_path, "nonroot", authorized)
    try:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.kh_line)
        opts = SSHOptions(identity_file=str(key), known_hosts=str(known), ssh_config=str(tmp_path / "empty_ssh_config"),
                          sudo=False)
        result = collect_host(HostSpec("nonroot", f"ssh://{user}@127.0.0.1:{sshd.port}", ssh=opts), binaries=[],
                              deadline_s=60)
    finally:
        sshd.proc.terminate()
        sshd.proc.wait(timeout=10)
    assert result.status == "ok", result.error
    assert not result.complete
    assert result.snapshot is not None
    assert "shell_histories not read: /root: Permission denied" in result.snapshot["errors"]["hygiene"]
    assert result.snapshot["facts"]["hygiene"] is not None  # read in part, not failed whole


@pytest.mark.fleet
def test_over_ssh_without_sudo_on_a_fleet_host_whose_apt_is_as_a_real_hosts(fleet) -> None:  # noqa: ANN001
    """The issue's fleet case: the test fleet's images have apt's `partial` directories 0755 root; here a2's
    are made as on a real host (0700 _apt), root keeps a history, and a user without sudo scans it over
    SSH. Restored afterwards."""
    host, name = "a2", "audnonrootfleet"
    root = fleet.host(host).root
    partials = ["/var/cache/apt/archives/partial", "/var/lib/apt/lists/partial"]
    modes = {p: (root / p.lstrip("/")).stat() for p in [*partials, "/root"]}
    try:
        fleet.exec(host, ["useradd", "-m", "-s", "/bin/sh", name], check=True)
        fleet.exec(host, ["usermod", "-p", "*", name], check=True)
        fleet.exec(host, ["install", "-d", "-m", "700", "-o", name, f"/home/{name}/.ssh"], check=True)
        fleet.exec(host, ["install", "-m", "600", "-o", name, "/dev/stdin", f"/home/{name}/.ssh/authorized_keys"],
                   input=Path(f"{fleet.identity_file}.pub").read_text(), check=True)
        fleet.exec(host, ["sh", "-c", "echo 'sudo su' > /root/.bash_history; chmod 700 /root; "
                          "chown _apt:root " + " ".join(partials) + "; chmod 700 " + " ".join(partials)], check=True)
        opts = SSHOptions(identity_file=str(fleet.identity_file), known_hosts=str(fleet.known_hosts), sudo=False)
        result = collect_host(HostSpec(host, f"ssh://{name}@{fleet.host(host).address}", ssh=opts), binaries=[],
                              deadline_s=60)
    finally:
        fleet.exec(host, ["userdel", "-r", name])
        fleet.exec(host, ["rm", "-f", "/root/.bash_history"])
        for path, st in modes.items():
            os.chown(root / path.lstrip("/"), st.st_uid, st.st_gid)
            os.chmod(root / path.lstrip("/"), st.st_mode & 0o7777)
    assert result.status == "ok", result.error
    assert result.snapshot is not None and not result.complete
    reason = result.snapshot["errors"]["hygiene"]
    assert "shell_histories not read: /root: Permission denied" in reason, reason
    assert "package_caches not read: /var/cache/apt: du: cannot read directory" in reason, reason
    assert result.snapshot["facts"]["hygiene"]["machine_id_state"] == "populated"  # the rest stands
