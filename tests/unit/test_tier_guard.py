"""The tier guard in tests/conftest.py bites: a test outside tests/unit and tests/system, a unit test asking
for a system fixture, and a unit test module importing the fleet or the AWS stand-ins each fail before
setup; a system test with the same fixtures and imports passes the guard. The hook is called with a stand-in
item (path, nodeid, fixture names), the only parts of a pytest item it reads; a module's imports are read
from its text, here from files written for the test."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest
from tests.paths import TESTS


def _item(path: Path, fixtures: tuple[str, ...] = ()) -> SimpleNamespace:
    return SimpleNamespace(path=path, nodeid=f"{path.relative_to(TESTS.parent)}::test_x", fixturenames=fixtures)


def _guard_says(item: SimpleNamespace) -> str | None:
    try:
        conftest.pytest_runtest_setup(item)  # type: ignore[arg-type]
    except pytest.fail.Exception as exc:
        return str(exc)
    return None


def test_a_test_outside_the_tiers_fails() -> None:
    said = _guard_says(_item(TESTS / "test_somewhere.py"))
    assert said is not None and "belongs in tests/unit or tests/system" in said


@pytest.mark.parametrize("fixture", ["fleet", "browser", "aws", "endpoint", "node_exporter"])
def test_a_unit_test_asking_for_a_system_fixture_fails(fixture: str) -> None:
    said = _guard_says(_item(Path(__file__), ("tmp_path", fixture)))
    assert said is not None and f"may not use {fixture}" in said
    assert _guard_says(_item(TESTS / "system" / "test_x.py", ("tmp_path", fixture))) is None


# spelled in pieces: this module itself must not name them (the guard reads it too)
IMPORTS = ["    from tests." + "ssm_endpoint import AwsStandIns", "import " + "moto",
           "from tests." + "fleet import Fleet"]


@pytest.mark.parametrize("line", IMPORTS)
def test_a_unit_module_importing_the_fleet_or_the_aws_stand_ins_fails(line: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "test_x.py"
    module.write_text(f"def test_x() -> None:\n{line if line.startswith(' ') else '    ' + line}\n")
    named = conftest._system_modules_named(module)
    assert len(named) == 1 and named[0] in line
    for tier in ("unit", "system"):  # the guard, on a module of that tier with this text
        path = TESTS / tier / "test_x.py"
        monkeypatch.setitem(conftest._NAMES_SYSTEM, path, named)
        said = _guard_says(_item(path))
        assert (said is not None and "may not import" in said) if tier == "unit" else said is None, said


def test_a_module_naming_none_of_them_is_clear(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    module.write_text("from tests.paths import DATA\nimport json\n# moto's server: see tests/system\n")
    assert conftest._system_modules_named(module) == []


def test_a_plain_unit_test_passes_the_guard() -> None:
    assert _guard_says(_item(Path(__file__), ("tmp_path", "monkeypatch"))) is None
