"""The `outlier` fleet kind: a host whose number is far above its group's median (value > factor × median and
value − median ≥ min_delta, groups of at least min_hosts hosts with a number), and the built-in rule
`fleet.dying-memcgs-outlier-in-az` on snapshots recorded from the real fleet with cgroups from real captures.

On the real fleet (test at the end): the main fleet's hosts share one cgroup-v1 kernel, so at any instant
their dying memcg counts are one host-wide number — real dying memcgs make every host of the AZ high and
none an outlier. A leaking host is shown with real snapshots taken apart in time: its peers' before the
leak, its own after it (per-host v2 counts would need the trixie fleet, whose base root is not built here).
"""

from __future__ import annotations

import copy
import io
import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor.cli import main
from auditor.context import Env
from auditor.errors import InputError
from auditor.evaluate.core import EvalPlan, Evaluation
from auditor.evaluate.files import as_result
from auditor.evaluate.retained import fleet_cut, fleet_slice
from auditor.judge import fleet
from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from auditor.judge.stage import JudgePlan
from auditor.models import Finding
from tests.fleet import Fleet, memcg
from tests.paths import ROOT
from tests.system.test_fleet_rules import host
from tests.unit.test_rules_builtin import recorded

REPO = ROOT
REAL = REPO / "tests" / "data" / "real"
RULE = "fleet.dying-memcgs-outlier-in-az"
PACK = """\
rules:
  - id: t.dying-outlier
    title: "{{ item.value }} dying where {{ item.count }} hosts of {{ item.group }} have {{ item.median }}"
    severity: high
    fleet:
      outlier: facts.cgroups.memory.dying
      within: az
      factor: 10
      min_delta: 1000
"""


def hosts(*dying: Any, az: str = "us-east-1a", prefix: str = "h") -> list[dict[str, Any]]:
    """Recorded real-fleet snapshots, one per number, in `az`."""
    base = recorded("fleet-a1")
    out = []
    for i, n in enumerate(dying):
        snap = copy.deepcopy(base)
        snap["name"] = snap["host"]["hostname"] = f"{prefix}{i}"
        snap["labels"]["az"] = snap["host"]["az"] = az
        snap["facts"]["cgroups"]["memory"]["dying"] = n
        out.append(snap)
    return out


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Judge:
    d = tmp_path_factory.mktemp("pack")
    (d / "t.yaml").write_text(PACK)
    return Judge(load_rules([d], builtin=False))


def found(judge: Judge, snaps: list[dict[str, Any]]) -> list[Finding]:
    return [f for f in judge.judge_all(snaps) if f.rule == "t.dying-outlier"]


def test_the_host_far_above_its_az_is_flagged_with_its_group_value_median_and_count(judge: Judge) -> None:
    [f] = found(judge, hosts(16, 30, 35, 20, 5000))
    assert (f.host, f.item, f.severity) == ("h4", "us-east-1a", "high")
    assert f.evidence == {"value": 5000, "within": "az", "group": "us-east-1a", "median": 30, "count": 5,
                          "factor": 10, "min_delta": 1000, "outliers": ["h4"]}
    assert f.title == "5000 dying where 5 hosts of us-east-1a have 30"


def test_other_groups_are_measured_against_their_own_median(judge: Judge) -> None:
    """b's hosts all hold 5,000: high, but not above their own AZ; a's 5,000 is."""
    snaps = hosts(16, 30, 5000) + hosts(5000, 5000, 5100, az="us-east-1b", prefix="b")
    assert [(f.host, f.evidence["group"], f.evidence["median"]) for f in found(judge, snaps)] == [
        ("h2", "us-east-1a", 30)]


@pytest.mark.parametrize("dying", [(16, 16, 16, 16), (0, 0, 0, 0), (70000, 70000, 70000), (0, 0, 5, 999)])
def test_a_uniform_group_or_one_within_min_delta_is_silent(judge: Judge, dying: tuple[int, ...]) -> None:
    assert found(judge, hosts(*dying)) == []


