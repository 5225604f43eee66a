"""A host that refuses to run the probe gets the status `probe_refused` with its own words (issue 37, item 4).

Each refusal kind is real, against a throwaway sshd on 127.0.0.1 (the helpers of test_ssh_transport.py):
the Ubuntu AMIs' root key `command="echo 'Please login as…';echo;sleep 10;exit 142"`, sudo's `requiretty`,
a nologin shell, an SFTP-only account (`ForceCommand internal-sftp`), sudo missing from PATH (a key's
`environment="PATH=…"`), and a .bashrc that reads stdin (it eats the script's nonce line, so the probe
refuses to run). Before the fix each was status `ok`, "collected", and the reason never reached the
terminal. Needs root (users, sudoers, sshd), like test_ssh_transport.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from auditor.models import HOST_STATUSES, HostSpec, SSHOptions
from auditor.run.live_hosts import collect_host
from tests.paths import ROOT
from tests.system.test_ssh_transport import IN_CI, SSHD, Sshd, _ensure_user, _keygen, _start_sshd

_missing = [t for t in (SSHD, "ssh-keygen", "sudo", "useradd", "/usr/sbin/nologin", "bash") if not shutil.which(t)]
pytestmark = pytest.mark.skipif(not IN_CI and (os.geteuid() != 0 or bool(_missing)),
                                reason=f"needs root and {', '.join(_missing) or 'sshd'}")

UBUNTU_ROOT_KEY = ('command="echo \'Please login as the user \\"ubuntu\\" rather than the user \\"root\\".\';'
                   'echo;sleep 10;exit 142"')


@dataclass(frozen=True)
class Kind:
    user: str  # "root", or a throwaway user made for the case
    key_options: str  # authorized_keys options of the case's own key
    words: str  # what the host says (in the error)
    exit_status: int = 1


KINDS: dict[str, Kind] = {
    "ubuntu-root-key": Kind("root", UBUNTU_ROOT_KEY, 'Please login as the user "ubuntu" rather than the user "root".',
                            142),
    "sudo-requiretty": Kind("audrefusetty", "", "sudo: sorry, you must have a tty to run sudo"),
    "nologin-shell": Kind("audrefusenologin", "", "This account is currently not available."),
    "sftp-only": Kind("audrefusesftp", "", "This service allows sftp connections only."),
    "sudo-not-on-path": Kind("audrefusepath", 'environment="PATH=/usr/local/nowhere"', "sudo: not found", 127),
    "bashrc-reads-stdin": Kind("audrefuserc", "", "must start with a valid AMI_NONCE line; refusing to run", 64),
}


@dataclass
class Lab:
    base: Path
    sshd: Sshd
    keys: dict[str, Path]
    known_hosts: Path

    def spec(self, case: str) -> HostSpec:
        opts = SSHOptions(identity_file=str(self.keys[case]), known_hosts=str(self.known_hosts),
                          ssh_config=str(self.base / "empty_ssh_config"))
        return HostSpec(name=case, target=f"ssh://{KINDS[case].user}@127.0.0.1:{self.sshd.port}", ssh=opts)


def _users() -> None:
    _ensure_user("audrefusetty")
    _ensure_user("audrefusesftp")
    _ensure_user("audrefusepath")
    _ensure_user("audrefusenologin")
    subprocess.run(["usermod", "-s", "/usr/sbin/nologin", "audrefusenologin"], check=True)
    _ensure_user("audrefuserc")
    subprocess.run(["usermod", "-s", "/bin/bash", "audrefuserc"], check=True)
    home = Path("/home/audrefuserc")
    (home / ".bashrc").write_text("read -r first_line\n")  # bash sources it for an ssh command (Debian)
    sudoers = Path("/etc/sudoers.d/audrefuse")
    sudoers.write_text("Defaults:audrefusetty requiretty\n"
                       "audrefusetty,audrefusepath,audrefuserc ALL=(root) NOPASSWD: /bin/sh\n")
    sudoers.chmod(0o440)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="auditor-refused-"))
    base.chmod(0o755)
    keys = {case: _keygen(base / f"client_{case}") for case in KINDS}
    authorized = base / "authorized_keys"
    authorized.write_text("".join(f"{k.key_options} {Path(f'{keys[c]}.pub').read_text()}".lstrip()
                                  for c, k in KINDS.items()))
    authorized.chmod(0o644)
    (base / "empty_ssh_config").write_text("")
    _users()
    sshd = _start_sshd(base, "refusing", authorized,
                       "PermitUserEnvironment yes\nMatch User audrefusesftp\n    ForceCommand internal-sftp\n")
    known = base / "known_hosts"
    known.write_text(sshd.kh_line)
    try:
        yield Lab(base, sshd, keys, known)
    finally:
        sshd.proc.terminate()
        sshd.proc.wait(timeout=10)
        Path("/etc/sudoers.d/audrefuse").unlink(missing_ok=True)
        for user in ("audrefusetty", "audrefusesftp", "audrefusepath", "audrefusenologin", "audrefuserc"):
            subprocess.run(["userdel", "-r", user], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def test_the_status_is_one_every_report_knows() -> None:
    schema = json.loads((ROOT / "auditor/schemas/report.schema.json").read_text())
    assert schema["$defs"]["status"]["enum"] == list(HOST_STATUSES)
    assert "probe_refused" in HOST_STATUSES


@pytest.mark.parametrize("case", [c for c in KINDS if c != "ubuntu-root-key"])  # that one: the CLI test
def test_each_refusal_is_its_own_status_with_the_hosts_words(lab: Lab, case: str) -> None:
    kind = KINDS[case]
    result = collect_host(lab.spec(case), binaries=[], deadline_s=30)
    assert result.status == "probe_refused", (result.status, result.error)
    assert result.snapshot is None and not result.complete
    assert result.error is not None and result.error.startswith("the host did not run the probe")
    assert f"(exit status {kind.exit_status})" in result.error, result.error
    assert kind.words in result.error, result.error


def test_the_cli_shows_the_refusal_in_the_terminal_and_every_report(lab: Lab, tmp_path: Path) -> None:
    """The Ubuntu AMI's root key, scanned beside a host that refuses through requiretty: exit 3, each host's
    status and words on the terminal, and the same status in JSON, JUnit and Prometheus."""
    hosts = []
    for case in ("ubuntu-root-key", "sudo-requiretty"):
        spec = lab.spec(case)
        hosts.append({"name": case, "target": spec.target,
                      "ssh": {"identity_file": spec.ssh.identity_file, "known_hosts": spec.ssh.known_hosts,
                              "ssh_config": spec.ssh.ssh_config}})
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": hosts}))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "auditor.cli", "scan", "-i", str(inventory), "--no-store",
                           "--deadline", "40", "--format", "json,junit,prom", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    terminal = proc.stdout + proc.stderr
    assert proc.returncode == 3, terminal
    ubuntu = next(ln for ln in terminal.splitlines() if ln.startswith("ubuntu-root-key"))
    assert "probe_refused" in ubuntu and 'Please login as the user "ubuntu"' in ubuntu, terminal
    tty = next(ln for ln in terminal.splitlines() if ln.startswith("sudo-requiretty"))
    assert "probe_refused" in tty and "you must have a tty to run sudo" in tty, terminal
    report = json.loads((out / "report.json").read_text())
    assert {h["name"]: h["status"] for h in report["hosts"]} == {"ubuntu-root-key": "probe_refused",
                                                                 "sudo-requiretty": "probe_refused"}
    errors = [e for e in ET.parse(out / "report.xml").getroot().iter("error") if e.get("type") == "probe_refused"]
    assert errors and any("Please login" in (e.text or "") for e in errors)
    prom = (out / "report.prom").read_text()
    assert 'ami_auditor_hosts{status="probe_refused"} 2' in prom, prom
