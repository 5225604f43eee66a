"""The SQLite history store: packing, recording, first-seen times, trend facts, import, a damaged store."""

from __future__ import annotations

import copy
import io
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.history import pack, trends
from auditor.history.db import SCHEMA_VERSION, open_store
from auditor.history.folder import save_scan
from auditor.judge.engine import Judge
from auditor.judge.params import parse_set
from auditor.judge.rules import load_rules
from tests.fleet import memcg
from tests.paths import DATA, ROOT

B1 = json.loads((DATA / "snapshots" / "fleet-b1.json").read_text())
REPORT = next((DATA / "reports").glob("*.json"))


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(out, err))
    return code, out.getvalue() + err.getvalue()


def scan(store: Path, *extra: str) -> tuple[int, str]:
    return cli("scan", "local", "--binary", "sh", "--store", str(store), *extra)


def test_pack_round_trips_and_shares_the_body_of_hosts_that_differ_only_in_volatile_facts() -> None:
    body, volatile = pack.split(B1)
    _, raw = pack.digest(body)  # stored canonical (sorted keys): values must come back in place
    assert pack.join(pack.decompress(pack.compress_raw(raw)), pack.decompress(pack.compress(volatile))) == B1
    other = copy.deepcopy(B1)
    other.update(name="b9", collected_at="2026-12-01T00:00:00Z")
    other["host"]["uptime_s"] = 1.5
    other["host"]["hostname"] = "b9"
    unit = next(u for u in other["facts"]["systemd"]["units"] if u["name"] == "ecs.service")
    unit["restarts"] = (unit["restarts"] or 0) + 40
    other["facts"]["trends"] = trends.empty()  # derived, never stored
    assert pack.digest(pack.split(other)[0])[0] == pack.digest(body)[0]
    other["facts"]["kernel"]["release"] = "6.1.0-99"  # configuration: a new body
    assert pack.digest(pack.split(other)[0])[0] != pack.digest(body)[0]