def test_groups_smaller_than_min_hosts_are_skipped(judge: Judge, tmp_path: Path) -> None:
    assert found(judge, hosts(0, 100000)) == []  # two hosts have no outlier
    assert [f.host for f in found(judge, hosts(0, 0, 100000))] == ["h2"]  # the default min_hosts: 3
    (tmp_path / "t.yaml").write_text(PACK + "      min_hosts: 4\n")
    four = Judge(load_rules([tmp_path], builtin=False))
    assert found(four, hosts(0, 0, 100000)) == []
    assert [f.host for f in found(four, hosts(0, 0, 0, 100000))] == ["h3"]


@pytest.mark.parametrize("bad", [None, "5000", True, float("nan"), float("inf"), 2**64, [5000], {"n": 5000}])
def test_hosts_without_a_number_take_no_part(judge: Judge, bad: Any) -> None:
    """Null (the fact not read), and what no counter is (a string, a bool, NaN, beyond 2^63, a list) from an
    untrusted host: that host is out of the group, which is then counted without it."""
    snaps = hosts(bad, bad, 0, 0, 5000)
    [f] = found(judge, snaps)
    assert (f.host, f.evidence["count"], f.evidence["median"]) == ("h4", 3, 0)
    assert found(judge, hosts(bad, bad, 0, 5000)) == []  # two hosts with a number: below min_hosts
    snaps[4]["facts"]["cgroups"]["memory"]["dying"] = bad  # the outlier's own value is garbage: nothing
    assert found(judge, snaps) == []


def test_a_host_without_the_within_label_takes_no_part(judge: Judge) -> None:
    snaps = hosts(0, 0, 5000, 9000)
    for s in snaps[2:]:
        del s["labels"]["az"], s["host"]["az"]
    assert found(judge, snaps) == []  # the two left are below min_hosts
    snaps[2]["labels"]["az"] = "us-east-1a"
    assert [f.host for f in found(judge, snaps)] == ["h2"]


def test_ties_at_the_bars(judge: Judge) -> None:
    """`>` factor × median (a value exactly 10× is not above it), `≥` min_delta (exactly min_delta above is);
    equal outliers are all flagged and name each other; an even group's median is its middle pair's mean."""
    assert found(judge, hosts(0, 0, 0, 999)) == []
    assert [f.host for f in found(judge, hosts(0, 0, 0, 1000))] == ["h3"]  # 1000 − 0 ≥ 1000
    assert found(judge, hosts(200, 200, 200, 2000)) == []  # 2000 = 10 × 200: not above
    assert [f.host for f in found(judge, hosts(200, 200, 200, 2001))] == ["h3"]
    assert found(judge, hosts(10, 10, 10, 500)) == []  # 50× the median, but only 490 above it
    twins = found(judge, hosts(0, 0, 0, 0, 0, 7000, 7000))
    assert [f.host for f in twins] == ["h5", "h6"] and all(f.evidence["outliers"] == ["h5", "h6"] for f in twins)
    [f] = found(judge, hosts(10, 20, 30, 40, 5000, 6))  # sorted 6 10 20 30 40 5000: median (20 + 30) / 2
    assert (f.host, f.evidence["median"]) == ("h4", 25)
    [f] = found(judge, hosts(10, 21, 30, 40, 5000, 6))
    assert f.evidence["median"] == 25.5 and "have 25.5" in f.title


