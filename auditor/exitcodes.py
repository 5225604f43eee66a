"""Exit codes (README documents them). Precedence when several apply: 2 > 1 > 3 > 0; 4 is a crash."""

from __future__ import annotations

OK = 0
FINDINGS = 1  # findings at or above --fail-on
BAD_INPUT = 2  # bad usage or bad input file; nothing written
# some hosts not reached (unreachable, auth, host key, timeout, error) or only partly collected; or the
# results not saved: a full, read-only or refusing disk under --out/-o (errors.OutputError; the previous
# report or snapshot set is left unchanged) — the environment failed, not the program; this one beats 1
INCOMPLETE = 3
INTERNAL = 4  # an unexpected exception (a bug): one line on stderr, the traceback with --debug


def combine(findings_failed: bool, incomplete: bool) -> int:
    """Findings beat incompleteness: a found problem is the stronger signal for a CI gate."""
    if findings_failed:
        return FINDINGS
    if incomplete:
        return INCOMPLETE
    return OK
