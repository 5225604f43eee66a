"""Baselines, drift, AZ comparison and symptom ranking on the real systemd-nspawn fleet over SSH."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.collect.schema import is_volatile
from auditor.context import Env
from auditor.reportdoc import validate_report
from tests.fleet import AZ_B_HOSTS, EXTRA_UNIT, Fleet, memcg

pytestmark = pytest.mark.fleet
# no `version`: the fleet's kubelet belongs to no package and is never run without --exec-versions
KUBELET = {f"facts.binaries[kubelet].{f}" for f in ("sha256", "source_host", "source_url")}


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def scanned(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    fleet.wait_crashloop()
    work = tmp_path_factory.mktemp("compare-fleet")
    golden = work / "golden.yaml"
    code, _, err = cli("baseline", "capture", "-i", str(fleet.inventory_path), "--host", "golden", "-o", str(golden))
    assert code == 0, err
    code, _, err = cli("scan", "-i", str(fleet.inventory_path), "--baseline", str(golden), "--group-by", "az",
                       "--symptom", "systemd.unit-crash-looping", "--format", "json", "--out", str(work / "out"))
    assert code == 1, err  # high drift and findings
    doc = json.loads((work / "out" / "report.json").read_text())
    validate_report(doc)
    return golden, doc


def test_az_b_drifts_on_ecs_and_kubelet_and_a2_on_its_extra_unit_only(scanned: tuple[Path, dict]) -> None:
    _, doc = scanned
    assert doc["baseline"]["source_host"] == "golden"
    drift: dict[str, set[str]] = {}
    for d in doc["drift"]:
        drift.setdefault(d["host"], set()).add(d["path"])
    for host in AZ_B_HOSTS:
        assert drift[host] == {"facts.systemd.unit_files[ecs.service].state"} | KUBELET, host
    assert drift["a2"] == {f"facts.systemd.unit_files[{EXTRA_UNIT}].state"}
    assert set(drift) == {"a2", *AZ_B_HOSTS}


def test_az_comparison_ranks_ecs_and_kubelet_and_keeps_a2_as_an_outlier(scanned: tuple[Path, dict]) -> None:
    _, doc = scanned
    comparison = doc["comparison"]
    top = comparison["splits"][:2]
    assert {s["subject"] for s in top} == {"systemd:ecs.service", "binaries:kubelet"}
    kubelet = next(s for s in top if s["subject"] == "binaries:kubelet")
    assert {kubelet["path"], *kubelet["related"]} >= KUBELET
    assert [(o["host"], o["subject"]) for o in comparison["outliers"]] == [("a2", f"systemd:{EXTRA_UNIT}")]
    assert not [s for s in comparison["splits"] if EXTRA_UNIT in json.dumps(s)]
    everything = [i["path"] for i in comparison["splits"] + comparison["outliers"]]
    everything += [p for i in comparison["splits"] + comparison["outliers"] for p in i["related"]]
    assert not [p for p in everything if is_volatile(p)]


def test_crash_loop_symptom_ranks_the_ecs_service_fact_first(scanned: tuple[Path, dict]) -> None:
    _, doc = scanned
    symptom = doc["symptom"]
    assert symptom["hosts_with"] == sorted(AZ_B_HOSTS)
    top = symptom["ranked"][:3]
    # kubelet's download source separates the sick hosts just as well; the looping unit's own fact is the cause
    assert top[0]["subject"] == "systemd:ecs.service" and top[0]["relation"] == "subject", top[0]
    kubelet = next(r for r in top if (r["path"], r["value"]) == ("facts.binaries[kubelet].source_host", "dl.k8s.io"))
    assert kubelet["p_value"] == top[0]["p_value"]
    assert "3/3 have facts.binaries[kubelet].source_host = dl.k8s.io; without: 0/4" in kubelet["evidence"]


@pytest.mark.kernel
def test_chain_links_the_crash_loop_to_real_dying_memcgs_on_b_hosts_only(fleet: Fleet, tmp_path: Path) -> None:
    reason = memcg.available()
    if reason:
        pytest.skip(reason)
    fleet.wait_crashloop()
    memcg.settle()
    out = tmp_path / "out"
    with memcg.DyingMemcgs() as batch:
        made = batch.make(1100)  # real dying memcgs: every host shares this kernel, so every host sees them
        code, terminal, err = cli("scan", "-i", str(fleet.inventory_path), "--symptom",
                                  "provenance.source-not-allowlisted", "--format", "json,html,md", "--out", str(out))
    assert made >= 1050 and code == 1, err
    doc = json.loads((out / "report.json").read_text())
    validate_report(doc)
    chains = {c["host"]: c for c in doc["chains"]}
    assert set(chains) == set(AZ_B_HOSTS)  # a-hosts have the dying memcgs but nothing upstream: no chain
    dying_rules = {"cgroups.dying-memcgs", "cgroups.dying-memcgs-critical"}
    for host in fleet.hosts:
        if host.name not in AZ_B_HOSTS:
            assert {f["rule"] for f in doc["findings"] if f["host"] == host.name} & dying_rules, host.name
    for host in AZ_B_HOSTS:
        chain, mine = chains[host], [f for f in doc["findings"] if f["host"] == host]
        loop = next(f for f in mine if f["rule"] == "systemd.unit-crash-looping" and f["item"] == "ecs.service")
        dying = next(f for f in mine if f["rule"] in dying_rules)
        said = (f"ecs.service restarted {loop['evidence']['restarts']:,} times",
                f"{dying['evidence']['dying']:,} dying memcgs")
        assert said[0] in chain["text"] and said[1] in chain["text"], chain["text"]
        assert chain["text"].index(said[0]) < chain["text"].index(said[1])
        assert dying["evidence"]["dying"] >= made - 100
        assert not chain["partial"]  # nothing skipped: the hot core and ENA links are simply not there
        assert [link["rule"] for link in chain["links"]][-1] in dying_rules
    html = (out / "report.html").read_text()
    assert 'id="chains"' in html and "dying memcgs" in html[html.index('id="chains"'):html.index('id="summary"')]
    assert "**Incident chain" in (out / "report.md").read_text()
    assert doc["symptom"]["ranked"][0]["path"].startswith("facts.binaries[kubelet].")  # a kubelet symptom
    # the terminal summary: one line per distinct chain, the symptom's top fact with numbers for people
    assert "  chain on b1: ecs.service enabled with no ECS_CLUSTER → " in terminal
    assert "(same chain on 2 more hosts)" in terminal
    assert "symptom provenance.source-not-allowlisted goes with facts.binaries[kubelet]." in terminal
    assert "(score 1.54, p=0.029, the symptom's own subject)" in terminal


def test_diff_between_the_baseline_and_a_live_host(fleet: Fleet, scanned: tuple[Path, dict]) -> None:
    golden, _ = scanned
    code, out, err = cli("diff", "-i", str(fleet.inventory_path), str(golden), "b2")
    assert code == 1, err
    assert "facts.binaries[kubelet].source_host: amazon-eks.s3.us-west-2.amazonaws.com → dl.k8s.io" in out
    code, out, err = cli("diff", "-i", str(fleet.inventory_path), str(golden), "a1")
    assert code == 0, out + err