def test_where_chooses_the_hosts(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(PACK + "      where: \"facts.cgroups.mode != 'v2'\"\n")
    judge = Judge(load_rules([tmp_path], builtin=False))
    snaps = hosts(0, 0, 0, 5000)
    assert [f.host for f in found(judge, snaps)] == ["h3"]
    snaps[0]["facts"]["cgroups"]["mode"] = "v2"  # out: the group is three hosts still
    assert [f.host for f in found(judge, snaps)] == ["h3"]
    snaps[1]["facts"]["cgroups"]["mode"] = "v2"  # two left
    assert found(judge, snaps) == []


def test_a_huge_group_keeps_one_number_per_host_and_its_findings_stay_small() -> None:
    """100,000 hosts in one AZ, 60 of them leaking: 60 findings, each naming at most MAX_NAMED outliers and no
    other host, the same size as in a group of ten. What the core keeps of a host for the rule is its group and
    number (a Taking) and a slice holding none of its facts (the title reads only `item`)."""
    rule = next(r for r in load_rules().rules if r.id == RULE)
    names = [{"name": f"h{i:06d}"} for i in range(100_000)]
    taking: list[tuple[Any, fleet.Taking]] = [
        (names[i], fleet.Taking("us-east-1a", (), 70000 + i if i % 1667 == 0 else 7)) for i in range(100_000)]
    out = fleet.findings(rule, taking)  # type: ignore[arg-type]  # a slice needs only what the title reads
    assert len(out) == 60 and {f.host for f in out} == {f"h{i:06d}" for i in range(0, 100_000, 1667)}
    assert all(f.evidence["count"] == 100_000 and f.evidence["median"] == 7 for f in out)
    assert all(len(f.evidence["outliers"]) == fleet.MAX_NAMED for f in out)
    small = fleet.findings(rule, [({"name": f"h{i:06d}"}, fleet.Taking("us-east-1a", (), n))  # type: ignore[misc]
                                  for i, n in enumerate([70000, 1, 2, 3, 4, 5, 6, 7, 8, 9])])
    assert set(small[0].evidence) == set(out[0].evidence)
    assert len(json.dumps(out[0].evidence)) < 2 * len(json.dumps(small[0].evidence)) + 50 * 12
    judge = Judge(load_rules())
    snap = hosts(68440)[0]
    cut = fleet_slice(fleet_cut(judge), snap)
    assert cut is not None and "cgroups" not in cut["facts"]
    index = [r.id for r in judge.rules if r.fleet is not None].index(RULE)
    assert judge.fleet_reads(snap)[index] == fleet.Taking("us-east-1a", (), 68440)
    assert not hasattr(fleet.Taking("a", (), 1), "__dict__")  # slots: three fields a host


def test_worker_cores_merged_give_the_one_process_findings(judge: Judge, tmp_path: Path) -> None:
    """Each host's number is read in its worker; the parent groups the merged parts."""
    snaps = hosts(16, 30, 5000, 35, 20) + hosts(0, 0, 9000, az="us-east-1b", prefix="b")
    (tmp_path / "t.yaml").write_text(PACK)
    ruleset = load_rules([tmp_path], builtin=False)
    plan = EvalPlan(JudgePlan(ruleset, ()), _no_compare(), None)
    parent = Evaluation(plan)
    for part in ((0, 3, 6), (1, 2, 4, 5, 7)):
        worker = Evaluation(plan, worker=True)
        for i in part:
            worker.add(as_result(snaps[i], f"{snaps[i]['name']}.json"), i)
        parent.merge(worker.hand_over())
    got = [f for f in parent.finish("2026-12-05T00:00:00Z").findings if f.rule == "t.dying-outlier"]
    want = found(judge, snaps)
    assert [(f.host, f.evidence) for f in got] == [(f.host, f.evidence) for f in want]
    assert [f.host for f in got] == ["h2", "b2"]


def _no_compare() -> Any:
    from auditor.compare.stage import prepare
    from auditor.options import CompareOptions

    return prepare(CompareOptions(), frozenset())


# -- the built-in rule through the CLI, on real-fleet snapshots with cgroups from real captures ----------------

def _capture(area: str, name: str) -> dict[str, Any]:
    """The cgroups area the parser gives on a real capture (tests/data/real, checked by test_parsers_real)."""
    return json.loads((REAL / area / f"{name}.json").read_text())


def _az_snapshots(tmp_path: Path) -> list[Path]:
    """us-east-1a: golden and a1 as recorded on the real fleet (16 dying, host-wide), two hosts with the cgroups
    of real 6.10/6.11 captures (35, 30), and the DLAMI host with Pinterest's figures (68,680 memcgs, 240 live).
    us-east-1b: b1 (16), a copy of it, and a host with the real 5.0 capture (1,000 dying): 62× its AZ's median,
    but under min_delta above it."""
    snaps = []
    for name, like, az, cgroups in [
            ("golden", "fleet-golden", "us-east-1a", None), ("a1", "fleet-a1", "us-east-1a", None),
            ("a2", "fleet-a1", "us-east-1a", _capture("cgroups_v2_stat", "kernel610-v4-patch-root-and-system-slice")),
            ("a3", "fleet-a1", "us-east-1a", _capture("cgroups_v2_stat", "kernel611-root-and-system-slice")),
            ("dlami", "ubuntu2004-dlami", "us-east-1a", None),
            ("b1", "fleet-b1", "us-east-1b", None), ("b2", "fleet-b1", "us-east-1b", None),
            ("b3", "fleet-b1", "us-east-1b", _capture("cgroups_v2_stat", "kernel50-root-dying-only"))]:
        snap = host(name, like)  # its own machine-id and host keys: only the AZ's numbers are in common
        snap["labels"]["az"] = snap["host"]["az"] = az
        if cgroups is not None:
            snap["facts"]["cgroups"] = cgroups
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(snap))
        snaps.append(path)
    return snaps


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def test_rules_check_flags_the_leaking_host_of_its_az(tmp_path: Path) -> None:
    paths = _az_snapshots(tmp_path)
    argv = [a for p in paths for a in ("--snapshot", str(p))]
    code, out, err = run("rules", "check", str(REPO / "rules" / "fleet.yaml"), *argv)
    assert (code, err) == (0, ""), err
    assert "fleet rules over 8 snapshot(s): 1 finding(s)" in out  # b3's 1,000 is 62× b's median, 984 above it
    lines = [ln for ln in out.splitlines() if ln.startswith("  [") and RULE in ln]
    assert lines == [f"  [HIGH    ] dlami: {RULE} [us-east-1a]: 68,440 dying memory cgroups where the 5 hosts "
                     "of us-east-1a have a median of 30"], out


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_analyze_flags_it_the_same_with_forked_workers(tmp_path: Path, jobs: str) -> None:
    d = tmp_path / "snaps"
    d.mkdir()
    _az_snapshots(d)
    code, _, err = run("analyze", str(d), "--jobs", jobs, "--no-store", "--format", "json",
                       "--out", str(tmp_path / "o"))
    assert code == 1, err  # a high finding (the outlier; the DLAMI host has others too)
    doc = json.loads((tmp_path / "o" / "report.json").read_text())
    [f] = [f for f in doc["findings"] if f["rule"] == RULE]
    assert f["host"] == "dlami" and f["evidence"] == {
        "value": 68440, "within": "az", "group": "us-east-1a", "median": 30, "count": 5, "factor": 10,
        "min_delta": 1000, "outliers": ["dlami"]}


