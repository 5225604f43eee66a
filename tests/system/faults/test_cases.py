"""FAULT_CASES is what the reliability summary counts: every id has a test, every test's case is listed."""

from __future__ import annotations

import inspect

from tests.system.faults import FAULT_CASES, SSH_CASES, SSM_CASES

from . import test_ssh_faults, test_ssm_faults


def _cases_of(module: object) -> list[str]:
    """The `case` values the module's tests are parametrized with (whatever -k selects)."""
    found = []
    for name, fn in inspect.getmembers(module, inspect.isfunction):
        if name.startswith("test_"):
            for mark in getattr(fn, "pytestmark", []):
                if mark.name == "parametrize" and mark.args[0] == "case":
                    found += list(mark.args[1])
    return found


def test_every_fault_case_has_exactly_one_test() -> None:
    ssh, ssm = _cases_of(test_ssh_faults), _cases_of(test_ssm_faults)
    assert sorted(ssh) == sorted(SSH_CASES) and sorted(ssm) == sorted(SSM_CASES)
    assert len(FAULT_CASES) == len(set(FAULT_CASES)) == 18
