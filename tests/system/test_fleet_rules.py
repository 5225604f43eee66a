"""Fleet rules (rules with `fleet:`, pack rules/fleet.yaml): evaluated over all snapshots of a scan.

Unit tests on snapshots recorded from the real fleet; the fleet test at the end makes two real hosts
share an SSH host key and machine-id and scans them over SSH.
"""

from __future__ import annotations

import datetime as dt
import io
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor.cli import main
from auditor.context import Env
from auditor.errors import InputError
from auditor.judge.engine import Judge
from auditor.judge.fleet import MAX_NAMED
from auditor.judge.rules import load_rules
from auditor.judge.waivers import apply_waivers, load_waivers
from auditor.models import Finding
from tests.unit.test_rules_builtin import recorded


def fleet_findings(snaps: list[dict[str, Any]], prefix: str = "fleet.") -> list[Finding]:
    return [f for f in Judge(load_rules()).judge_all(snaps) if f.rule.startswith(prefix)]


def host(name: str, like: str = "fleet-a1") -> dict[str, Any]:
    snap = recorded(like)
    snap["name"] = name
    snap["host"]["hostname"] = name
    snap["host"]["machine_id"] = f"{abs(hash(name)):032x}"[:32]
    for i, key in enumerate(snap["facts"]["hygiene"]["ssh_host_keys"]):
        key["fingerprint"] = f"SHA256:{name}-{i}"
    return snap


def test_per_host_identities_are_silent() -> None:
    assert fleet_findings([recorded("fleet-golden"), recorded("fleet-a1"), recorded("fleet-b1")]) == []
    assert fleet_findings([host(f"h{i}") for i in range(5)]) == []


def test_hosts_sharing_a_host_key_and_machine_id_are_flagged_by_name() -> None:
    snaps = [host(f"h{i}") for i in range(4)]
    snaps[2]["facts"]["hygiene"]["ssh_host_keys"][1]["fingerprint"] = "SHA256:h0-1"  # h2 got h0's ed25519 key
    snaps[2]["host"]["machine_id"] = snaps[0]["host"]["machine_id"]
    found = fleet_findings(snaps)
    by_rule: dict[str, list[Finding]] = {}
    for f in found:
        by_rule.setdefault(f.rule, []).append(f)
    assert set(by_rule) == {"fleet.shared-ssh-host-key", "fleet.shared-machine-id"}
    keys = by_rule["fleet.shared-ssh-host-key"]
    assert [f.host for f in keys] == ["h0", "h2"] and all(f.item == "SHA256:h0-1" for f in keys)
    assert keys[0].evidence == {"value": "SHA256:h0-1", "hosts": ["h0", "h2"], "count": 2}
    assert keys[0].title == "2 hosts share SSH host key SHA256:h0-1: h0, h2" and keys[0].severity == "high"
    assert [f.host for f in by_rule["fleet.shared-machine-id"]] == ["h0", "h2"]


def test_images_take_no_part_and_groups_are_bounded() -> None:
    snaps = [host(f"h{i:02d}") for i in range(MAX_NAMED + 10)]
    for s in snaps:
        s["host"]["hostname"] = "ip-10-0-0-1"
    image = host("img")
    image["facts"]["hygiene"]["image"] = True
    image["host"]["hostname"] = "ip-10-0-0-1"
    found = fleet_findings([*snaps, image])
    assert {f.host for f in found} == {s["name"] for s in snaps}  # the image is not a host with a name
    assert found[0].evidence["count"] == MAX_NAMED + 10 and len(found[0].evidence["hosts"]) == MAX_NAMED


