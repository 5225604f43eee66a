"""The judge's shortcuts never change a verdict: results cached by the part of each area a rule reads
(judge/shapes.py) and filter verdicts remembered per distinct row (judge/row_verdicts.py) give, host for host,
exactly what evaluating every rule afresh on every host gives — over hosts that differ in the fields the
rules read, in fields they do not read, and in hostile ways (a `true` where a count belongs, `"3"`, `3.0`,
rows that are not objects, missing fields, areas of the wrong type)."""

from __future__ import annotations

import copy
import random
from dataclasses import asdict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from jmespath.visitor import TreeInterpreter

from auditor.judge.engine import Judge
from auditor.judge.functions import OPTIONS
from auditor.judge.plain import PlainJudge
from auditor.judge.row_verdicts import RowVerdictInterpreter, row_fields
from auditor.judge.rules import load_rules
from tests.system.fuzz import fuzz_settings
from tests.unit.test_rules_builtin import recorded

TRICKY_PACK = """\
pack: tricky
rules:
  - id: tricky.count-failed
    title: "{{ evidence.n }} units failed"
    severity: low
    when: "length(facts.systemd.units[?active_state == 'failed']) > `0`"
    evidence: {n: "length(facts.systemd.units[?active_state == 'failed'])"}
  - id: tricky.whole-row
    title: "{{ item.name }} restarted"
    severity: low
    select: "facts.systemd.units[?restarts > `1`]"
  - id: tricky.at
    title: ecs enabled
    severity: low
    select: "facts.systemd.enabled_units[?@ == 'ecs.service']"
  - id: tricky.to-string
    title: "{{ evidence.s }}"
    severity: info
    when: "contains(to_string(facts.binaries[*]), '\\"mtime\\":7')"
    evidence: {s: "to_string(facts.binaries[*].name)"}
  - id: tricky.sort-by
    title: "{{ evidence.first }}"
    severity: info
    when: "facts.systemd.units"
    evidence: {first: "sort_by(facts.systemd.units[?main_pid != `null`], &main_pid)[0].name"}
  - id: tricky.names
    title: "{{ item }}"
    severity: info
    select: "facts.binaries[?found].name"
  - id: tricky.rows-only
    title: "{{ evidence.n }} units"
    severity: info
    select: "facts.systemd.units[*]"
    item: "name"
    evidence: {n: "`1`"}
  - id: tricky.counted-or-empty
    title: "{{ evidence.n }} binaries without a package"
    severity: info
    when: "length(facts.binaries[?found == `true` && package == `null`] || `[]`) > `0`"
    evidence: {n: "length(facts.binaries[?found == `true` && package == `null`] || `[]`)"}
  - id: tricky.one-field
    title: "{{ evidence.n }} units restarted twice"
    severity: info
    when: "length(facts.systemd.units[?restarts == `2`]) > `0`"
    evidence: {n: "length(facts.systemd.units[?restarts == `2`])"}
  - id: tricky.title-reads-row
    title: "{{ item.name }} pid {{ item.main_pid }}"
    severity: info
    select: "facts.systemd.units[?sub_state == 'auto-restart']"
    evidence: {state: item.sub_state}
"""

COUNTS = [0, 1, 2, 3, 5, True, "3", 3.0, None]
STATES = ["active", "failed", "activating"]
SUBS = ["running", "auto-restart", "dead", "exited"]


