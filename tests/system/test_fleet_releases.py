"""The incident's results are the same on every Debian release the fleet boots: bullseye (systemd 247,
hybrid cgroups), bookworm (252, hybrid; the main fleet's a1/b1) and trixie (257, cgroup v2 unified).

Per release, one AZ-a host (ecs.service disabled, EKS kubelet) and one AZ-b host (ecs.service enabled and
crash-looping, upstream kubelet): crash loop, provenance, drift from the release's own AZ-a host and the
dying-memcg finding must come out alike. On trixie the dying cgroups are real v2 dying cgroups in the
host's own subtree (tests/fleet/cgroup2.py), read by the probe from `cgroup.stat`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.reportdoc import validate_report
from auditor.run.live_hosts import collect_hosts
from auditor.targets.inventory import load_inventory
from tests.fleet import Fleet, builder, cgroup2, combined_inventory, memcg
from tests.fleet.fleet import DEBIAN_VERSION, UNIFIED_RELEASES

pytestmark = pytest.mark.fleet
KUBELET = {f"facts.binaries[kubelet].{f}" for f in ("sha256", "source_host", "source_url")}
DYING = 1100  # above the built-in pack's dying_warn (1000)


@dataclass(frozen=True)
class Pair:
    """One release's AZ-a and AZ-b host, with an inventory of just these two."""

    release: str
    fleet: Fleet
    a: str
    b: str
    inventory: Path


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def scan(inventory: Path, out_dir: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    code, _, err = cli("scan", "-i", str(inventory), *argv, "--format", "json", "--out", str(out_dir))
    assert code in (0, 1), err
    doc = json.loads((out_dir / "report.json").read_text())
    validate_report(doc)
    return code, doc


def hosts_with(doc: dict[str, Any], rule: str, item: str | None = None) -> set[str]:
    return {f["host"] for f in doc["findings"] if f["rule"] == rule and (item is None or f["item"] == item)
            and not f["waived"] and f["evidence"].get("status") not in ("unknown", "error")}


@pytest.fixture(scope="module", params=builder.RELEASES)
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    release = request.param
    if release == builder.RELEASE:
        fleet, a, b = request.getfixturevalue("fleet"), "a1", "b1"
    else:
        fleet, a, b = request.getfixturevalue("release_fleet"), f"{release}-a", f"{release}-b"
    fleet.wait_crashloop([b])
    inventory = combined_inventory(tmp_path_factory.mktemp(f"pair-{release}") / "inventory.yaml",
                                   [(fleet, a), (fleet, b)])
    return Pair(release, fleet, a, b, inventory)


@pytest.fixture(scope="module")
def snaps(pair: Pair, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out_dir = tmp_path_factory.mktemp(f"snaps-{pair.release}")
    code, out, err = cli("collect", "-i", str(pair.inventory), "-o", str(out_dir))
    if code == 3:  # a probe step cut off by its timeout on a heavily loaded machine: once more, then fail
        code, out, err = cli("collect", "-i", str(pair.inventory), "-o", str(out_dir))
    assert code == 0, out + err
    return {p.stem: json.loads(p.read_text()) for p in out_dir.glob("*.json")}


def _unit(snap: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((u for u in snap["facts"]["systemd"]["units"] if u["name"] == name), None)


def test_each_release_runs_its_own_systemd_and_cgroup_hierarchy(pair: Pair, snaps: dict[str, dict]) -> None:
    for name in (pair.a, pair.b):
        facts = snaps[name]["facts"]
        assert snaps[name]["errors"] == {} or set(snaps[name]["errors"]) <= {"network"}, snaps[name]["errors"]
        assert facts["os"]["version_codename"] == pair.release
        assert facts["os"]["version_id"] == DEBIAN_VERSION[pair.release]
        assert facts["systemd"]["version"] == builder.SYSTEMD_MAJOR[pair.release]
        cg = facts["cgroups"]
        if pair.release in UNIFIED_RELEASES:
            # a real cgroup2 root (nspawn's cgroup namespace on the host's hybrid kernel): the dying count
            # comes from cgroup.stat; memory stays a v1 controller here, so no nr_dying_subsys_memory
            assert cg["mode"] == "v2"
            assert cg["memory"]["source"] == "nr_dying_descendants"
            assert "memory" not in (cg["v2_controllers"] or [])
            root = next(r for r in cg["v2"] if r["path"] == "/")
            assert {"nr_descendants", "nr_dying_descendants"} <= set(root)
            assert cg["memory"]["live"] == root["nr_descendants"] + 1
        else:
            assert cg["mode"] == "hybrid"
            assert cg["memory"]["source"] == "proc_cgroups"


def test_ecs_crash_loops_on_the_az_b_host_only(pair: Pair, snaps: dict[str, dict]) -> None:
    a, b = _unit(snaps[pair.a], "ecs.service"), _unit(snaps[pair.b], "ecs.service")
    assert b is not None and b["unit_file_state"] == "enabled"
    # NRestarts exists from systemd 235: every release here reports it, none falls back to the journal
    assert b["restarts"] >= 1 and b["restarts_source"] == "NRestarts"
    assert b["health"] in ("crash-looping", "failed") or b["restarts"] > 0
    assert "ecs.service" in snaps[pair.b]["facts"]["systemd"]["enabled_units"]
    assert a is None or (a["unit_file_state"] == "disabled" and a["restarts"] == 0)
    assert "ecs.service" not in snaps[pair.a]["facts"]["systemd"]["enabled_units"]
    for name in (pair.a, pair.b):
        assert snaps[name]["facts"]["ecs"]["cluster_configured"] is False


def test_kubelet_provenance_differs_between_the_az_roles(pair: Pair, snaps: dict[str, dict]) -> None:
    kubelet = {n: next(b for b in snaps[n]["facts"]["binaries"] if b["name"] == "kubelet") for n in (pair.a, pair.b)}
    for k in kubelet.values():
        assert k["found"] and k["package"] is None and k["path"] == "/usr/local/bin/kubelet"
    assert kubelet[pair.a]["source_host"] == "amazon-eks.s3.us-west-2.amazonaws.com"
    assert kubelet[pair.b]["source_host"] == "dl.k8s.io"
    assert kubelet[pair.a]["sha256"] != kubelet[pair.b]["sha256"]


def test_scan_finds_the_incident_on_the_az_b_host_and_drift_only_there(pair: Pair, tmp_path: Path) -> None:
    pair.fleet.wait_crashloop([pair.b])
    baseline = tmp_path / "baseline.yaml"
    code, _, err = cli("baseline", "capture", "-i", str(pair.inventory), "--host", pair.a, "-o", str(baseline))
    assert code == 0, err
    code, doc = scan(pair.inventory, tmp_path / "out", "--baseline", str(baseline))
    assert code == 1
    assert hosts_with(doc, "systemd.unit-crash-looping", "ecs.service") == {pair.b}
    assert hosts_with(doc, "systemd.unit-crash-looping") == {pair.b}
    assert hosts_with(doc, "systemd.ecs-enabled-without-cluster") == {pair.b}
    assert hosts_with(doc, "provenance.source-not-allowlisted", "kubelet") == {pair.b}
    drift: dict[str, set[str]] = {}
    for d in doc["drift"]:
        drift.setdefault(d["host"], set()).add(d["path"])
    assert drift == {pair.b: {"facts.systemd.unit_files[ecs.service].state"} | KUBELET}


def _dying(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["host"]: f["evidence"] for f in doc["findings"] if f["rule"].startswith("cgroups.dying-memcgs")}


@pytest.fixture
def dying_cgroups(pair: Pair) -> Iterator[None]:
    """DYING real dying cgroups where the release's hosts count them: host-wide dying memcgs on v1/hybrid,
    v2 dying cgroups inside each host's own cgroup namespace on unified hosts."""
    if pair.release in UNIFIED_RELEASES:
        held = [cgroup2.DyingCgroups(pair.fleet.cgroup2_root(n), DYING, wait=False) for n in (pair.a, pair.b)]
        try:
            for h in held:
                h.ready()
            yield
        finally:
            for h in held:
                h.release()
        return
    reason = memcg.available()
    if reason:
        pytest.skip(reason)
    with memcg.DyingMemcgs() as batch:
        assert batch.make(DYING) >= DYING - 50
        yield


@pytest.mark.kernel
def test_real_dying_cgroups_raise_the_dying_memcg_finding_on_both_hosts(pair: Pair, tmp_path: Path,
                                                                        request: pytest.FixtureRequest) -> None:
    _, before = scan(pair.inventory, tmp_path / "before")
    counts_before = {r.name: r.snapshot["facts"]["cgroups"]["memory"]["dying"]
                     for r in collect_hosts(load_inventory(pair.inventory), binaries=[]) if r.snapshot}
    request.getfixturevalue("dying_cgroups")
    _, after = scan(pair.inventory, tmp_path / "after")
    evidence = _dying(after)
    assert set(evidence) == {pair.a, pair.b}
    source = "nr_dying_descendants" if pair.release in UNIFIED_RELEASES else "proc_cgroups"
    for name, ev in evidence.items():
        assert ev["source"] == source and ev["cgroup_mode"] == ("v2" if source != "proc_cgroups" else "hybrid")
        assert ev["dying"] - counts_before[name] >= DYING - 50, (name, counts_before[name], ev)
    if pair.release in UNIFIED_RELEASES:  # namespaced: each host counts only its own subtree's dying cgroups
        assert not _dying(before)
        assert all(ev["dying"] < 2 * DYING for ev in evidence.values())


def test_a_mixed_release_fleet_splits_by_az_on_ecs_and_kubelet_not_by_release(
        fleet: Fleet, release_fleet: Fleet, tmp_path: Path) -> None:
    members = [(fleet, "a1"), (fleet, "b1")]
    members += [(release_fleet, f"{r}-{x}") for r in ("bullseye", "trixie") for x in "ab"]
    fleet.wait_crashloop(["b1"])
    release_fleet.wait_crashloop()
    inventory = combined_inventory(tmp_path / "inventory.yaml", members)
    _, doc = scan(inventory, tmp_path / "out", "--group-by", "az", "--symptom", "systemd.unit-crash-looping")
    top = doc["comparison"]["splits"][:2]
    assert {s["subject"] for s in top} == {"systemd:ecs.service", "binaries:kubelet"}, doc["comparison"]["splits"]
    az_b = {"b1", "bullseye-b", "trixie-b"}
    assert doc["symptom"]["hosts_with"] == sorted(az_b)
    ranked = [(r["path"], r["value"]) for r in doc["symptom"]["ranked"][:3]]
    assert ("facts.binaries[kubelet].source_host", "dl.k8s.io") in ranked
    assert hosts_with(doc, "systemd.unit-crash-looping", "ecs.service") == az_b
