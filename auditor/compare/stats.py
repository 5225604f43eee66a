"""Association measures for small, lopsided host counts: Cramér's V, Fisher's exact test, information gain."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache


def cramers_v(table: Mapping[str, Mapping[str, int]]) -> float:
    """Bias-corrected Cramér's V (Bergsma 2013) of a group × value count table, in [0, 1].

    The correction keeps small fleets honest: a split of 7 hosts that happens by chance scores lower
    than the plain V would, while a perfect split still scores 1.
    """
    groups = [g for g, row in table.items() if sum(row.values()) > 0]
    values = sorted({v for g in groups for v, n in table[g].items() if n > 0})
    r, k = len(groups), len(values)
    n = sum(sum(table[g].values()) for g in groups)
    if r < 2 or k < 2 or n < 3:
        return 0.0
    row_tot = {g: sum(table[g].values()) for g in groups}
    col_tot = {v: sum(table[g].get(v, 0) for g in groups) for v in values}
    chi2 = 0.0
    for g in groups:
        for v in values:
            expected = row_tot[g] * col_tot[v] / n
            chi2 += (table[g].get(v, 0) - expected) ** 2 / expected
    phi2 = chi2 / n
    phi2c = max(0.0, phi2 - (k - 1) * (r - 1) / (n - 1))
    kc = k - (k - 1) ** 2 / (n - 1)
    rc = r - (r - 1) ** 2 / (n - 1)
    denom = min(kc - 1, rc - 1)
    if denom <= 0:
        return 0.0
    return min(1.0, math.sqrt(phi2c / denom))


def purity(table: Mapping[str, Mapping[str, int]]) -> float:
    """Share of hosts holding their group's most common value (1.0 = every group is uniform)."""
    n = sum(sum(row.values()) for row in table.values())
    if not n:
        return 0.0
    return sum(max(row.values(), default=0) for row in table.values()) / n


def _log_hypergeom(x: int, row1: int, col1: int, n: int) -> float:
    """log P(X = x) for the top-left cell of a 2×2 table with the given margins."""
    return (_log_comb(col1, x) + _log_comb(n - col1, row1 - x)) - _log_comb(n, row1)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


@lru_cache(maxsize=65536)
def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher's exact p-value of [[a, b], [c, d]] (sum of tables no likelier than this one).

    Computed in log space with lgamma, so 50,000 hosts cost O(min margin) float operations.
    """
    row1, col1, n = a + b, a + c, a + b + c + d
    lo, hi = max(0, row1 + col1 - n), min(row1, col1)
    observed = _log_hypergeom(a, row1, col1, n)
    cutoff = observed + 1e-7  # relative tolerance for ties in floating point
    total = 0.0
    for x in range(lo, hi + 1):
        lp = _log_hypergeom(x, row1, col1, n)
        if lp <= cutoff:
            total += math.exp(lp)
    return min(1.0, total)


def _entropy(*counts: int) -> float:
    n = sum(counts)
    return -sum(c / n * math.log2(c / n) for c in counts if c) if n else 0.0


def information_gain(a: int, b: int, c: int, d: int) -> float:
    """Bits of symptom information given by knowing the fact: rows = symptom yes/no, cols = fact yes/no."""
    n = a + b + c + d
    if not n:
        return 0.0
    before = _entropy(a + b, c + d)
    have, lack = a + c, b + d
    after = (have / n) * _entropy(a, c) + (lack / n) * _entropy(b, d)
    return max(0.0, before - after)
