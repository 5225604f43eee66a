"""The HTML report's CPU strips: only the shown (hottest) ones are drawn, and they are exactly the strips
drawing every host and keeping the hottest would give, ties and untrusted values included."""

from __future__ import annotations

import random
from typing import Any

from auditor.render import pictures


def _reference(doc: dict[str, Any]) -> tuple[list[pictures.CpuStrip], int]:
    """Every host drawn, sorted hottest first (then by name, then document order), cut to the limit."""
    strips = [s for h in doc["hosts"] if isinstance(cpu := (h.get("facts_summary") or {}).get("cpu"), dict)
              and (s := pictures.cpu_strip(str(h["name"]), cpu))]
    strips.sort(key=lambda s: (-s.hot_system, s.host))
    return strips[:pictures.MAX_CPU_STRIPS], max(0, len(strips) - pictures.MAX_CPU_STRIPS)


def _host(rng: random.Random, i: int) -> dict[str, Any]:
    cores = [[c, rng.choice([0, 5.5, 99, "x", None, float("nan")]), rng.choice([0, 12, 100, 250, True])]
             for c in range(rng.choice([0, 1, 4]))]
    if rng.random() < 0.1:
        cores.append(["not a core", 1, 2])
    cpu = {"count": len(cores), "cores": cores, "max_core": 0 if cores else None,
           "max_core_system_pct": rng.choice([0, 3.25, 50, 50, 100, 180, "hot", None, float("inf")]),
           "hot_thread": rng.choice([None, {"comm": "kubelet", "tid": 7, "ticks": 90}])}
    summary = rng.choice([{"cpu": cpu}, {"cpu": cpu}, {"cpu": None}, None, {"cpu": "text"}])
    return {"name": rng.choice([f"h{i:03d}", "same-name"]), "facts_summary": summary}


def test_shown_strips_are_the_hottest_of_all_drawn() -> None:
    for seed in range(40):
        rng = random.Random(seed)
        doc = {"hosts": [_host(rng, i) for i in range(rng.choice([0, 5, 30, 200]))]}
        strips, hidden = pictures.cpu_strips(doc)
        want, want_hidden = _reference(doc)
        assert hidden == want_hidden
        assert [(s.host, s.svg, s.caption, s.hot_system) for s in strips] == \
            [(s.host, s.svg, s.caption, s.hot_system) for s in want]


def test_a_big_fleet_draws_only_the_shown_strips(monkeypatch: Any) -> None:
    drawn: list[str] = []
    real = pictures.cpu_strip

    def counting(host: str, cpu: Any) -> Any:
        drawn.append(host)
        return real(host, cpu)

    monkeypatch.setattr(pictures, "cpu_strip", counting)
    doc = {"hosts": [{"name": f"h{i:05d}", "facts_summary": {"cpu": {"cores": [[0, 1, i % 97]], "max_core": 0,
                                                                      "max_core_system_pct": i % 97}}}
                     for i in range(5000)]}
    strips, hidden = pictures.cpu_strips(doc)
    assert len(drawn) == pictures.MAX_CPU_STRIPS == len(strips)
    assert hidden == 5000 - pictures.MAX_CPU_STRIPS
    assert [s.hot_system for s in strips] == [96.0] * pictures.MAX_CPU_STRIPS
    assert [s.host for s in strips] == sorted(s.host for s in strips)
