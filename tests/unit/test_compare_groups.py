"""Group comparison and symptom ranking over the recorded fleet (real snapshots) and synthetic fleets."""

from __future__ import annotations

import copy
import json

from auditor.collect.schema import is_volatile
from auditor.compare.groups import compare_groups
from auditor.compare.index import index_snapshots
from auditor.compare.symptom import Symptom, symptom_section
from auditor.models import Finding
from tests.paths import DATA

FLEET = DATA / "compare" / "fleet"
HOSTS = ("golden", "a1", "a2", "a3", "b1", "b2", "b3")


def fleet() -> list[dict]:
    return [json.loads((FLEET / f"{h}.json").read_text()) for h in HOSTS]


def all_paths(section: dict) -> list[str]:
    items = section.get("splits", []) + section.get("outliers", []) + section.get("ranked", [])
    paths = [i["path"] for i in items]
    for i in items:
        paths += [r["path"] if isinstance(r, dict) else r for r in i.get("related", [])]
    return paths


def test_az_splits_rank_ecs_state_and_kubelet_first_and_a2_is_an_outlier() -> None:
    comparison = compare_groups(index_snapshots(fleet(), ["az"]), "az")
    assert comparison["groups"] == {"us-east-1a": 4, "us-east-1b": 3}
    assert comparison["distinct_configurations"] == 3  # a1, a3 and golden share one
    top = comparison["splits"][:2]
    assert {s["subject"] for s in top} == {"systemd:ecs.service", "binaries:kubelet"}
    kubelet = next(s for s in top if s["subject"] == "binaries:kubelet")
    assert kubelet["path"] == "facts.binaries[kubelet].source_host"
    assert "facts.binaries[kubelet].sha256" in kubelet["related"]
    assert kubelet["counts"] == {"us-east-1a": {"amazon-eks.s3.us-west-2.amazonaws.com": 4},
                                 "us-east-1b": {"dl.k8s.io": 3}}
    ecs = next(s for s in top if s["subject"] == "systemd:ecs.service")
    assert ecs["path"] == "facts.systemd.unit_files[ecs.service].state"
    assert ecs["modal"] == {"us-east-1a": "disabled", "us-east-1b": "enabled"}
    assert all(s["score"] == 1.0 and s["severity"] == "high" for s in top)
    [outlier] = comparison["outliers"]
    assert (outlier["host"], outlier["path"]) == ("a2", "facts.systemd.unit_files[node-exporter-extra.service].state")
    assert (outlier["value"], outlier["usual_value"], outlier["usual_hosts"]) == ("enabled", "disabled", 6)
    assert not [s for s in comparison["splits"] if "node-exporter-extra" in json.dumps(s)]
    paths = all_paths(comparison)
    assert paths and not [p for p in paths if is_volatile(p)]


def test_volatile_facts_never_split_even_when_they_differ_by_group() -> None:
    snaps = fleet()
    for s in snaps:  # make restart counters and uptime line up perfectly with the AZ
        b = s["labels"]["az"].endswith("b")
        s["host"]["uptime_s"] = 9999.0 if b else 1.0
        for u in s["facts"]["systemd"]["units"]:
            u["restarts"] = 50 if b else 0
        s["facts"]["cgroups"]["memory"]["dying"] = 60000 if b else 3
    comparison = compare_groups(index_snapshots(snaps, ["az"]), "az")
    paths = all_paths(comparison)
    assert not [p for p in paths if is_volatile(p) or "restarts" in p or "dying" in p or "uptime" in p]


def test_chance_patterns_in_a_big_mixed_fleet_are_not_splits_and_unknown_hosts_are_skipped() -> None:
    base = fleet()
    snaps = []
    for i in range(60):  # three AZs, kubelet flavour independent of AZ; one host lost systemd
        s = copy.deepcopy(base[1 if i % 2 else 4])
        s["name"] = f"h{i:02d}"
        s["labels"]["az"] = ("us-east-1a", "us-east-1b", "us-east-1c")[i % 3]
        snaps.append(s)
    snaps[7]["facts"]["systemd"] = None
    comparison = compare_groups(index_snapshots(snaps, ["az"]), "az")
    assert comparison["splits"] == []
    assert comparison["outliers"] == []
    by_kubelet = compare_groups(index_snapshots(snaps, ["az"]), "facts.binaries[kubelet].source_host")
    assert by_kubelet["groups"] == {"amazon-eks.s3.us-west-2.amazonaws.com": 30, "dl.k8s.io": 30}
    ecs = next(s for s in by_kubelet["splits"] if s["subject"] == "systemd:ecs.service")
    assert ecs["hosts"] == 59  # the host whose systemd is unknown is not counted
    assert all(s["path"] != "facts.binaries[kubelet].source_host" for s in by_kubelet["splits"])


def test_hosts_without_the_group_label_are_listed_not_guessed() -> None:
    snaps = fleet()
    del snaps[0]["labels"]["role"]
    comparison = compare_groups(index_snapshots(snaps, ["role"]), "role")
    assert comparison["groups"] == {} and comparison["splits"] == []
    assert comparison["ungrouped_hosts"] == sorted(HOSTS)


def test_symptom_by_label_puts_kubelet_source_on_top_with_evidence() -> None:
    section = symptom_section(index_snapshots(fleet(), ["az"]), Symptom.parse("az=us-east-1b"), [], 5)
    assert section["hosts_with"] == ["b1", "b2", "b3"]
    top = section["ranked"][0]
    assert (top["path"], top["value"]) == ("facts.binaries[kubelet].source_host", "dl.k8s.io")
    assert top["evidence"] == ("hosts with symptom: 3/3 have facts.binaries[kubelet].source_host = dl.k8s.io; "
                               "without: 0/4")
    assert top["p_value"] == 1 / 35 or abs(top["p_value"] - 1 / 35) < 1e-12


def test_symptom_by_rule_counts_unwaived_findings_only() -> None:
    index = index_snapshots(fleet())
    findings = [Finding(h, "systemd.unit-crash-looping", "high", "t", item="ecs.service") for h in ("b1", "b2")]
    findings.append(Finding("b3", "systemd.unit-crash-looping", "high", "t", waived=True, waiver="known"))
    section = symptom_section(index, Symptom.parse("systemd.unit-crash-looping"), findings, 10)
    assert section["hosts_with"] == ["b1", "b2"] and section["kind"] == "rule"
    top = section["ranked"][0]
    # b3 (waived) has the same facts as b1/b2 but counts as "without": the separation is imperfect
    assert top["with_symptom"] == {"have": 2, "total": 2} and top["without_symptom"] == {"have": 1, "total": 5}
    # kubelet's source splits the same way; the crash-looping unit's own fact is the likelier cause (#15)
    assert top["path"] == "facts.systemd.unit_files[ecs.service].state" and top["relation"] == "subject"
