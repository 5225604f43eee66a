"""Parsers on recorded raw probe output for distros the fleet cannot boot (AL2, AL2023, Ubuntu DLAMI)."""

from __future__ import annotations

import jsonschema
import pytest

from auditor.collect.schema import snapshot_json_schema
from auditor.collect.snapshot import build_snapshot
from auditor.models import CommandResult, HostSpec
from tests.framing_fixtures import FIXTURE_NONCE
from tests.paths import DATA

DATA = DATA / "probe"


def snapshot_of(os_name: str) -> dict:
    raw = (DATA / os_name / "raw.txt").read_text()
    return build_snapshot(HostSpec(os_name, "ssh://recorded"), CommandResult(raw, "", 0, 1.0), FIXTURE_NONCE)


def unit(snap: dict, name: str) -> dict:
    return next(u for u in snap["facts"]["systemd"]["units"] if u["name"] == name)


def binary(snap: dict, name: str) -> dict:
    return next(b for b in snap["facts"]["binaries"] if b["name"] == name)


@pytest.mark.parametrize("os_name", ["al2", "al2023", "ubuntu2004-dlami"])
def test_recorded_snapshot_is_complete_and_valid(os_name: str) -> None:
    snap = snapshot_of(os_name)
    assert snap["errors"] == {}
    assert all(snap["facts"][area] is not None for area in snap["facts"])
    jsonschema.validate(snap, snapshot_json_schema())


def test_al2_systemd_219_restarts_come_from_the_journal() -> None:
    snap = snapshot_of("al2")
    systemd = snap["facts"]["systemd"]
    assert systemd["version"] == 219
    ecs = unit(snap, "ecs.service")
    assert ecs["n_restarts"] is None  # no NRestarts before systemd 235
    assert (ecs["restarts"], ecs["restarts_source"]) == (8634, "journal")
    assert (ecs["active_state"], ecs["sub_state"]) == ("activating", "auto-restart")
    assert ecs["unit_file_state"] == "enabled"
    # two-column list-unit-files (no vendor preset before 245)
    files = {f["name"]: f for f in systemd["unit_files"]}
    assert files["containerd.service"] == {"name": "containerd.service", "state": "disabled", "preset": None}
    assert "ecs.service" in systemd["enabled_units"] and "containerd.service" not in systemd["enabled_units"]


def test_al2_cgroup_v1_dying_memcgs_and_unowned_kubelet() -> None:
    snap = snapshot_of("al2")
    assert snap["facts"]["cgroups"]["mode"] == "v1"
    assert snap["facts"]["cgroups"]["memory"] == {
        "num_cgroups": 12645, "live": 300, "dying": 12345, "source": "proc_cgroups"}
    kubelet = binary(snap, "kubelet")
    assert kubelet["package"] is None
    assert kubelet["source_host"] == "amazon-eks.s3.us-west-2.amazonaws.com"
    assert not kubelet["source_url"].endswith(".sha256")  # the checksum beside it is evidence, not the source
    assert binary(snap, "containerd")["package"] == "containerd"
    assert binary(snap, "containerd")["package_version"] == "1.7.11-1.amzn2.0.1"
    assert snap["host"]["image_name"] == "amzn2-ami-kernel-5.10-hvm-2.0.20240412.0-x86_64-gp2"
    assert snap["labels"]["az_id"] == "usw2-az2"


def test_al2023_cgroup_v2_counts_from_cgroup_stat() -> None:
    snap = snapshot_of("al2023")
    cg = snap["facts"]["cgroups"]
    assert cg["mode"] == "v2"
    assert cg["memory"]["dying"] == 14 and cg["memory"]["source"] == "nr_dying_descendants"
    slices = {r["path"]: r for r in cg["v2"]}
    assert slices["kubepods.slice"]["nr_dying_descendants"] == 11
    assert "memory" in cg["v2_controllers"]
    assert unit(snap, "kubelet.service")["restarts_source"] == "NRestarts"
    assert snap["facts"]["kernel"]["thp_enabled"] == "madvise"
    assert binary(snap, "dockerd") == {"name": "dockerd", "requested": "dockerd", "found": False}


def test_cgroup_v2_prefers_memory_subsystem_counters_on_6_11() -> None:
    from auditor.collect.parsers.cgroups import parse_cgroups

    text = "fstype=cgroup2fs\n--- v2_stat\n@ cgroup.stat\nnr_descendants 50\nnr_dying_descendants 9\n" \
           "nr_subsys_memory 51\nnr_dying_subsys_memory 30000\n"
    memory = parse_cgroups(text)["memory"]
    assert memory == {"num_cgroups": 30051, "live": 51, "dying": 30000, "source": "nr_dying_subsys_memory"}


def test_ubuntu_dlami_shows_the_pinterest_chain() -> None:
    snap = snapshot_of("ubuntu2004-dlami")
    f = snap["facts"]
    assert f["systemd"]["version"] == 245
    ecs = unit(snap, "ecs.service")
    assert ecs["active_state"] == "active" and ecs["restarts"] == 0  # systemd sees nothing wrong…
    assert f["ecs"]["agent_exits"] == 40213 and f["ecs"]["cluster_configured"] is False  # …ecs-init does
    assert f["cgroups"]["mode"] == "hybrid"
    assert f["cgroups"]["memory"]["dying"] == 68680 - 240
    assert f["network"]["ena"] == {"present": True, "version": "2.11.0g", "out_of_tree": True, "in_tree": False}
    eth0 = f["network"]["interfaces"][0]
    assert eth0["stats"]["suspected_poll_starvation"] == 2 and eth0["stats"]["total_resets"] == 3
    assert f["network"]["kernel_log"]["events"]["tx_queue_paused"] == 1
    assert f["network"]["kernel_log"]["events"]["reset_completed"] == 1
    assert f["cpu"]["max_core"] == 5 and f["cpu"]["max_core_system_pct"] >= 90
    assert f["cpu"]["average"]["system_pct"] < 20
    assert f["cpu"]["threads"][0]["comm"] == "kubelet" and f["cpu"]["threads"][0]["cpu"] == 5
    kubelet = binary(snap, "kubelet")
    assert kubelet["source_host"] == "dl.k8s.io" and kubelet["package"] is None
    assert binary(snap, "runc")["package"] == "containerd.io"
    files = {u["name"]: u for u in f["systemd"]["unit_files"]}
    assert files["ssh.service"]["preset"] == "enabled" and files["sshd.service"]["state"] == "alias"
    assert snap["host"]["az_id"] == "use1-az6" and snap["host"]["instance_type"] == "p4d.24xlarge"


def test_unit_health_is_a_stable_reading_of_runtime_state() -> None:
    from auditor.collect.parsers.systemd import unit_health

    assert unit(snapshot_of("al2"), "ecs.service")["health"] == "restarting"  # journal restarts, auto-restart
    assert unit(snapshot_of("ubuntu2004-dlami"), "ecs.service")["health"] == "active"  # systemd sees no restart
    assert unit(snapshot_of("al2023"), "kubelet.service")["health"] == "restarting"  # NRestarts=1
    # the moments a crash-looping unit passes through all read the same
    assert {unit_health(a, s, 5) for a, s in [("activating", "auto-restart"), ("active", "running"),
                                              ("activating", "start")]} == {"restarting"}
    assert unit_health("failed", "failed", 5) == "failed"
    assert unit_health("inactive", "dead", 0) == "inactive"