# -- the driver rules of the pack: `agree` within an AMI, hosts without the driver out ------------------------

# first lines of /proc/driver/nvidia/version as quoted in public issues: illinois-scicomp/machine-shop-maintenance#70
# (the module left loaded after the packages moved on) and oddmario/NVIDIA-Ubuntu-Driver-Guide#4
NVRM_520 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  Thu Oct  6 21:38:55 UTC 2022"
NVRM_550 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024"


def builtin_fleet(snaps: list[dict[str, Any]], rule: str) -> list[Finding]:
    return [f for f in Judge(load_rules()).judge_all(snaps) if f.rule == rule]


def test_a_host_whose_nvidia_module_differs_within_its_ami_is_flagged() -> None:
    snaps = [host(f"g{i}") for i in range(5)]
    for s, line in zip(snaps, [NVRM_520, NVRM_520, NVRM_520, NVRM_550, None], strict=True):
        s["facts"]["kernel"]["nvidia_driver"] = line  # g4: no NVIDIA driver (a CPU host of the same AMI)
    [f] = builtin_fleet(snaps, "fleet.nvidia-driver-differs-within-ami")
    assert (f.host, f.severity, f.evidence["majority"], f.evidence["count"]) == ("g3", "high", NVRM_520, 4)
    assert f.title.startswith('g3 runs NVIDIA driver "NVRM version: NVIDIA UNIX x86_64 Kernel Module 550.90.07 ')
    assert f.title.endswith("where most hosts of ami-0c7217cdde317cfec run NVRM version: NVIDIA UNIX x86_64 Kernel "
                            "Module 520.56.06 Thu Oct 6 21:38:55 UTC 2022")
    snaps[3]["facts"]["kernel"]["nvidia_driver"] = NVRM_520
    assert builtin_fleet(snaps, "fleet.nvidia-driver-differs-within-ami") == []
    for s in snaps[:2]:  # two AMIs, each agreeing
        s["facts"]["kernel"]["nvidia_driver"], s["labels"]["ami_id"] = NVRM_550, "ami-0other"
    assert builtin_fleet(snaps, "fleet.nvidia-driver-differs-within-ami") == []


