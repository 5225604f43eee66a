""""Could not be evaluated" findings are made once per distinct reason and shared across hosts (a fleet
lacking the CPU window on every host holds one title and one evidence per rule, not one per host), and
every host still gets exactly the finding a fresh judge gives it."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from auditor.judge import engine
from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from tests.unit.test_rules_builtin import recorded


def _lacking(name: str, area: str, error: Any) -> dict[str, Any]:
    snap = recorded("al2023")
    snap["name"] = name
    snap["facts"][area] = None
    if error is not None:
        snap["errors"] = {**(snap.get("errors") or {}), area: error}
    return snap


def _unknowns(findings: list[Any]) -> list[Any]:
    return [f for f in findings if f.evidence.get("status") == "unknown"]


def _fresh(snap: dict[str, Any]) -> list[dict[str, Any]]:
    return [asdict(f) for f in Judge(load_rules()).judge(snap)]


def test_hosts_with_the_same_reason_share_one_title_and_evidence() -> None:
    judge = Judge(load_rules())
    a, b = (judge.judge(_lacking(n, "cpu", "timed out after 5 s")) for n in ("a", "b"))
    ua, ub = _unknowns(a), _unknowns(b)
    assert ua and len(ua) == len(ub)
    for fa, fb in zip(ua, ub):
        assert (fa.host, fb.host) == ("a", "b")
        assert fa.evidence is fb.evidence and fa.title is fb.title
        assert fa.evidence["errors"] == {"cpu": "timed out after 5 s"}


def test_each_host_gets_what_a_fresh_judge_gives() -> None:
    judge = Judge(load_rules())
    hosts = [_lacking("a", "cpu", "timed out"), _lacking("b", "cpu", "permission denied"),
             _lacking("c", "cpu", None), _lacking("d", "cgroups", "timed out"), _lacking("e", "cpu", "timed out")]
    for snap in hosts:
        assert [asdict(f) for f in judge.judge(snap)] == _fresh(snap)
    b_titles = {f.title for f in _unknowns(judge.judge(hosts[1]))}
    assert any("permission denied" in t for t in b_titles)
    assert not any("permission denied" in f.title for f in _unknowns(judge.judge(hosts[0])))


def test_the_memo_is_bounded_and_stays_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_MAX_UNKNOWNS", 3)
    judge = Judge(load_rules())
    for i in range(12):  # a distinct error text per host: nothing to share, nothing may pile up
        snap = _lacking(f"h{i}", "cpu", f"timed out after {i} s")
        assert [asdict(f) for f in judge.judge(snap)] == _fresh(snap)
        assert len(judge._unknowns) <= 3


def test_fleet_rules_share_them_too() -> None:
    judge = Judge(load_rules())
    reads = [judge.fleet_reads(_lacking(n, "hygiene", "timed out")) for n in ("a", "b")]
    unknown = [[r for r in host if r is not None and getattr(r, "evidence", {}).get("status") == "unknown"]
               for host in reads]
    assert unknown[0] and len(unknown[0]) == len(unknown[1])
    for fa, fb in zip(*unknown):
        assert (fa.host, fb.host) == ("a", "b") and fa.evidence is fb.evidence
    fresh = Judge(load_rules()).fleet_reads(_lacking("b", "hygiene", "timed out"))
    assert [asdict(r) if r is not None and hasattr(r, "evidence") else r for r in reads[1]] == \
        [asdict(r) if r is not None and hasattr(r, "evidence") else r for r in fresh]
