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
from tests.fleet import AZ_B_HOSTS, EXTRA_UNIT, Fleet

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


def test_crash_loop_symptom_puts_kubelet_source_among_the_top_facts(scanned: tuple[Path, dict]) -> None:
    _, doc = scanned
    symptom = doc["symptom"]
    assert symptom["hosts_with"] == sorted(AZ_B_HOSTS)
    top = symptom["ranked"][:3]
    assert ("facts.binaries[kubelet].source_host", "dl.k8s.io") in [(r["path"], r["value"]) for r in top]
    assert any("3/3 have facts.binaries[kubelet].source_host = dl.k8s.io; without: 0/4" in r["evidence"]
               for r in top)


def test_diff_between_the_baseline_and_a_live_host(fleet: Fleet, scanned: tuple[Path, dict]) -> None:
    golden, _ = scanned
    code, out, err = cli("diff", "-i", str(fleet.inventory_path), str(golden), "b2")
    assert code == 1, err
    assert "facts.binaries[kubelet].source_host: amazon-eks.s3.us-west-2.amazonaws.com → dl.k8s.io" in out
    code, out, err = cli("diff", "-i", str(fleet.inventory_path), str(golden), "a1")
    assert code == 0, out + err
