"""Exit codes (README documents them), and `decide`, the one place a run's outcome becomes one of them."""

from __future__ import annotations

from dataclasses import dataclass, fields

OK = 0
FINDINGS = 1  # findings or drift at or above --fail-on (`diff`: the sides differ)
BAD_INPUT = 2  # bad usage or a bad input file, found before any host is contacted; nothing written
INCOMPLETE = 3  # hosts not reached or partly collected, the run not recorded, or its results not saved
INTERNAL = 4  # an unexpected exception (a bug): one line on stderr, the traceback with --debug


@dataclass(frozen=True)
class Outcome:
    """What went wrong in a run, each independently; `decide` picks the code."""

    crashed: bool = False  # an unexpected exception
    bad_input: bool = False  # usage, a rule, waiver, baseline or snapshot file refused
    not_saved: bool = False  # the reports or snapshots could not be written (a full or read-only disk)
    findings: bool = False  # findings or drift at or above --fail-on; for `diff`, a difference
    incomplete: bool = False  # a host not reached or partly collected, or the store did not take the run


# First true row wins. Findings beat unreached hosts (a found problem is the stronger signal for a CI
# gate), but results that were not saved beat findings: the gate must not pass over a report nobody has.
PRECEDENCE: tuple[tuple[str, int], ...] = (
    ("crashed", INTERNAL),
    ("bad_input", BAD_INPUT),
    ("not_saved", INCOMPLETE),
    ("findings", FINDINGS),
    ("incomplete", INCOMPLETE),
)
assert [name for name, _ in PRECEDENCE] == [f.name for f in fields(Outcome)]


def decide(outcome: Outcome) -> int:
    """The exit code of a run's outcome (PRECEDENCE: the first that holds), OK when none does."""
    for name, code in PRECEDENCE:
        if getattr(outcome, name):
            return code
    return OK