def _host(rng: random.Random, i: int) -> dict[str, Any]:
    snap = copy.deepcopy(recorded(rng.choice(["fleet-a1", "fleet-b1", "fleet-golden"])))
    snap["name"] = f"h{i}"
    snap["host"]["hostname"] = f"h{i}"
    facts = snap["facts"]
    units = facts["systemd"]["units"]
    for n, unit in enumerate(units):
        unit["main_pid"] = rng.choice([None, rng.randrange(1, 9)])  # read by one rule's evidence and title
        if rng.random() < 0.3:
            unit["restarts"] = rng.choice(COUNTS)
        if rng.random() < 0.2:
            unit["active_state"] = rng.choice(STATES)
        if rng.random() < 0.2:
            unit["sub_state"] = rng.choice(SUBS)
        if rng.random() < 0.03:
            unit.pop("restarts", None)
        if rng.random() < 0.02:
            units[n] = rng.choice(["ecs.service", {}, 7, None])  # a hostile host's row
    if rng.random() < 0.3:
        enabled = facts["systemd"]["enabled_units"]
        facts["systemd"]["enabled_units"] = [u for u in enabled if u != "ecs.service"] if rng.random() < 0.5 \
            else [*enabled, "ecs.service"]
    for b in facts["binaries"]:
        b["mtime"] = rng.randrange(10)  # volatile; read only through to_string(...)
        if rng.random() < 0.3:
            b["package"] = rng.choice([None, "kubelet-deb"])
        if rng.random() < 0.2:
            b["found"] = rng.choice([True, False, 1, "yes"])
        if rng.random() < 0.2:
            b["source_host"] = rng.choice([None, "mirror.example.net", "amazon-eks.s3.amazonaws.com"])
    memory = facts["cgroups"]["memory"]
    memory["dying"] = rng.choice([0, 10, 4000, 60000, True])
    if rng.random() < 0.05:
        facts["binaries"] = {"kubelet": 1}  # the wrong type for the area
    if rng.random() < 0.05:
        facts["systemd"] = None
        snap.setdefault("errors", {})["systemd"] = "timed out"
    return snap


def _twin(rng: random.Random, snap: dict[str, Any], i: int) -> dict[str, Any]:
    twin = copy.deepcopy(snap)
    twin["name"] = f"h{i}-twin"
    facts = twin["facts"]
    for unit in (facts.get("systemd") or {}).get("units") or []:
        if isinstance(unit, dict):
            unit["main_pid"] = rng.choice([None, rng.randrange(1, 9)])
            unit["main_started_s"] = rng.random()
    for b in facts["binaries"] if isinstance(facts["binaries"], list) else []:
        b["mtime"] = rng.randrange(10)
    return twin


