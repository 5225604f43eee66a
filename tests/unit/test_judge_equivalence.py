"""The caching judge (judge/engine.py) gives exactly the plain judge's findings (judge/plain.py), host for
host and in the same order, over a varied fleet: the recorded snapshots (tests/data/snapshots, the
per-OS probe captures, tests/data/compare/fleet) and hosts derived from them that differ in volatile
fields, in fields rules read, in labels, in areas that failed or do not apply. The fleet is long enough
that rules and areas pass their probation (cached, then run per host), so every path of the cache is
compared, and the fleet rules' findings over all hosts are compared too."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import asdict
from typing import Any

import pytest

from auditor.judge import engine
from auditor.judge.engine import Judge
from auditor.judge.plain import PlainJudge
from auditor.judge.rules import load_rules
from tests.paths import DATA
from tests.unit.test_rules_builtin import recorded

RECORDED = ("fleet-golden", "fleet-a1", "fleet-b1", "al2", "al2023", "ubuntu2004-dlami")


def _bases() -> list[dict[str, Any]]:
    bases = [recorded(name) for name in RECORDED]
    bases += [json.loads(p.read_text()) for p in sorted((DATA / "compare" / "fleet").glob("*.json"))]
    return bases


def _variant(rng: random.Random, base: dict[str, Any], i: int) -> dict[str, Any]:
    snap = copy.deepcopy(base)
    snap["name"] = f"h{i:04d}"
    facts = snap["facts"]
    host = snap.setdefault("host", {})
    host["hostname"], host["boot_id"], host["uptime_s"] = f"ip-{i}", f"{i:032x}", float(i)
    for n, unit in enumerate((facts.get("systemd") or {}).get("units") or []):
        unit["main_pid"] = 100 + i + n  # per host: no rule reads it
        if rng.random() < 0.5:
            unit["restarts"] = rng.choice([0, 1, 3, i])  # per host on some: the crash-loop rule comes off cache
        if rng.random() < 0.02:
            unit["sub_state"] = "auto-restart"
    for b in facts.get("binaries") or []:
        b["mtime"] = i  # volatile
    if rng.random() < 0.1 and isinstance(facts.get("kernel"), dict):
        facts["kernel"]["thp_enabled"] = rng.choice(["always", "madvise", "never"])
    if rng.random() < 0.1:
        snap["labels"] = {**(snap.get("labels") or {}), "az": rng.choice(["us-east-1a", "us-east-1b", "us-east-1c"])}
    if rng.random() < 0.05:
        area = rng.choice(sorted(facts))
        facts[area] = None
        snap.setdefault("errors", {})[area] = rng.choice(["timed out", "exit 1", f"host {i} said no"])
    if rng.random() < 0.03:
        snap["not_applicable"] = {"cpu": "an image has no running CPU", "proc": "no processes in an image"}
    if rng.random() < 0.03 and isinstance(facts.get("config"), dict):
        facts["config"] = {**facts["config"], "unexpected": [i]}  # a host with more than the schema says
    return snap


def _fleet(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    bases = _bases()
    return [_variant(rng, bases[i % len(bases)], i) for i in range(count)]


def test_the_caching_judge_gives_the_plain_judges_findings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_PROBATION", 64)  # the same switch, reached on a shorter fleet
    ruleset = load_rules()
    hosts = _fleet(engine._PROBATION + 100, seed=36)
    caching, plain = Judge(ruleset), PlainJudge(ruleset)
    for snap in hosts:
        assert [asdict(f) for f in caching.judge(snap)] == [asdict(f) for f in plain.judge(snap)], snap["name"]
    assert caching.judge_fleet(hosts) == plain.judge_fleet(hosts)
    # the caches were used (else this proves nothing): far fewer runs, some rules came off probation
    assert caching.evaluations < plain.evaluations / 3
    assert "systemd.unit-crash-looping" in caching.uncached()
    scopes = {sc.path: sc for sc in caching._keys.scopes}
    assert any(sc.hits for sc in scopes.values() if len(sc.path) == 1)  # parts known by a whole area seen before
    # an area that differs on every host, digested field by field, its repeating fields known by their digest
    assert any(sc.hits and not scopes[sc.path[:1]].repeats for sc in scopes.values() if len(sc.path) == 2)
    # the findings vary (a fleet of identical verdicts would prove little)
    assert len({repr(sorted((f.rule, f.item) for f in plain.judge(s))) for s in hosts[:60]}) > 20


def test_rules_reading_the_same_parts_share_one_key() -> None:
    judge = Judge(load_rules())
    keys = judge._keys
    assert len(set(keys.of_rule)) < len(keys.of_rule)  # some rules read the same parts of a host
    host = keys.for_host(recorded("fleet-a1"))
    first, second = _two_sharing(keys.of_rule)
    assert host.key(first) is host.key(second)  # made once for the host, not once per rule


def _two_sharing(of_rule: list[int]) -> tuple[int, int]:
    seen: dict[int, int] = {}
    for index, key in enumerate(of_rule):
        if key in seen:
            return seen[key], index
        seen[key] = index
    raise AssertionError("no two rules share a key")