def test_a_host_whose_ena_driver_differs_within_its_ami_is_flagged() -> None:
    """The ENA blocks the parser gives on real `ethtool -i` captures (tests/data/real/network_ethtool)."""
    def ena(name: str) -> dict[str, Any]:
        return _capture("network_ethtool", name)["ena"]

    snaps = [host(f"e{i}") for i in range(4)]
    for s, block in zip(snaps, [ena("ena-1.5.0K-kernel419-info"), ena("ena-1.5.0K-kernel419-info"),
                                ena("ena-1.2.0k-info-and-stats"), ena("ena-ubuntu-5.19-aws-stats")], strict=True):
        s["facts"]["network"]["ena"] = block  # e3: an in-tree driver with no version of its own (null)
    [f] = builtin_fleet(snaps, "fleet.ena-driver-differs-within-ami")
    assert (f.host, f.item, f.evidence["majority"], f.evidence["count"]) == ("e2", "1.2.0k", "1.5.0K", 3)
    assert builtin_fleet(snaps[:2] + snaps[3:], "fleet.ena-driver-differs-within-ami") == []


# -- bad rule files: refused with file and line, exit 2 ------------------------------------------------------

@pytest.mark.parametrize(("block", "line", "message"), [
    ("outlier: facts.cgroups.memory.dying\n      within: az\n      factor: ten\n      min_delta: 1000",
     8, "must be a number of at least 1"),
    ("outlier: facts.cgroups.memory.dying\n      min_delta: 1000", 6, "needs `within: LABEL` with `outlier`"),
    ("outlier: facts.cgroups.memory.dying\n      within: az", 6, "needs `min_delta: NUMBER` with `outlier`"),
    ("outlier: facts.cgroups.memory.dying\n      within: az\n      min_delta: -1", 8, "at least 0"),
    ("outlier: facts.cgroups.memory.dying\n      within: az\n      min_delta: 9\n      min_hosts: 2", 9,
     "must be an integer of at least 3"),
    ("outlier: facts.cgroups.memory.dying\n      within: az\n      min_delta: 9\n      min_hosts: 3.5", 9,
     "must be an integer of at least 3"),
    ("agree: facts.kernel.release\n      within: az\n      factor: 3", 8, "go with `outlier: PATH` only"),
    ("outlier: facts.cgroups.memory.dying\n      agree: facts.kernel.release\n      within: az\n      min_delta: 1",
     6, "exactly one of"),
    ("outlier: facts.kernel.nvidia_driver\n      within: az\n      min_delta: 1", 6, "is a string, not a number"),
    ("outlier: facts.cgroups.controllers[].dying\n      within: az\n      min_delta: 1", 6, "is a list, not a number"),
    ("outlier: facts.cgroups.memory.dyng\n      within: az\n      min_delta: 1", 6, "unknown fact path"),
])
def test_a_malformed_outlier_block_exits_2_naming_file_and_line(tmp_path: Path, block: str, line: int,
                                                                message: str) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(f"rules:\n  - id: t.x\n    title: x\n    severity: low\n    fleet:\n      {block}\n")
    code, out, err = run("rules", "check", str(path))
    assert code == 2, (out, err)
    assert re.search(rf"{re.escape(str(path))}:{line}:(\d+:)? ", err), err
    assert message in err, err
    with pytest.raises(InputError, match=re.escape(message)):
        load_rules([tmp_path], builtin=False)