def test_agree_flags_the_hosts_off_their_groups_majority() -> None:
    snaps = [host(f"h{i}") for i in range(4)]
    snaps[3]["facts"]["kernel"]["release"] = "6.1.0-99-amd64"
    found = fleet_findings(snaps)
    assert [(f.rule, f.host) for f in found] == [("fleet.kernel-differs-within-ami", "h3")]
    ev = found[0].evidence
    assert ev["group"] == snaps[0]["labels"]["ami_id"] and ev["within"] == "ami_id" and ev["count"] == 4
    assert ev["values"]["6.1.0-99-amd64"] == ["h3"] and len(ev["values"][ev["majority"]]) == 3
    snaps[2]["facts"]["kernel"]["release"] = "6.1.0-99-amd64"  # 2 against 2: no majority, all flagged
    assert sorted(f.host for f in fleet_findings(snaps)) == ["h0", "h1", "h2", "h3"]
    snaps[2]["labels"]["ami_id"] = snaps[3]["labels"]["ami_id"] = "ami-0other"  # two AMIs, each agreeing
    assert fleet_findings(snaps) == []


def test_az_per_metadata_against_the_listed_az() -> None:
    snap = host("b9", like="fleet-b1")
    assert fleet_findings([snap]) == []
    snap["labels"]["az"] = "us-east-1a"  # the inventory / EC2 says a, its metadata says b
    [f] = fleet_findings([snap])
    assert f.rule == "fleet.az-mismatch" and f.evidence == {"labels_az": "us-east-1a", "metadata_az": "us-east-1b"}


def test_a_host_whose_area_is_unknown_cannot_be_evaluated_the_rest_still_are() -> None:
    snaps = [host(f"h{i}") for i in range(3)]
    snaps[1]["facts"]["hygiene"]["ssh_host_keys"][0]["fingerprint"] = "SHA256:h0-0"
    snaps[2]["facts"]["hygiene"] = None
    snaps[2]["errors"]["hygiene"] = "probe section 'hygiene' timed out on the host"
    found = [f for f in fleet_findings(snaps) if f.rule == "fleet.shared-ssh-host-key"]
    assert [(f.host, f.severity) for f in found] == [("h2", "info"), ("h0", "high"), ("h1", "high")]
    assert "could not be evaluated" in found[0].title


def test_fleet_findings_are_waivable(tmp_path: Path) -> None:
    snaps = [host("h0"), host("h1")]
    snaps[1]["host"]["machine_id"] = snaps[0]["host"]["machine_id"]
    waivers = tmp_path / "w.yaml"
    waivers.write_text("waivers:\n  - {rule: fleet.shared-machine-id, hosts: [h0, h1], reason: lab clones, "
                       "expires: 2099-01-01}\n")
    found, _ = apply_waivers(fleet_findings(snaps), load_waivers(str(waivers)),
                             {s["name"]: s["labels"] for s in snaps}, dt.date(2026, 11, 30))
    assert [(f.host, f.waived) for f in found] == [("h0", True), ("h1", True)]


@pytest.mark.parametrize(("rule", "message"), [
    ("fleet: {unique: host.machine_id}\n    select: facts.os", "select is not used by a fleet rule"),
    ("fleet: {agree: facts.kernel.release}", "fleet needs `within: LABEL` with `agree`"),
    ("fleet: {unique: host.machine_id, agree: host.hostname, within: az}", "exactly one of"),
    ("fleet: {unique: facts.nope.x}", "unknown fact path"),
    ("fleet: {unique: host.machine_id, group_by: az}", "group_by"),
    ("fleet: [unique]", "fleet must be a mapping, not a list"),
])
def test_bad_fleet_rules_name_the_file_and_line(tmp_path: Path, rule: str, message: str) -> None:
    (tmp_path / "r.yaml").write_text(f"rules:\n  - id: t.x\n    title: x\n    severity: low\n    {rule}\n")
    with pytest.raises(InputError, match=message) as err:
        load_rules([tmp_path], builtin=False)
    assert str(tmp_path / "r.yaml") in str(err.value)