@pytest.mark.parametrize("name", ["fleet-b1", "fleet-golden", "al2", "al2023", "ubuntu2004-dlami"])
def test_stored_bodies_keep_their_digest_across_the_switch_to_orjson(name: str) -> None:
    """The canonical JSON a body is hashed by is byte for byte what json.dumps gave (stores written before
    keep sharing bodies with new scans); what orjson cannot write (an integer past 64 bits) still packs."""
    from tests.unit.test_rules_builtin import recorded

    snap = recorded(name)
    body, volatile = pack.split(snap)
    for part in (body, volatile):
        stdlib = json.dumps(part, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        assert pack._canonical(part) == stdlib
    snap["facts"]["kernel"]["huge"] = 10**30
    body = pack.split(snap)[0]
    assert pack.decompress(pack.compress_raw(pack.digest(body)[1]))["facts"]["kernel"]["huge"] == 10**30


def _later(snap: dict[str, Any], minutes: float, restarts: dict[str, int], states: dict[str, str],
           dying: int | None = None) -> dict[str, Any]:
    out = copy.deepcopy(snap)
    out["collected_at"] = f"2026-11-29T{17 + int(minutes // 60):02d}:{int(minutes % 60):02d}:38Z"
    for unit in out["facts"]["systemd"]["units"]:
        if unit["name"] in restarts:
            unit["restarts"] = restarts[unit["name"]]
        if unit["name"] in states:
            unit["active_state"] = states[unit["name"]]
    if dying is not None:
        out["facts"]["cgroups"]["memory"]["dying"] = dying
    return out


def _judge(snap: dict[str, Any], *sets: str) -> list[Any]:
    ruleset = load_rules([], builtin=True, overrides=[parse_set(s) for s in sets])
    return [f for f in Judge(ruleset).judge(snap) if f.rule.startswith("trends.")]


def test_trend_rules_judge_crash_loops_flapping_and_dying_growth_between_two_snapshots() -> None:
    first = _later(B1, 0, {"ecs.service": 10, "ssh.service": 0}, {"ecs.service": "activating", "ssh.service": "active"},
                   dying=100)
    second = _later(B1, 30, {"ecs.service": 52, "ssh.service": 4}, {"ecs.service": "activating",
                                                                      "ssh.service": "active"}, dying=400)
    trends.attach(second, trends.derive(second, first, 7, 2))
    found = {(f.rule, f.item): f for f in _judge(second)}
    loop = found[("trends.unit-crash-loop-between-scans", "ecs.service")]
    assert loop.evidence["restarts_delta"] == 42 and loop.evidence["restarts_per_hour"] == 84.0
    assert loop.evidence["previous_scan"] == 7
    flap = found[("trends.unit-flapping", "ssh.service")]  # active at both scans, 4 restarts in between
    assert flap.evidence["restarts_delta"] == 4
    growth = found[("trends.dying-memcg-growth", None)]
    assert growth.evidence["per_hour"] == 600.0 and growth.evidence["delta"] == 300
    # --set tunes them like any pack
    tuned = {(f.rule, f.item) for f in _judge(second, "trends.min_restarts_delta=50",
                                              "trends.dying_growth_per_hour=700")}
    assert ("trends.unit-crash-loop-between-scans", "ecs.service") not in tuned
    assert ("trends.dying-memcg-growth", None) not in tuned
    # a host's first scan: trends present but empty, so nothing fires and nothing is "could not be evaluated"
    alone = _later(B1, 0, {}, {})
    trends.attach(alone, trends.empty())
    assert _judge(alone) == []


def test_a_reboot_between_scans_counts_restarts_since_boot() -> None:
    first = _later(B1, 0, {"ecs.service": 90}, {})
    second = _later(B1, 10, {"ecs.service": 5}, {})
    second["host"]["boot_id"] = "another-boot"
    unit = next(u for u in trends.derive(second, first, 1, 2)["units"] if u["name"] == "ecs.service")
    assert unit["restarts_delta"] == 5


def test_rules_list_shows_the_trend_rules_and_the_old_python_rule_is_gone() -> None:
    code, text = cli("rules", "list", "--json")
    assert code == 0
    ids = {r["id"] for r in json.loads(text)["rules"]} if text.lstrip().startswith("{") else set()
    ids = ids or {r["id"] for r in json.loads(text)}
    assert {"trends.unit-crash-loop-between-scans", "trends.unit-flapping", "trends.dying-memcg-growth"} <= ids
    assert "history.dying-memcg-growth" not in ids


def test_scans_are_recorded_in_order_with_stable_first_seen_times(tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite3"
    assert scan(store, "--format", "json", "--out", str(tmp_path / "r1"))[0] in (0, 1)
    code, terminal = scan(store, "--format", "json,md,html", "--out", str(tmp_path / "r2"))
    assert code in (0, 1)
    one = json.loads((tmp_path / "r1" / "report.json").read_text())
    two = json.loads((tmp_path / "r2" / "report.json").read_text())
    assert one["history"]["scan_id"] == 1 and two["history"]["scan_id"] == 2
    assert one["history"]["new_hosts"] == ["local"] and two["history"]["new_hosts"] == []
    assert two["history"]["previous_scan_id"] == 1
    first = {(f["rule"], f["item"]): f["first_seen"] for f in one["findings"]}
    assert first and all(v == one["generated_at"] for v in first.values())
    for f in two["findings"]:  # the same findings keep the first scan's time
        if (f["rule"], f["item"]) in first:
            assert f["first_seen"] == first[(f["rule"], f["item"])]
    since = f"since {one['generated_at']}"  # shown in the terminal, Markdown and HTML
    assert f"({since})" in terminal and f"({since})" in (tmp_path / "r2" / "report.md").read_text()
    assert f'<span class="small since">{since}</span>' in (tmp_path / "r2" / "report.html").read_text()
    code, text = cli("history", "list", "--store", str(store), "--json")
    assert code == 0
    scans = json.loads(text)["scans"]
    assert [s["id"] for s in scans] == [1, 2] and {s["state"] for s in scans} == {"complete"}
    code, text = cli("history", "show", "latest", "--store", str(store))
    assert code == 0 and text.startswith("scan 2: complete") and " since " in text
    code, text = cli("history", "trend", "facts.kernel.mem_total_kb", "--store", str(store), "--json")
    assert code == 0 and len(json.loads(text)["series"]["local"]) == 2
    code, text = cli("history", "trend", "facts.kernel.mem_total_kb", "--store", str(store))
    assert code == 0 and "over 2 scans" in text and "▁▁" in text
    code, text = cli("scan", "local", "--binary", "sh", "--store", str(store), "--no-store")
    assert len(json.loads(cli("history", "list", "--store", str(store), "--json")[1])["scans"]) == 2


def test_no_store_writes_nothing_in_the_data_directory(tmp_path: Path) -> None:
    assert scan(tmp_path / "unused.sqlite3", "--no-store")[0] in (0, 1)
    assert not (tmp_path / "unused.sqlite3").exists()
    assert cli("scan", "local", "--binary", "sh", "--no-store")[0] in (0, 1)
    assert not list(Path(os.environ["XDG_DATA_HOME"]).iterdir())


@pytest.mark.parametrize("damage", ["garbage", "truncated", "newer-schema", "foreign-db"])
def test_a_damaged_store_is_bad_input_naming_the_file(tmp_path: Path, damage: str) -> None:
    store = tmp_path / "h.sqlite3"
    if damage == "garbage":
        store.write_bytes(b"\x00\xffnot sqlite at all" * 100)
    elif damage == "foreign-db":
        with sqlite3.connect(store) as conn:
            conn.execute("CREATE TABLE t (x)")
        conn.close()
    else:
        scan(store)
        if damage == "newer-schema":
            with sqlite3.connect(store) as conn:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
            conn.close()
        else:
            data = store.read_bytes()
            for suffix in ("-wal", "-shm"):
                Path(str(store) + suffix).unlink(missing_ok=True)
            store.write_bytes(data[: len(data) // 2] + b"\x13" * 4096 + data[len(data) // 2 + 4096:])
    for argv in (("scan", "local", "--binary", "sh", "--store", str(store), "--out", str(tmp_path / "out")),
                 ("history", "list", "--store", str(store))):
        code, text = cli(*argv)
        assert code == 2, text
        assert str(store) in text and "Traceback" not in text
    assert not (tmp_path / "out").exists()


def test_history_import_records_a_json_folder_once(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    doc = json.loads(REPORT.read_text())
    save_scan(folder, {**doc, "generated_at": "2026-11-01T00:00:00Z"})
    save_scan(folder, {**doc, "generated_at": "2026-11-01T00:00:00Z"})  # same second: -2 sorts after
    save_scan(folder, {**doc, "generated_at": "2026-11-02T00:00:00Z"})
    store = tmp_path / "h.sqlite3"
    code, text = cli("history", "import", str(folder), "--store", str(store), "--json")
    assert code == 0 and len(json.loads(text)["imported"]) == 3
    code, text = cli("history", "import", str(folder), "--store", str(store), "--json")
    assert json.loads(text)["imported"] == [] and len(json.loads(text)["skipped"]) == 3
    scans = json.loads(cli("history", "list", "--store", str(store), "--json")[1])["scans"]
    assert [s["source"] for s in scans] == ["scan-20261101T000000Z.json", "scan-20261101T000000Z-2.json",
                                            "scan-20261102T000000Z.json"]
    conn = open_store(store, create=False)
    try:
        assert conn.execute("SELECT count(*) FROM findings").fetchone()[0] == 3 * len(doc["findings"])
    finally:
        conn.close()


@pytest.mark.kernel
def test_real_dying_memcg_growth_between_scans_is_judged_by_the_trend_rule(tmp_path: Path) -> None:
    reason = memcg.available()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    store = tmp_path / "h.sqlite3"
    memcg.settle()
    scan(store, "--format", "json", "--out", str(tmp_path / "r1"))
    first = json.loads((tmp_path / "r1" / "report.json").read_text())
    assert not [f for f in first["findings"] if f["rule"] == "trends.dying-memcg-growth"]
    with memcg.DyingMemcgs() as batch:
        assert batch.make(1500) >= 1450
        scan(store, "--format", "json", "--out", str(tmp_path / "r2"))
    second = json.loads((tmp_path / "r2" / "report.json").read_text())
    growth = [f for f in second["findings"] if f["rule"] == "trends.dying-memcg-growth"]
    assert len(growth) == 1 and growth[0]["host"] == "local" and growth[0]["severity"] == "high"
    assert growth[0]["evidence"]["delta"] >= 1400
    assert second["summary"]["exit_code"] == 1  # a high finding fails the default --fail-on high


def test_a_process_that_dies_inside_the_write_transaction_leaves_earlier_scans_intact(tmp_path: Path) -> None:
    """Death between the scan's inserts and its COMMIT (os._exit: no cleanup, like SIGKILL) in a real process."""
    import subprocess
    import sys

    store = tmp_path / "h.sqlite3"
    assert scan(store)[0] in (0, 1)
    script = f"""
import json, os, sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from auditor.history import record
from auditor.history.db import open_store
from auditor.history.feed import pending_of
conn = open_store(Path({str(store)!r}))
scan_id = record.begin_scan(conn, "2026-12-01T00:00:00Z")
doc = json.loads(Path({str(REPORT)!r}).read_text())
snap = json.loads(Path({str(DATA / "snapshots" / "fleet-b1.json")!r}).read_text())
def die(*args, **kwargs):
    os._exit(9)  # rows of this scan are written, the transaction is not committed
record._update_issues = die
record.record_scan(conn, scan_id, doc, pending_of({{"b1": snap}}), "2026-12-01T00:00:01Z")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 9, done.stderr
    conn = open_store(store, create=False)  # opens cleanly; marks the dead scan
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert list(conn.execute("SELECT id, state FROM scans ORDER BY id")) == [(1, "complete"), (2, "interrupted")]
        assert conn.execute("SELECT count(*) FROM scan_hosts WHERE scan_id = 2").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM findings WHERE scan_id = 2").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM scan_hosts WHERE scan_id = 1").fetchone()[0] == 1
    finally:
        conn.close()
