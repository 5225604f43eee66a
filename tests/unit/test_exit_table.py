"""The exit-code table (exitcodes.decide), every combination of outcomes, written out as the README states
the contract: 0 clean, 1 findings, 2 bad input, 3 incomplete, 4 internal error; a crash beats everything,
bad input beats a run's results, unsaved results beat findings, findings beat unreached hosts."""

from __future__ import annotations

import itertools
from dataclasses import fields

import pytest

from auditor import exitcodes
from auditor.exitcodes import Outcome, decide

# crashed bad_input not_saved findings incomplete -> code, one row per combination (32)
TABLE = """
0 0 0 0 0 0
0 0 0 0 1 3
0 0 0 1 0 1
0 0 0 1 1 1
0 0 1 0 0 3
0 0 1 0 1 3
0 0 1 1 0 3
0 0 1 1 1 3
0 1 0 0 0 2
0 1 0 0 1 2
0 1 0 1 0 2
0 1 0 1 1 2
0 1 1 0 0 2
0 1 1 0 1 2
0 1 1 1 0 2
0 1 1 1 1 2
1 0 0 0 0 4
1 0 0 0 1 4
1 0 0 1 0 4
1 0 0 1 1 4
1 0 1 0 0 4
1 0 1 0 1 4
1 0 1 1 0 4
1 0 1 1 1 4
1 1 0 0 0 4
1 1 0 0 1 4
1 1 0 1 0 4
1 1 0 1 1 4
1 1 1 0 0 4
1 1 1 0 1 4
1 1 1 1 0 4
1 1 1 1 1 4
"""
ROWS = [tuple(int(x) for x in line.split()) for line in TABLE.strip().splitlines()]
NAMES = [f.name for f in fields(Outcome)]


def test_the_table_covers_every_combination_once() -> None:
    assert NAMES == ["crashed", "bad_input", "not_saved", "findings", "incomplete"]
    assert sorted(row[:-1] for row in ROWS) == list(itertools.product((0, 1), repeat=len(NAMES)))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: "".join(map(str, r[:-1])))
def test_decide(row: tuple[int, ...]) -> None:
    outcome = Outcome(**{name: bool(flag) for name, flag in zip(NAMES, row[:-1])})
    assert decide(outcome) == row[-1]


def test_codes_are_the_documented_numbers() -> None:
    assert (exitcodes.OK, exitcodes.FINDINGS, exitcodes.BAD_INPUT, exitcodes.INCOMPLETE, exitcodes.INTERNAL) == (
        0, 1, 2, 3, 4)
