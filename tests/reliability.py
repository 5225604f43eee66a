"""Counters the reliability suites feed, and the summary printed at the end of a test run.

Bad-input, fault-injection and fuzz tests call `record(kind, case, crashed=…, lost=…)`; the summary
counts the kinds and cases that ran, the examples fuzzers drew, crashes (tracebacks or exit 4 where a
clean exit 0/1/2/3 was owed) and results lost (hosts whose outcome is missing from a saved report).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Tally:
    cases: set[str] = field(default_factory=set)
    runs: int = 0
    crashes: int = 0
    lost: int = 0
    failed: int = 0


TALLIES: dict[str, Tally] = defaultdict(Tally)
FUZZ_EXAMPLES: dict[str, int] = defaultdict(int)


def record(kind: str, case: str, crashed: bool = False, lost: int = 0) -> None:
    """One case of `kind` ("bad input", "fault", "fuzz") ran; say whether it crashed or lost results."""
    tally = TALLIES[kind]
    tally.cases.add(case)
    tally.runs += 1
    tally.crashes += int(crashed)
    tally.lost += lost


def fuzz_examples(test: str, n: int = 1) -> None:
    """A fuzz test drew `n` more examples."""
    FUZZ_EXAMPLES[test] += n


def summary_lines(failed_by_kind: dict[str, int]) -> list[str]:
    """The table printed at the end of the suite."""
    lines = []
    for kind in sorted(set(TALLIES) | set(failed_by_kind)):
        t = TALLIES[kind]
        lines.append(f"{kind:<10} {len(t.cases):>4} kinds  {t.runs:>5} runs  crashes {t.crashes}  "
                     f"results lost {t.lost}  failed tests {failed_by_kind.get(kind, 0)}")
    if FUZZ_EXAMPLES:
        lines.append(f"fuzz examples drawn: {sum(FUZZ_EXAMPLES.values())} over {len(FUZZ_EXAMPLES)} fuzz tests")
    return lines
