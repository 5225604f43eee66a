"""`collect` over real SSH against the systemd-nspawn test fleet: the incident's facts, per host."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from auditor.cli import main
from auditor.context import Env
from auditor.run.live_hosts import collect_hosts
from auditor.targets.inventory import load_inventory
from tests.fleet import memcg

pytestmark = pytest.mark.fleet


def _unit(snap: dict, name: str) -> dict | None:
    return next((u for u in snap["facts"]["systemd"]["units"] if u["name"] == name), None)


def _binary(snap: dict, name: str) -> dict:
    return next(b for b in snap["facts"]["binaries"] if b["name"] == name)


@pytest.fixture(scope="module")
def fleet_snapshots(fleet, tmp_path_factory) -> dict[str, dict]:
    fleet.wait_crashloop()
    out_dir = tmp_path_factory.mktemp("snaps")
    out = io.StringIO()
    code = main(["collect", "-i", str(fleet.inventory_path), "-o", str(out_dir)],
                Env(out, io.StringIO()))
    assert code == 0, out.getvalue()
    return {p.stem: json.loads(p.read_text()) for p in out_dir.glob("*.json")}


def test_every_fleet_host_gives_a_complete_snapshot(fleet_snapshots: dict[str, dict]) -> None:
    assert set(fleet_snapshots) >= {"golden", "a1", "a2", "a3", "b1", "b2", "b3"}
    for name, snap in fleet_snapshots.items():
        assert snap["errors"] == {} or set(snap["errors"]) <= {"network"}, (name, snap["errors"])
        assert snap["facts"]["systemd"]["version"] >= 252
        assert snap["host"]["hostname"] == name


def test_ecs_crash_loops_only_in_az_b(fleet_snapshots: dict[str, dict]) -> None:
    for name, snap in fleet_snapshots.items():
        ecs = _unit(snap, "ecs.service")
        if snap["labels"]["az"] == "us-east-1b":
            assert ecs["unit_file_state"] == "enabled", name
            assert ecs["restarts"] > 0 and ecs["restarts_source"] == "NRestarts", name
            assert "ecs.service" in snap["facts"]["systemd"]["enabled_units"]
        else:
            assert ecs is None or ecs["unit_file_state"] == "disabled", name
            assert ecs is None or ecs["restarts"] == 0
        assert snap["facts"]["ecs"]["cluster_configured"] is False


def test_kubelet_hash_and_source_differ_between_azs(fleet_snapshots: dict[str, dict]) -> None:
    by_az: dict[str, set[tuple[str, str]]] = {}
    for snap in fleet_snapshots.values():
        kubelet = _binary(snap, "kubelet")
        assert kubelet["found"] and kubelet["package"] is None
        by_az.setdefault(snap["labels"]["az"], set()).add((kubelet["sha256"], kubelet["source_host"]))
    # one (hash, source) per AZ, and the two AZs share neither
    assert len(by_az["us-east-1a"]) == 1 and len(by_az["us-east-1b"]) == 1
    (hash_a, source_a), (hash_b, source_b) = by_az["us-east-1a"].pop(), by_az["us-east-1b"].pop()
    assert (source_a, source_b) == ("amazon-eks.s3.us-west-2.amazonaws.com", "dl.k8s.io")
    assert hash_a != hash_b


def test_identity_and_labels_come_from_instance_data(fleet_snapshots: dict[str, dict]) -> None:
    b1 = fleet_snapshots["b1"]
    assert b1["host"]["az"] == "us-east-1b" and b1["host"]["instance_id"].startswith("i-")
    assert b1["labels"]["az_id"] == b1["host"]["az_id"]
    assert len({s["host"]["machine_id"] for s in fleet_snapshots.values()}) == len(fleet_snapshots)


def test_dying_memcgs_are_num_cgroups_minus_live(fleet_snapshots: dict[str, dict]) -> None:
    for snap in fleet_snapshots.values():
        memory = snap["facts"]["cgroups"]["memory"]
        assert memory["source"] == "proc_cgroups"
        assert memory["dying"] == max(memory["num_cgroups"] - memory["live"], 0)
        controllers = {c["name"]: c for c in snap["facts"]["cgroups"]["controllers"]}
        assert controllers["memory"]["num_cgroups"] == memory["num_cgroups"]


@pytest.mark.kernel
def test_real_dying_memcgs_raise_the_count_seen_over_ssh(fleet) -> None:
    if memcg.available():
        pytest.skip(memcg.available())
    specs = [s for s in load_inventory(fleet.inventory_path) if s.name == "golden"]
    memcg.settle()
    before = collect_hosts(specs, binaries=[])[0].snapshot["facts"]["cgroups"]["memory"]["dying"]
    with memcg.DyingMemcgs() as batch:
        made = batch.make(2000)
        after = collect_hosts(specs, binaries=[])[0].snapshot["facts"]["cgroups"]["memory"]["dying"]
    assert made >= 1950
    assert after - before >= made - 100, (before, after, made)


def test_stopped_host_and_unknown_host_key_get_a_status_while_others_complete(fleet, tmp_path: Path) -> None:
    inventory = yaml.safe_load(Path(fleet.inventory_path).read_text())
    known = Path(inventory["defaults"]["ssh"]["known_hosts"]).read_text().splitlines()
    a3 = fleet.host("a3").address
    partial = tmp_path / "known_hosts"
    partial.write_text("\n".join(line for line in known if not line.startswith(a3 + " ")) + "\n")
    inventory["defaults"]["ssh"]["known_hosts"] = str(partial)
    inventory["defaults"]["ssh"]["connect_timeout"] = 3
    inv_path = tmp_path / "inventory.yaml"
    inv_path.write_text(yaml.safe_dump(inventory))
    fleet.stop("a2")
    try:
        out = io.StringIO()
        code = main(["collect", "-i", str(inv_path), "-o", str(tmp_path / "snaps")], Env(out, io.StringIO()))
    finally:
        fleet.start("a2")
    lines = {line.split()[0]: line for line in out.getvalue().splitlines() if line and not line[0].isdigit()}
    assert code == 3
    assert lines["a2"].split()[1] == "unreachable"
    assert lines["a3"].split()[1] == "host_key_rejected"
    assert not (tmp_path / "snaps" / "a3.json").exists()
    for name in ("golden", "a1", "b1", "b2", "b3"):
        assert lines[name].split()[1] == "ok", lines[name]
        assert (tmp_path / "snaps" / f"{name}.json").exists()
