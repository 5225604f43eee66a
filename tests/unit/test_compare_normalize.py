"""Normalized views of recorded fleet snapshots: order-free, volatile-free, unknown areas explicit."""

from __future__ import annotations

import copy
import json
import random

from auditor.collect.schema import is_volatile
from auditor.compare.normalize import leaf_spec, normalize
from tests.paths import DATA

FLEET = DATA / "compare" / "fleet"


def snap(name: str) -> dict:
    return json.loads((FLEET / f"{name}.json").read_text())


def test_keyed_lists_become_rows_so_a_reorder_is_no_change() -> None:
    a = snap("b1")
    b = copy.deepcopy(a)
    rng = random.Random(4)
    for rows in (b["facts"]["systemd"]["units"], b["facts"]["systemd"]["unit_files"], b["facts"]["binaries"],
                 b["facts"]["packages"]["items"], b["facts"]["systemd"]["enabled_units"]):
        rng.shuffle(rows)
    assert b["facts"]["systemd"]["units"] != a["facts"]["systemd"]["units"]
    assert normalize(a).identity() == normalize(b).identity()
    flat = normalize(a).flat
    assert flat["facts.systemd.units[ecs.service].health"] == "restarting"
    assert "facts.systemd.units[ecs.service].sub_state" not in flat  # flips within a second: volatile
    assert flat["facts.systemd.enabled_units[ecs.service]"] is True
    assert flat["facts.binaries[kubelet].source_host"] == "dl.k8s.io"
    assert flat["facts.kernel.sysctls[vm.swappiness]"] == "60"


def test_volatile_facts_and_host_identity_are_left_out() -> None:
    a = snap("a1")
    b = copy.deepcopy(a)
    b["host"].update(hostname="other", boot_id="x", uptime_s=1.0, machine_id="y")
    for unit in b["facts"]["systemd"]["units"]:
        unit["restarts"] = 999
        unit["main_pid"] = 4242
    b["facts"]["cgroups"]["memory"]["dying"] = 68400
    b["facts"]["cpu"]["cores"] = []
    view = normalize(a)
    assert view.identity() == normalize(b).identity()
    assert not [p for p in view.flat if is_volatile(p) or not p.startswith("facts.")]
    assert not [p for p in view.flat if ".restarts" in p or "dying" in p or "uptime" in p]


def test_a_failed_area_is_unknown_not_empty() -> None:
    a = snap("a1")
    a["facts"]["systemd"] = None
    a["errors"]["systemd"] = "systemctl timed out"
    view = normalize(a)
    assert view.unknown == {"systemd"}
    assert not [p for p in view.flat if p.startswith("facts.systemd")]


def test_leaf_spec_knows_the_vocabulary() -> None:
    assert leaf_spec("facts.binaries[kubelet].sha256")[1] == "string"
    assert leaf_spec("facts.systemd.enabled_units[x.service]")[1] == "boolean"
    assert leaf_spec("facts.systemd.units[x].restarts")[0].volatile
    for bad in ("facts.kernel", "facts.binaries[kubelet]", "facts.nope", "host.hostname",
                "facts.systemd.units[x].name", "facts.binaries[kubelet].sha256.x"):
        assert leaf_spec(bad) is None, bad