def _reference(ruleset: Any, snap: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rule evaluated afresh on this one host, with jmespath's own interpreter."""
    return [asdict(f) for f in PlainJudge(ruleset).judge(snap)]


def test_a_rule_is_keyed_by_the_fields_it_reads_and_not_by_the_others() -> None:
    ruleset = load_rules()
    crash = next(r for r in ruleset.rules if r.id == "systemd.unit-crash-looping")
    fields = dict(dict(crash.shapes)["systemd"][1])["units"][1][1]
    read = {name for name, _ in fields}
    assert {"restarts", "sub_state", "name"} <= read and "main_pid" not in read and "main_started_s" not in read
    origin = next(r for r in ruleset.rules if r.id == "provenance.binary-unknown-origin")
    binary_fields = {name for name, _ in dict(origin.shapes)["binaries"][1][1]}
    assert {"found", "package", "source_url", "sha256"} <= binary_fields and "mtime" not in binary_fields
    # a count of matching rows reads the condition's fields only: a kubelet-present gate is not keyed on mtimes
    gated = next(r for r in ruleset.rules if r.id == "k8s.ip-forward-off")
    assert dict(gated.shapes)["binaries"] == ("rows", ("obj", (("found", None), ("name", None))))
    judge = Judge(ruleset)
    base = recorded("fleet-b1")
    for i in range(20):  # differ only in pids and start times: one evaluation of the crash-loop rule
        s = copy.deepcopy(base)
        s["name"] = f"h{i}"
        for u in s["facts"]["systemd"]["units"]:
            u["main_pid"], u["main_started_s"] = 1000 + i, float(i)
        judge.judge(s)
    once = judge.evaluations
    s = copy.deepcopy(base)
    s["name"] = "h-restarted"
    s["facts"]["systemd"]["units"][0]["restarts"] = 99
    found = {(f.rule, f.item) for f in judge.judge(s)}
    assert judge.evaluations > once  # a counter the rule reads changed: judged again, not served from cache
    assert ("systemd.unit-crash-looping", s["facts"]["systemd"]["units"][0]["name"]) in found


def test_row_fields_follow_only_what_a_filter_reads_of_the_row() -> None:
    import jmespath

    def cond(expr: str) -> Any:
        return jmespath.compile(f"x[?{expr}]").parsed["children"][2]

    assert row_fields(cond("restarts >= `3` || sub_state == 'auto-restart'")) == {"restarts", "sub_state"}
    assert row_fields(cond("stats.wd_expired > `0`")) == {"stats"}
    assert row_fields(cond("glob_any(source_host, `[\"a*\"]`)")) == {"source_host"}
    assert row_fields(cond("@ == 'ecs.service'")) is None  # the whole row
    assert row_fields(cond("length(@) > `1`")) is None


def test_a_rule_that_misses_on_every_host_stops_being_cached_and_still_judges_right() -> None:
    """Past its probation a rule that reads per-host counters (restarts) is run on every host: its cache
    is let go (memory that would grow with the fleet), rules whose cache hits stay cached, verdicts stay."""
    from auditor.judge import engine

    ruleset = load_rules()
    judge = Judge(ruleset)
    base = recorded("fleet-b1")
    hosts = []
    for i in range(engine._PROBATION + 40):
        s = copy.deepcopy(base)
        s["name"] = f"h{i}"
        for n, u in enumerate(s["facts"]["systemd"]["units"]):
            u["restarts"] = i * 7 + n  # every host its own counters, as on a fleet
        hosts.append(s)
    got = [[asdict(f) for f in judge.judge(s)] for s in hosts]
    assert "systemd.unit-crash-looping" in judge.uncached()
    assert "kernel.thp-mode" not in judge.uncached() and "provenance.binary-unknown-origin" not in judge.uncached()
    index = [r.id for r in judge.rules].index("systemd.unit-crash-looping")
    assert not judge._caches[index]  # let go, not kept growing
    for i in (0, engine._PROBATION - 1, engine._PROBATION, len(hosts) - 1):  # before, at and after the switch
        assert got[i] == _reference(ruleset, hosts[i]), hosts[i]["name"]
    assert any(f["rule"] == "systemd.unit-crash-looping" for f in got[-1])  # the rule really fires on them


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, -0.0, 1.0, 2.5]),
                     st.sampled_from(["a", "b", "auto-restart"]))
_ROWS = st.one_of(
    st.fixed_dictionaries({"restarts": _SCALARS, "sub_state": _SCALARS}, optional={"name": _SCALARS}),
    st.fixed_dictionaries({}, optional={"restarts": _SCALARS, "sub_state": _SCALARS}),  # lacking a field
    _SCALARS, st.lists(_SCALARS, max_size=2),  # rows that are no object
    st.fixed_dictionaries({"restarts": st.lists(_SCALARS, max_size=2), "sub_state": st.just({"x": [1]})}),
)
_FILTERS = ("restarts >= `1` || sub_state == 'auto-restart'", "restarts == `1`", "sub_state", "!restarts",
            "@ == `1`", "restarts == `true`")


@fuzz_settings(300)
@given(st.lists(st.lists(_ROWS, max_size=6), min_size=1, max_size=5))
def test_remembered_verdicts_equal_jmespaths_whatever_the_rows(batches: list[list[Any]]) -> None:
    """Rows keyed in C (all objects holding every field read) and row by row (a row lacking a field or no
    object) share one memo: for any mix, in any order, each filter gives what jmespath's own interpreter
    gives (true, 1 and 1.0 told apart; -0.0 and 0.0 too, by their bytes)."""
    import jmespath

    def outcome(interp: TreeInterpreter, parsed: Any, rows: list[Any]) -> Any:
        try:
            return interp.visit(parsed, {"x": rows})
        except TypeError as exc:  # jmespath refuses `"a" >= 1`: the judge names that rule's error
            return ("error", str(exc))

    memo = RowVerdictInterpreter(OPTIONS)
    fresh = TreeInterpreter(OPTIONS)
    for expr in _FILTERS:
        parsed = jmespath.compile(f"x[?{expr}]").parsed
        for rows in batches + batches[::-1]:
            assert repr(outcome(memo, parsed, rows)) == repr(outcome(fresh, parsed, rows)), (expr, rows)
