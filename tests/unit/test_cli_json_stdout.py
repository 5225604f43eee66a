"""JSON written to stdout stays JSON whatever a host name holds: `--json` listings and `history report
--format json` escape unsafe characters as `\\uNNNN` (the same string), never as the terminal's `\\xNN`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.textsafe import UNSAFE
from tests.paths import DATA

SNAPSHOT = DATA / "snapshots" / "fleet-a1.json"
HOSTILE = "evil\x9b\x7f\u202e\x1b[2Jhost"  # 8-bit CSI, DEL, a bidi override, an ESC sequence


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(out, err))
    return code, out.getvalue(), err.getvalue()


def strings(value: object) -> set[str]:
    """Every string in a parsed JSON document."""
    if isinstance(value, str):
        return {value}
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return set().union(*(strings(v) for v in items)) if items else set()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store `analyze` recorded one host with a hostile name into."""
    root = tmp_path_factory.mktemp("hostile-name")
    (root / "d").mkdir()
    doc = json.loads(SNAPSHOT.read_text())
    doc["name"] = HOSTILE
    (root / "d" / "a.json").write_text(json.dumps(doc))
    path = root / "h.sqlite3"
    code, _, err = cli("analyze", str(root / "d"), "--store", str(path), "--quiet", "--jobs", "1")
    assert code in (0, 1), err
    return path


@pytest.mark.parametrize("argv", [
    ("history", "show", "1", "--json"),
    ("history", "show", "latest", "--json"),
    ("history", "list", "--json"),
    ("history", "trend", "facts.kernel.mem_total_kb", "--json"),
    ("history", "report", "--format", "json"),
])
def test_json_on_stdout_parses_and_keeps_a_hostile_host_name(store: Path, argv: tuple[str, ...]) -> None:
    code, out, err = cli(*argv, "--store", str(store))
    assert code == 0, err
    assert not UNSAFE.search(out.replace("\n", "")), "a raw control or bidi character reached the terminal"
    doc = json.loads(out)
    if argv[1] in ("show", "report"):
        assert HOSTILE in strings(doc), "the name must come back exactly, not mangled"


@pytest.mark.parametrize("scan_id", ["99999999999999999999", "0", "-3", "9" * 5000, "1e3"])
def test_a_scan_id_sqlite_cannot_hold_is_bad_input(store: Path, scan_id: str) -> None:
    code, out, err = cli("history", "show", scan_id, "--store", str(store))
    assert code == 2, out + err
    assert "SCAN must be a scan id" in err
