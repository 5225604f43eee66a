"""What the evaluation core keeps of hosts of one configuration is held once (evaluate/interning.py, with
contentkey.Shared), and the
report is the same as if every host kept its own copies."""

from __future__ import annotations

import copy
import json
from typing import Any

from auditor import contentkey
from auditor.contentkey import Shared
from auditor.evaluate.core import EvalPlan, Evaluation, HostRecord
from auditor.history.feed import Feed
from auditor.judge.rules import load_rules
from auditor.judge.stage import JudgePlan
from auditor.models import HostResult, HostSpec
from auditor.reportdoc import report_to_dict
from tests.paths import DATA
from tests.system.test_fleet_rules import _no_compare

_ONE = contentkey.Shared.one
FLEET = DATA / "compare" / "fleet"


def test_equal_values_are_held_once_and_values_that_differ_in_type_or_order_are_not() -> None:
    shared = Shared()
    first = {"a": [1, 2], "b": "x"}
    assert shared.one(first) is first
    assert shared.one(copy.deepcopy(first)) is first
    # equal by == (1.0, True, another key order) yet not the same to a renderer or rule: each its own
    for other in ({"a": [1, 2.0], "b": "x"}, {"a": [True, 2], "b": "x"}, {"b": "x", "a": [1, 2]}):
        assert shared.one(other) is other
    made, again = "".join(["us-east-", "1a"]), "".join(["us-east-", "1a"])
    assert made is not again and shared.one(made) is made and shared.one(again) is made
    assert shared.one(5) == 5 and shared.one(None) is None


def test_the_table_is_bounded_and_starts_over() -> None:
    shared = Shared(limit=3)
    values = [{"n": i} for i in range(10)]
    for v in values:
        assert shared.one(v) is v
    assert len(shared._held) <= 3
    assert shared.one({"n": 9}) is values[9]  # still held: the latest ones
    assert shared.one({"n": 0}) is not values[0]  # let go when the table started over
    names = ["".join(["unit-", str(i)]) for i in range(10)]  # strings: their own table, bounded alike
    for name in names:
        assert shared.one(name) is name
    assert len(shared._strings) <= 3 and shared.one("".join(["unit-", "9"])) is names[9]
    assert shared.one("".join(["unit-", "0"])) is not names[0]


def _hosts(n: int) -> list[HostResult]:
    base = json.loads((FLEET / "a1.json").read_text())
    out = []
    for i in range(n):
        snap = copy.deepcopy(base)
        snap["name"] = f"h{i}"
        snap["host"]["hostname"] = f"ip-10-0-0-{i}"
        out.append(HostResult(HostSpec(snap["name"], snap["target"], dict(snap["labels"])), "ok", None, snap))
    return out


def _run(hosts: list[HostResult]) -> tuple[list[HostRecord], dict[str, Any]]:
    core = Evaluation(EvalPlan(JudgePlan(load_rules(), ()), _no_compare(), "high"), hook=Feed(None))
    for host in hosts:
        core.add(host)
    entries = list(core._records)
    slices = [e.slice for e in entries]
    assert all(s is not None for s in slices)
    if len(slices) > 1 and contentkey.Shared.one is _ONE:  # fleet slices: areas and labels held once too
        assert slices[0]["facts"]["kernel"] is slices[1]["facts"]["kernel"]
        assert slices[0]["labels"] is entries[0].host.snapshot["labels"]
    report = core.finish("2026-12-03T00:00:00Z")
    return entries, json.loads(json.dumps(report_to_dict(report)))


def test_hosts_of_one_configuration_share_what_the_core_keeps_and_the_report_is_unchanged(monkeypatch) -> None:
    entries, doc = _run(_hosts(3))
    one, two = entries[0].host, entries[1].host
    assert one.summary is not None and two.summary is not None
    assert one.summary["cpu"] is two.summary["cpu"] and one.summary["os"] is two.summary["os"]
    assert [id(k) for k in one.summary["unit_restarts"]] == [id(k) for k in two.summary["unit_restarts"]]
    assert one.snapshot is not None and two.snapshot is not None
    assert one.snapshot["labels"] is two.snapshot["labels"] is two.spec.labels  # one dict for both hosts
    assert one.snapshot["probe"] is two.snapshot["probe"]
    assert one.summary["hostname"] != two.summary["hostname"]  # what is a host's own stays its own

    monkeypatch.setattr(contentkey.Shared, "one", lambda self, value: value)  # every host its own copies
    monkeypatch.setattr(contentkey.Shared, "keys", lambda self, value: value)
    alone, unshared = _run(_hosts(3))
    assert alone[0].host.summary["cpu"] is not alone[1].host.summary["cpu"]
    doc["summary"].pop("duration_s", None), unshared["summary"].pop("duration_s", None)
    assert doc == unshared


def test_chains_that_read_the_same_share_their_text_links_and_gaps_and_others_keep_their_own() -> None:
    from auditor.judge.chains import host_chains
    from auditor.models import Finding

    graph = {"a": ("b",), "b": ()}
    findings = [Finding(h, "a", "high", "a fired") for h in ("h1", "h2", "h3")]
    findings += [Finding("h1", "b", "high", "b 3 times"), Finding("h2", "b", "high", "b 3 times"),
                 Finding("h3", "b", "high", "b 4 times")]
    one, two, three = host_chains(findings, graph)
    assert [c["host"] for c in (one, two, three)] == ["h1", "h2", "h3"]
    assert one["links"] is two["links"] and one["text"] is two["text"] and one["gaps"] is two["gaps"]
    assert three["links"] is not one["links"] and three["text"] == "a fired → b 4 times"
    alone = host_chains([f for f in findings if f.host == "h2"], graph)[0]
    assert alone == two  # shared or not, the same chain


def test_report_rows_share_a_rules_tags_and_host_records_have_no_instance_dict() -> None:
    from auditor.models import Finding, Report

    tags = ("cgroups", "memcg")
    report = Report(hosts=[], generated_at="x", findings=[Finding(h, "r", "low", "t", tags=tags) for h in "ab"])
    rows = report_to_dict(report)["findings"]
    assert rows[0]["tags"] == list(tags) and rows[0]["tags"] is rows[1]["tags"]
    spec = HostSpec("h", "ssh://h")
    assert not hasattr(spec, "__dict__") and not hasattr(HostResult(spec), "__dict__")  # slots