def test_rules_check_runs_fleet_rules_over_the_snapshots_given(tmp_path: Path) -> None:
    for name in ("h0", "h1"):
        snap = host(name)
        snap["host"]["machine_id"] = "f" * 32
        (tmp_path / f"{name}.json").write_text(__import__("json").dumps(snap))
    out = io.StringIO()
    code = main(["rules", "check", str(Path("rules/fleet.yaml").resolve()), "--snapshot", str(tmp_path / "h0.json"),
                 "--snapshot", str(tmp_path / "h1.json")], Env(stdout=out, stderr=io.StringIO()))
    assert code == 0
    assert "fleet rules over 2 snapshot(s): 2 finding(s)" in out.getvalue()
    assert "h1: fleet.shared-machine-id [" + "f" * 32 + "]" in out.getvalue()


# -- on the real fleet ------------------------------------------------------------------------------------

def _scan(inventory: Path, out: Path) -> dict[str, Any]:
    import json

    code = main(["scan", "-i", str(inventory), "--format", "json", "--out", str(out)],
                Env(stdout=io.StringIO(), stderr=io.StringIO()))
    report = json.loads((out / "report.json").read_text())
    assert code in (0, 1), report["hosts"]
    assert all(h["status"] == "ok" for h in report["hosts"]), report["hosts"]
    return report


@pytest.mark.fleet
def test_fleet_hosts_made_to_share_a_host_key_and_machine_id(fleet, tmp_path: Path) -> None:
    """a3 gets a1's SSH host keys and machine-id (as clones of one baked image would): both are flagged,
    naming each other; with their own identities back, the fleet rules are silent."""
    inv = yaml.safe_load(Path(fleet.inventory_path).read_text())
    inv["hosts"] = [h for h in inv["hosts"] if h["name"] in ("a1", "a2", "a3")]
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(inv))
    report = _scan(inventory, tmp_path / "before")
    assert [f for f in report["findings"] if f["rule"].startswith("fleet.")] == []

    a1, a3 = fleet.host("a1"), fleet.host("a3")
    saved = tmp_path / "a3-identity"
    saved.mkdir()
    keys = sorted(p.name for p in (a1.root / "etc/ssh").glob("ssh_host_*"))
    for name in [*keys, "machine-id"]:
        src = a3.root / ("etc" if name == "machine-id" else "etc/ssh") / name
        shutil.copy2(src, saved / name)
    known = Path(inv["defaults"]["ssh"]["known_hosts"])
    try:
        for name in keys:
            shutil.copy2(a1.root / "etc/ssh" / name, a3.root / "etc/ssh" / name)
        shutil.copy2(a1.root / "etc/machine-id", a3.root / "etc/machine-id")
        # sshd on a3 now presents a1's key: a known_hosts that expects it (a user of cloned hosts has one)
        lines = [ln for ln in known.read_text().splitlines() if not ln.startswith(a3.address + " ")]
        lines += [ln.replace(a1.address + " ", a3.address + " ", 1) for ln in known.read_text().splitlines()
                  if ln.startswith(a1.address + " ")]
        shared_known = tmp_path / "known_hosts"
        shared_known.write_text("\n".join(lines) + "\n")
        inv["defaults"]["ssh"]["known_hosts"] = str(shared_known)
        inventory.write_text(yaml.safe_dump(inv))
        report = _scan(inventory, tmp_path / "shared")
    finally:
        for name in keys:
            shutil.copy2(saved / name, a3.root / "etc/ssh" / name)
        shutil.copy2(saved / "machine-id", a3.root / "etc/machine-id")
    found = [f for f in report["findings"] if f["rule"].startswith("fleet.")]
    by_rule: dict[str, set[str]] = {}
    for f in found:
        by_rule.setdefault(f["rule"], set()).add(f["host"])
        assert f["evidence"]["hosts"] == ["a1", "a3"], f
    assert by_rule == {"fleet.shared-ssh-host-key": {"a1", "a3"}, "fleet.shared-machine-id": {"a1", "a3"}}
    assert len([f for f in found if f["rule"] == "fleet.shared-ssh-host-key"]) == 2 * len(
        [k for k in keys if k.endswith(".pub")])  # every key type, both hosts


