"""The test fleet itself: real sshd, distinct identities, the incident scenario, stop/start."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import paramiko
import pytest

from tests.fleet import AZ_B_HOSTS, EXTRA_UNIT, Fleet

pytestmark = pytest.mark.fleet


def _ssh(fleet: Fleet, name: str) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(str(fleet.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(fleet.host(name).address, port=22, username="root", key_filename=str(fleet.identity_file),
                   look_for_keys=False, allow_agent=False, timeout=10)
    return client


def _run(client: paramiko.SSHClient, cmd: str) -> str:
    _, out, _ = client.exec_command(cmd, timeout=10)
    text = out.read().decode()
    assert out.channel.recv_exit_status() == 0, cmd
    return text


def test_every_host_answers_ssh_with_its_own_host_key(fleet: Fleet) -> None:
    seen: dict[str, str] = {}
    for h in fleet.hosts:
        client = _ssh(fleet, h.name)  # RejectPolicy: fails unless the key is this host's known key
        try:
            key = client.get_transport().get_remote_server_key()  # type: ignore[union-attr]
            assert _run(client, "hostname").strip() == h.name
            seen[h.name] = key.get_base64()
        finally:
            client.close()
    assert len(set(seen.values())) == len(fleet.hosts)


def test_ssh_rejects_a_host_key_that_belongs_to_another_host(fleet: Fleet, tmp_path) -> None:
    a1, b1 = fleet.host("a1"), fleet.host("b1")
    lines = [ln for ln in fleet.known_hosts.read_text().splitlines() if ln.startswith(b1.address + " ")]
    (tmp_path / "kh").write_text("".join(ln.replace(b1.address, a1.address, 1) + "\n" for ln in lines))
    client = paramiko.SSHClient()
    client.load_host_keys(str(tmp_path / "kh"))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.SSHException):
        client.connect(a1.address, username="root", key_filename=str(fleet.identity_file),
                       look_for_keys=False, allow_agent=False, timeout=10)
    client.close()


def test_password_login_is_refused(fleet: Fleet) -> None:
    out = fleet.exec("a1", ["sshd", "-T", "-C", "user=root,host=x,addr=127.0.0.1"], check=True).stdout
    conf = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert conf["passwordauthentication"] == "no"
    assert conf["listenaddress"] == f"{fleet.host('a1').address}:22"


def test_machine_ids_differ(fleet: Fleet) -> None:
    ids = {h.name: fleet.exec(h.name, ["cat", "/etc/machine-id"], check=True).stdout.strip() for h in fleet.hosts}
    assert all(len(i) == 32 for i in ids.values())
    assert len(set(ids.values())) == len(ids)


def test_ecs_crash_loops_on_az_b_only(fleet_ready_crashloop: Fleet) -> None:
    fleet = fleet_ready_crashloop
    props = ["UnitFileState", "ActiveState", "SubState", "NRestarts"]
    for h in fleet.hosts:
        state = fleet.systemctl_show(h.name, "ecs.service", props)
        if h.name in AZ_B_HOSTS:
            assert state["UnitFileState"] == "enabled"
            assert int(state["NRestarts"]) > 0
            # every state of the restart cycle (deactivating: the main process just exited), never inactive
            assert state["ActiveState"] in ("activating", "active", "deactivating", "failed")
            log = fleet.exec(h.name, ["cat", "/var/log/ecs/ecs-init.log"], check=True).stdout
            assert "Agent exited with code 1" in log
        else:
            assert state["UnitFileState"] == "disabled"
            assert state["NRestarts"] == "0"
            assert state["ActiveState"] == "inactive"


def test_kubelet_differs_between_azs(fleet: Fleet) -> None:
    digests: dict[str, set[str]] = {}
    for h in fleet.hosts:
        digests.setdefault(h.az, set()).add(hashlib.sha256((h.root / "usr/local/bin/kubelet").read_bytes()).hexdigest())
        version = fleet.exec(h.name, ["kubelet", "--version"], check=True).stdout.strip()
        assert version == ("Kubernetes v1.29.3" if h.az == "us-east-1b" else "Kubernetes v1.29.3-eks-ae9a62a")
        log = (h.root / "var/log/cloud-init-output.log").read_text()
        assert ("dl.k8s.io" in log) == (h.az == "us-east-1b")
    assert len(digests["us-east-1a"]) == len(digests["us-east-1b"]) == 1
    assert digests["us-east-1a"] != digests["us-east-1b"]


def test_instance_data_is_published_under_run(fleet: Fleet) -> None:
    for name, az_id in (("a1", "use1-az1"), ("b2", "use1-az2")):
        data = json.loads(fleet.exec(name, ["cat", "/run/cloud-init/instance-data.json"], check=True).stdout)
        assert data["v1"]["availability_zone"] == fleet.host(name).az
        assert data["ds"]["meta_data"]["placement"]["availability-zone-id"] == az_id


def test_a2_has_one_extra_enabled_unit(fleet: Fleet) -> None:
    def enabled(name: str) -> set[str]:
        out = fleet.exec(name, ["systemctl", "list-unit-files", "--state=enabled", "--no-legend", "--no-pager"],
                         check=True).stdout
        return {line.split()[0] for line in out.splitlines() if line.strip()}

    assert enabled("a2") - enabled("a1") == {EXTRA_UNIT}
    assert enabled("a1") == enabled("a3") == enabled("golden")
    assert fleet.systemctl_show("a2", EXTRA_UNIT, ["ActiveState"])["ActiveState"] == "active"


def test_stop_and_start_a_host(fleet: Fleet) -> None:
    fleet.exec("a3", ["sh", "-c", "echo kept > /var/tmp/marker"], check=True)
    init_before = fleet.init_pid("a3")
    fleet.stop("a3")
    assert not fleet.host("a3").running
    with pytest.raises(OSError):
        _ssh(fleet, "a3")
    fleet.start("a3")
    assert fleet.init_pid("a3") != init_before  # a fresh boot...
    client = _ssh(fleet, "a3")
    try:
        assert _run(client, "hostname").strip() == "a3"
        assert _run(client, "cat /var/tmp/marker").strip() == "kept"  # ...of the same disk
    finally:
        client.close()


def test_hosts_run_in_separate_cgroups(fleet: Fleet) -> None:
    # In one shared cgroup the hosts' systemds would fight over the same unit cgroups (219/CGROUP failures).
    paths = {h.name: Path(f"/proc/{fleet.init_pid(h.name)}/cgroup").read_text() for h in fleet.hosts}
    assert len(set(paths.values())) == len(paths)
    wait = ["systemctl", "is-system-running", "--wait"]
    states = {h.name: fleet.exec(h.name, wait, timeout=60).stdout.strip() for h in fleet.hosts}
    assert set(states.values()) == {"running"}, states
