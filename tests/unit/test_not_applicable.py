"""Runtime facts of an unbooted image are "not applicable": not errors, not differences, not judged."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import jsonschema

from auditor.cli import main
from auditor.collect.schema import snapshot_json_schema
from auditor.compare.drift import diff_views, drift_view
from auditor.compare.normalize import normalize
from auditor.context import Env
from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from auditor.models import HostSpec
from auditor.run.live_hosts import collect_host
from tests.paths import DATA
from tests.unit.test_image_transport import make_root

RUNTIME = {"cgroups", "cpu", "cpu_stack", "disk", "gpu", "network", "proc"}
SNAPSHOTS = DATA / "snapshots"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def image_snapshot(root: Path) -> dict:
    result = collect_host(HostSpec(root.name, f"image://{root}"), binaries=["kubelet"])
    assert result.status == "ok", result.error
    return result.snapshot


def test_image_runtime_areas_are_not_applicable_not_errors(tmp_path: Path) -> None:
    snap = image_snapshot(make_root(tmp_path / "img"))
    assert set(snap["not_applicable"]) == RUNTIME
    assert all("unbooted image" in why for why in snap["not_applicable"].values())
    assert not RUNTIME & set(snap["errors"]), snap["errors"]
    assert snap["probe"]["failed_areas"] == []
    jsonschema.validate(snap, snapshot_json_schema())
    code, out, _ = run("collect", f"image://{tmp_path / 'img'}", "-o", str(tmp_path / "out"))
    assert code == 0 and "not applicable: cgroups,cpu,cpu_stack,disk,gpu,network,proc" in out and "failed:" not in out


def test_rules_on_not_applicable_areas_make_no_finding(tmp_path: Path) -> None:
    snap = image_snapshot(make_root(tmp_path / "img"))
    findings = Judge(load_rules(builtin=True)).judge(snap)
    unknown = [f for f in findings if "could not be evaluated" in f.title]
    assert unknown == [], [f.title for f in unknown]
    assert any(f.rule == "systemd.ecs-enabled-without-cluster" for f in findings)  # the rest is still judged
    code, out, _ = run("scan", f"image://{tmp_path / 'img'}", "--format", "json", "--out", str(tmp_path / "r"))
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["hosts"][0]["not_applicable"] == sorted(RUNTIME)
    assert report["hosts"][0]["collector_errors"] == {}


def test_two_images_differ_only_where_they_differ(tmp_path: Path) -> None:
    a, b = make_root(tmp_path / "a"), make_root(tmp_path / "b")
    os.unlink(b / "etc/systemd/system/multi-user.target.wants/ecs.service")
    diffs = diff_views(normalize(image_snapshot(a)), normalize(image_snapshot(b)))
    assert {d.path for d in diffs} == {"facts.systemd.enabled_units[ecs.service]",
                                       "facts.systemd.unit_files[ecs.service].state"}
    code, out, _ = run("diff", f"image://{a}", f"image://{b}")
    assert code == 1 and "unknown" not in out and "2 difference(s)" in out
    code, out, _ = run("diff", f"image://{a}", f"image://{make_root(tmp_path / 'c')}")
    assert code == 0, out


def test_image_against_a_live_golden_baseline_checks_only_what_applies(tmp_path: Path) -> None:
    """A baseline captured from a live host lists cgroups facts: an image is not drift (or unknown) there."""
    golden = tmp_path / "golden.yaml"
    code, _, err = run("baseline", "capture", "--snapshot", str(SNAPSHOTS / "fleet-golden.json"), "-o", str(golden))
    assert code == 0, err
    from auditor.compare.baseline import load_baseline

    baseline = load_baseline(str(golden))
    assert "cgroups" in baseline.areas
    diffs = drift_view(baseline, normalize(image_snapshot(make_root(tmp_path / "img"))))
    assert diffs and not [d for d in diffs if d.path.split(".")[1].split("[")[0] in RUNTIME]
