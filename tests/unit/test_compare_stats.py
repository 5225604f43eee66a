"""Association measures against reference values (scipy.stats.fisher_exact, hand-computed chi²)."""

from __future__ import annotations

import pytest

from auditor.compare.stats import cramers_v, fisher_exact, information_gain, purity


@pytest.mark.parametrize(("table", "p"), [
    ((3, 0, 0, 4), 1 / 35),                     # the fleet: 3 AZ-b hosts vs 4 AZ-a hosts
    ((1, 9, 11, 3), 0.0027594561852200836),     # scipy's documented example
    ((8, 2, 1, 5), 0.03496503496503495),
    ((2, 2, 2, 2), 1.0),
])
def test_fisher_exact_matches_reference_values(table: tuple[int, int, int, int], p: float) -> None:
    assert fisher_exact(*table) == pytest.approx(p, rel=1e-9)


def test_fisher_exact_scales_to_large_fleets() -> None:
    p = fisher_exact(3000, 0, 0, 7000)
    assert 0.0 <= p < 1e-300 or p == 0.0
    assert fisher_exact(3000, 3000, 3500, 3500) > 0.3  # no association


def test_cramers_v_is_one_for_a_perfect_split_and_zero_for_independence() -> None:
    assert cramers_v({"a": {"x": 4}, "b": {"y": 3}}) == pytest.approx(1.0)
    assert cramers_v({"a": {"x": 50, "y": 50}, "b": {"x": 50, "y": 50}}) == 0.0
    assert cramers_v({"a": {"x": 4}}) == 0.0  # one group: nothing to explain
    chance = cramers_v({"a": {"x": 3, "y": 1}, "b": {"x": 1, "y": 2}})
    assert 0.0 <= chance < 0.5  # small-n bias correction keeps a chance pattern low


def test_purity_and_information_gain() -> None:
    assert purity({"a": {"x": 3, "y": 1}, "b": {"y": 4}}) == pytest.approx(7 / 8)
    assert information_gain(3, 0, 0, 4) == pytest.approx(0.9852281, rel=1e-6)  # H(3/7): all of it
    assert information_gain(2, 2, 2, 2) == pytest.approx(0.0)
