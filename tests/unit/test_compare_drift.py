"""Drift of the recorded fleet against a baseline captured from its golden host (real snapshots from the
systemd-nspawn fleet, saved under tests/data/compare/fleet), and `ami-auditor diff`."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.compare.baseline import load_baseline
from auditor.compare.capture import capture, render
from auditor.compare.drift import drift_view, fleet_drift
from auditor.compare.index import index_snapshots
from auditor.compare.normalize import normalize
from auditor.context import Env
from tests.paths import DATA

FLEET = DATA / "compare" / "fleet"
HOSTS = ("golden", "a1", "a2", "a3", "b1", "b2", "b3")
KUBELET = {f"facts.binaries[kubelet].{f}" for f in ("sha256", "source_host", "source_url", "version")}
ECS = "facts.systemd.unit_files[ecs.service].state"
EXTRA = "facts.systemd.unit_files[node-exporter-extra.service].state"


def snap(name: str) -> dict:
    return json.loads((FLEET / f"{name}.json").read_text())


@pytest.fixture
def golden_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "golden.yaml"
    path.write_text(render(*capture(snap("golden"))))
    return path


def test_az_b_drifts_on_ecs_enablement_and_kubelet_and_a2_on_its_extra_unit_only(golden_yaml: Path) -> None:
    drift = fleet_drift(load_baseline(str(golden_yaml)), index_snapshots(snap(h) for h in HOSTS))
    by_host: dict[str, dict[str, object]] = {h: {} for h in HOSTS}
    for d in drift:
        by_host[d.host][d.path] = d
    assert not by_host["golden"] and not by_host["a1"] and not by_host["a3"]
    assert set(by_host["a2"]) == {EXTRA}
    assert (by_host["a2"][EXTRA].expected, by_host["a2"][EXTRA].actual) == ("disabled", "enabled")
    assert by_host["a2"][EXTRA].severity == "high"  # a newly enabled unit
    for host in ("b1", "b2", "b3"):
        assert set(by_host[host]) == {ECS} | KUBELET, host
        ecs = by_host[host][ECS]
        assert (ecs.kind, ecs.expected, ecs.actual, ecs.severity) == ("changed", "disabled", "enabled", "high")
        src = by_host[host]["facts.binaries[kubelet].source_host"]
        assert (src.expected, src.actual) == ("amazon-eks.s3.us-west-2.amazonaws.com", "dl.k8s.io")
        assert src.severity == "high"
        assert by_host[host]["facts.binaries[kubelet].sha256"].severity == "high"


def test_allowed_values_patterns_deleted_lines_and_ignore(tmp_path: Path, golden_yaml: Path) -> None:
    text = golden_yaml.read_text()
    lines = [ln for ln in text.splitlines() if "facts.binaries[kubelet].sha256" not in ln
             and "facts.binaries[kubelet].source_url" not in ln]  # "delete lines you don't care about"
    edited = "\n".join(lines).replace(
        "facts.binaries[kubelet].source_host: amazon-eks.s3.us-west-2.amazonaws.com",
        "facts.binaries[kubelet].source_host: [amazon-eks.s3.us-west-2.amazonaws.com, dl.k8s.io]").replace(
        "facts.binaries[kubelet].version: Kubernetes v1.29.3-eks-ae9a62a",
        "facts.binaries[kubelet].version: {pattern: 'Kubernetes v1\\.29\\.3(-eks-\\w+)?'}").replace(
        "ignore: []", "ignore: ['facts.systemd.unit_files[ecs.*]']")
    path = tmp_path / "edited.yaml"
    path.write_text(edited + "\n")
    assert drift_view(load_baseline(str(path)), normalize(snap("b1"))) == []


def test_failed_pattern_and_list_show_the_baselines_own_spelling(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("baseline: ami-auditor/baseline/1\nexpect:\n"
                    "  facts.binaries[kubelet].version: {pattern: '.*-eks-.*'}\n"
                    "  facts.kernel.thp_enabled: [always, never]\n")
    diffs = {d.path: d for d in drift_view(load_baseline(str(path)), normalize(snap("b1")))}
    assert diffs["facts.binaries[kubelet].version"].expected == {"pattern": ".*-eks-.*"}
    assert diffs["facts.kernel.thp_enabled"].expected == ["always", "never"]
    assert diffs["facts.kernel.thp_enabled"].actual == "madvise"


def test_complete_collections_report_new_rows_and_missing_ones(golden_yaml: Path) -> None:
    host = snap("a1")
    host["facts"]["packages"]["items"].append({"name": "netcat-openbsd", "version": "1.219-1", "arch": "amd64"})
    host["facts"]["packages"]["items"] = [p for p in host["facts"]["packages"]["items"] if p["name"] != "procps"]
    host["facts"]["systemd"]["unit_files"].append({"name": "cryptominer.service", "state": "enabled"})
    host["facts"]["systemd"]["unit_files"].append({"name": "harmless.service", "state": "static"})
    diffs = {(d.path, d.kind): d for d in drift_view(load_baseline(str(golden_yaml)), normalize(host))}
    assert diffs[("facts.packages.items[netcat-openbsd]", "added")].actual == {"version": "1.219-1"}
    assert ("facts.packages.items[procps]", "removed") in diffs
    assert diffs[("facts.systemd.unit_files[cryptominer.service]", "added")].severity == "high"
    assert not [k for k in diffs if "harmless" in k[0]]  # static units are not a configuration choice
    assert len(diffs) == 3


def test_an_unknown_area_is_drift_of_its_own_never_a_pass(golden_yaml: Path) -> None:
    host = snap("b1")
    host["facts"]["systemd"] = None
    host["errors"]["systemd"] = "systemctl timed out"
    diffs = drift_view(load_baseline(str(golden_yaml)), normalize(host))
    unknown = [d for d in diffs if d.kind == "unknown"]
    assert [d.path for d in unknown] == ["facts.systemd"]
    assert not [d for d in diffs if d.path.startswith("facts.systemd.")]
    assert {d.path for d in diffs if d.kind != "unknown"} == KUBELET


def test_reordered_snapshot_has_no_drift(golden_yaml: Path) -> None:
    host = snap("golden")
    twisted = copy.deepcopy(host)
    for rows in (twisted["facts"]["packages"]["items"], twisted["facts"]["systemd"]["unit_files"],
                 twisted["facts"]["binaries"]):
        rows.reverse()
    assert drift_view(load_baseline(str(golden_yaml)), normalize(twisted)) == []


def run_diff(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["diff", *argv], Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def test_diff_command_between_snapshots_and_baselines(golden_yaml: Path) -> None:
    code, out, _ = run_diff(str(FLEET / "a1.json"), str(FLEET / "a3.json"))
    assert (code, out.strip()) == (0, f"0 change(s) (0 difference(s)) from {FLEET / 'a1.json'} to {FLEET / 'a3.json'}")
    code, out, _ = run_diff("--json", str(FLEET / "a1.json"), str(FLEET / "b1.json"))
    diffs = {d["path"]: d for d in json.loads(out)}
    assert code == 1
    assert diffs["facts.systemd.enabled_units[ecs.service]"]["kind"] == "added"
    assert diffs["facts.binaries[kubelet].source_host"]["actual"] == "dl.k8s.io"
    assert not [p for p in diffs if "restarts" in p or "main_pid" in p]
    code, out, _ = run_diff(str(golden_yaml), str(FLEET / "a2.json"))
    assert code == 1 and "changed  [high] " + EXTRA + ": disabled → enabled" in out
    code, out, _ = run_diff(str(FLEET / "a2.json"), str(golden_yaml))  # the other way round
    assert code == 1 and EXTRA + ": enabled → disabled" in out
    code, out, _ = run_diff(str(golden_yaml), str(golden_yaml))
    assert code == 0


def test_diff_rejects_bad_operands_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "ami-auditor/snapshot/1",\n "name": }\n')
    code, _, err = run_diff(str(bad), str(FLEET / "a1.json"))
    assert code == 2 and f"{bad}:2:" in err
    code, _, err = run_diff(str(tmp_path / "missing.yaml"), str(FLEET / "a1.json"))
    assert code == 2 and "no such file" in err
    code, _, err = run_diff("ssh://root@host:notaport", str(FLEET / "a1.json"))
    assert code == 2


def test_a_baseline_from_a_host_without_systemd_facts_does_not_expect_them(tmp_path: Path) -> None:
    host = snap("a1")
    host["facts"]["systemd"] = None
    host["errors"]["systemd"] = "systemd is not running"
    path = tmp_path / "partial.yaml"
    path.write_text(render(*capture(host), sorted(normalize(host).unknown)))
    baseline = load_baseline(str(path))
    assert "facts.systemd.unit_files" not in baseline.complete
    assert "# not captured (collector failed on the source host): systemd" in path.read_text()
    assert drift_view(baseline, normalize(host)) == []
    assert {d.path for d in drift_view(baseline, normalize(snap("b1")))} == KUBELET  # systemd not judged



def test_diff_flat_leaves_out_only_what_deepdiff_finds_nothing_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """diff_flat skips what is the same on both sides before deepdiff; values equal in Python but of other
    types (1, 1.0, True) are still type changes, and rows added to a collection whose other rows are the
    same are still rows added: the same differences, in the same order, as deepdiff over the whole views."""
    from auditor.compare import drift

    expected = {"facts.a": 1, "facts.b": 1.0, "facts.c": [1, 2], "facts.d": "x", "facts.e": {"k": [1]},
                "facts.units[a].state": "on", "facts.units[b].state": True, "facts.pkgs[p].version": "1",
                "facts.gone[g].x": 1}
    actual = {"facts.a": True, "facts.b": 1, "facts.c": [1, 2.0], "facts.d": "x", "facts.e": {"k": [1.0]},
              "facts.units[a].state": "on", "facts.units[b].state": 1, "facts.units[c].state": "on",
              "facts.pkgs[p].version": "1", "facts.pkgs[q].version": "2", "facts.new[r].x": 3}
    pruned = drift.diff_flat(expected, actual)
    monkeypatch.setattr(drift, "_prune", lambda t1, t2: (t1, t2))
    assert pruned == drift.diff_flat(expected, actual)
    assert {(d.path, d.kind) for d in pruned} >= {
        ("facts.a", "changed"), ("facts.b", "changed"), ("facts.units[b].state", "changed"),
        ("facts.units[c]", "added"), ("facts.pkgs[q]", "added"), ("facts.new[r]", "added"),
        ("facts.gone[g]", "removed")}


def test_select_takes_exactly_the_paths_a_default_pattern_finds() -> None:
    """select() matches the default patterns as one anchored pattern: the same paths as any of them."""
    from auditor.compare.capture import DEFAULT_FACTS, select

    for name in HOSTS:
        flat = normalize(snap(name)).flat
        paths = [*flat, *(p + suffix for p in flat for suffix in ("x", "\n", "[x]"))]
        assert {p for p in select(dict.fromkeys(paths, "v"))} == \
            {p for p in paths if any(d.search(p) for d in DEFAULT_FACTS)}