def test_rules_reading_labels_or_a_map_entry_are_not_shared_between_hosts_that_differ_there(tmp_path: Path) -> None:
    """Reading inside a map (labels.az, facts.kernel.sysctls.x) is a read: the result cache keys on it
    (it did not: the first host's answer was fanned out to every host with the same other facts)."""
    (tmp_path / "t.yaml").write_text(
        "rules:\n"
        "  - {id: t.in-b, title: in b, severity: low, when: \"labels.az == 'us-east-1b'\"}\n"
        "  - id: t.swappy\n    title: swappy\n    severity: low\n"
        "    when: \"facts.kernel.sysctls.\\\"vm.swappiness\\\" == '60'\"\n")
    judge = Judge(load_rules([tmp_path], builtin=False))
    a, b = host("x1"), host("x2")
    b["labels"]["az"] = "us-east-1b"
    a["labels"]["az"] = "us-east-1a"
    a["facts"]["kernel"]["sysctls"]["vm.swappiness"] = "60"
    b["facts"]["kernel"]["sysctls"]["vm.swappiness"] = "10"
    assert [(f.host, f.rule) for f in judge.judge_all([a, b])] == [("x1", "t.swappy"), ("x2", "t.in-b")]


def test_fleet_reads_made_in_workers_give_the_one_process_findings_and_an_error_stays_one_finding(
        tmp_path: Path) -> None:
    """Each host's part in every fleet rule is read as it is judged (in analyze's workers); the parent
    only groups. Split over two worker cores and merged, the findings equal one process's; a rule whose
    path fails on one host is one "could not be evaluated" error for the scan, the other hosts' unknowns
    kept."""
    from auditor.evaluate.core import EvalPlan, Evaluation
    from auditor.evaluate.files import as_result
    from auditor.judge.stage import JudgePlan

    (tmp_path / "t.yaml").write_text(
        "rules:\n"
        "  - id: t.same-release\n    title: \"{{ item.count }} hosts run {{ item.value }}\"\n    severity: low\n"
        "    fleet: {unique: facts.os.version_id}\n"
        "  - id: t.fails\n    title: x\n    severity: low\n"
        "    fleet: {unique: \"length(facts.os.version_id)\"}\n")
    ruleset = load_rules([tmp_path])
    snaps = [host(f"h{i}") for i in range(6)]
    snaps[1]["facts"]["hygiene"]["ssh_host_keys"][0]["fingerprint"] = "SHA256:h4-0"
    snaps[2]["facts"]["os"]["version_id"] = 13  # a number: length() of it is a type error
    snaps[5]["facts"]["hygiene"] = None
    snaps[5]["errors"]["hygiene"] = "probe section 'hygiene' timed out on the host"
    want = Judge(ruleset).judge_fleet(snaps)
    plan = EvalPlan(JudgePlan(ruleset, ()), _no_compare(), None)
    parent = Evaluation(plan)
    for part in ((0, 1, 2), (3, 4, 5)):
        worker = Evaluation(plan, worker=True)
        for i in part:
            worker.add(as_result(snaps[i], f"h{i}.json"), i)
        parent.merge(worker.hand_over())
    got = [f for f in parent.finish("2026-12-03T00:00:00Z").findings if f.rule.startswith(("t.", "fleet."))]
    assert [(f.host, f.rule, f.title) for f in got] == [(f.host, f.rule, f.title) for f in want
                                                       if f.rule.startswith(("t.", "fleet."))]
    errors = [f for f in got if f.rule == "t.fails"]
    assert [(f.host, f.evidence["status"]) for f in errors] == [("*", "error")] and "length" in errors[0].title
    assert ("h5", "fleet.shared-ssh-host-key") in {(f.host, f.rule) for f in got}  # its unknown, kept
    assert {f.host for f in got if f.rule == "fleet.shared-ssh-host-key" and f.severity == "high"} == {"h1", "h4"}
    assert {f.host for f in got if f.rule == "t.same-release"} == {"h0", "h1", "h3", "h4", "h5"}


def _no_compare() -> Any:
    from auditor.compare.stage import prepare
    from auditor.options import CompareOptions

    return prepare(CompareOptions(), frozenset())