# -- on the real fleet ---------------------------------------------------------------------------------------

AZ_A = ("golden", "a1", "a2", "a3")


def _collect(inventory: Path, out: Path) -> dict[str, int]:
    code, _, err = run("collect", "-i", str(inventory), "-o", str(out))
    assert code == 0, err
    return {n: json.loads((out / f"{n}.json").read_text())["facts"]["cgroups"]["memory"]["dying"] for n in AZ_A}


def _analyze(snaps: Path, out: Path) -> list[dict[str, Any]]:
    code, _, err = run("analyze", str(snaps), "--no-store", "--format", "json", "--out", str(out))
    assert code in (0, 1), err
    return list(json.loads((out / "report.json").read_text())["findings"])


@pytest.mark.fleet
@pytest.mark.kernel
def test_real_dying_memcgs_host_wide_are_no_outlier_and_the_leaking_host_against_its_peers_is(
        fleet: Fleet, tmp_path: Path) -> None:
    reason = memcg.available()
    if reason:
        pytest.skip(reason)
    inv = yaml.safe_load(Path(fleet.inventory_path).read_text())
    inv["hosts"] = [h for h in inv["hosts"] if h["name"] in AZ_A]
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(inv))
    before = _collect(inventory, tmp_path / "before")
    quiet = sorted(before.values())[1]  # the peers' median (the machine's count now, whatever other runs left)
    n = max(1200, 10 * quiet + 1200)  # above 10× the median and min_delta (1,000) above it, with room
    if memcg.memory_num_cgroups() + n >= memcg.MEMCG_ID_LIMIT - 1000:
        pytest.skip(f"{n} more memcgs would near the kernel's memcg id limit")
    with memcg.DyingMemcgs() as batch:
        assert batch.make(n) >= n - 50
        after = _collect(inventory, tmp_path / "after")
    assert all(after[h] - before[h] >= n - 50 for h in AZ_A), (before, after)
    # at one instant the count is the kernel's: every host of the AZ is high, none above its peers
    found = _analyze(tmp_path / "after", tmp_path / "out-after")
    assert {f["host"] for f in found if f["rule"].startswith("cgroups.dying-memcgs")} == set(AZ_A)
    assert [f for f in found if f["rule"] == RULE] == []
    # a3 after the leak among its peers before it: the outlier, with its real count and their median
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for h in AZ_A:
        (mixed / f"{h}.json").write_text((tmp_path / ("after" if h == "a3" else "before") / f"{h}.json").read_text())
    [f] = [f for f in _analyze(mixed, tmp_path / "out-mixed") if f["rule"] == RULE]
    median = statistics.median([before["golden"], before["a1"], before["a2"], after["a3"]])
    assert f["host"] == "a3" and f["evidence"]["value"] == after["a3"] and f["evidence"]["count"] == 4
    assert f["evidence"]["median"] == median and f["evidence"]["group"] == "us-east-1a"
