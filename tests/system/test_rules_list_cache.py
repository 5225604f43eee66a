"""`rules list` caches its validated listing (judge/listcache.py): a hit prints the same bytes without loading
YAML, JMESPath or jinja2; any change to a pack, an override or the code is a miss; a malformed pack is refused
(exit 2, file and line) on every run; a hostile cache file is ignored and replaced, never trusted or crashed on.
Every test has its own XDG_CACHE_HOME (conftest.py)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.judge import listcache
from auditor.options import RuleOptions
from tests.unit.test_startup import HEAVY, PROBE, ROOT

PACK = """pack: mine
params: {limit: 3}
rules:
  - id: mine.too-many-restarts
    title: "{{ item.name }} restarted {{ item.restarts }} times"
    severity: medium
    select: "facts.systemd.units[?restarts > ${limit}]"
"""
BROKEN_TITLE = PACK.replace("restarted {{ item.restarts }}", "restarted {{ item.restarts ")  # line 5


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def process(*argv: str) -> tuple[int, set[str]]:
    """A whole `ami-auditor ARGV` process: its exit code and the heavy libraries it loaded."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result["code"], {m.split(".")[0] for m in result["loaded"]} & set(HEAVY)


def entries() -> list[Path]:
    folder = listcache.cache_dir()
    assert folder is not None
    return sorted(folder.glob("rules-list-*.json")) if folder.is_dir() else []


def entry_for(*rule_paths: str) -> Path:
    key = listcache.listing_key(RuleOptions(rule_paths=rule_paths))
    assert key is not None
    path = listcache._entry_path(key)
    assert path is not None
    return path


@pytest.fixture
def pack_dir(tmp_path: Path) -> Path:
    d = tmp_path / "packs"
    d.mkdir()
    (d / "mine.yaml").write_text(PACK)
    return d


def uncached(*argv: str) -> tuple[int, str, str]:
    """`run` with no cache: XDG_CACHE_HOME is a file, so every run validates and nothing is written."""
    saved = os.environ["XDG_CACHE_HOME"]
    os.environ["XDG_CACHE_HOME"] = os.devnull
    try:
        return run(*argv)
    finally:
        os.environ["XDG_CACHE_HOME"] = saved


def test_a_hit_prints_the_same_bytes_without_the_rule_libraries(pack_dir: Path) -> None:
    for argv in (["rules", "list"], ["rules", "list", "--rules", str(pack_dir)]):
        assert process(*argv, "--json") == (0, {"yaml", "jmespath", "jinja2"})  # validated
        assert process(*argv) == (0, set())  # cached: one listing serves the text and the JSON form
        for form in ([], ["--json"]):
            assert run(*argv, *form) == uncached(*argv, *form)
    rows = json.loads(run("rules", "list", "--json", "--rules", str(pack_dir))[1])
    assert rows[-1]["id"] == "mine.too-many-restarts" and rows[-1]["source"] == f"{pack_dir / 'mine.yaml'}:4"
    folder = listcache.cache_dir()
    assert folder is not None and folder.stat().st_mode & 0o777 == 0o700
    assert all(e.stat().st_mode & 0o777 == 0o600 for e in entries())


def test_an_edited_pack_is_a_miss_and_lists_the_edit(pack_dir: Path) -> None:
    argv = ("rules", "list", "--rules", str(pack_dir))
    run(*argv)
    assert process(*argv) == (0, set())
    (pack_dir / "mine.yaml").write_text(PACK.replace("severity: medium", "severity: high"))
    assert process(*argv) == (0, {"yaml", "jmespath", "jinja2"})
    assert re.search(r"^mine\.too-many-restarts +high ", run(*argv)[1], re.M)
    (pack_dir / "other.yaml").write_text(PACK.replace("pack: mine", "pack: other").replace("mine.", "other."))
    assert "other.too-many-restarts" in run(*argv)[1]  # a new file in --rules DIR too


def test_overrides_are_part_of_the_key_and_still_validated(pack_dir: Path, tmp_path: Path) -> None:
    argv = ("rules", "list", "--rules", str(pack_dir))
    run(*argv)
    assert process(*argv, "--set", "mine.limit=5") == (0, {"yaml", "jmespath", "jinja2"})
    assert process(*argv, "--set", "mine.limit=5") == (0, set())
    code, _, err = run(*argv, "--set", "mine.nope=5")  # the packs are cached; the bad override still fails
    assert code == 2 and "pack 'mine' has no parameter 'nope'" in err
    assert run(*argv, "--set", "mine.nope=5")[0] == 2
    config = tmp_path / "params.yaml"
    config.write_text("mine: {limit: 7}\n")
    assert process(*argv, "--rules-config", str(config)) == (0, {"yaml", "jmespath", "jinja2"})
    assert process(*argv, "--rules-config", str(config)) == (0, set())
    config.write_text("mine:\n  limit: seven\n")  # edited config: a miss, and refused at its line
    code, _, err = run(*argv, "--rules-config", str(config))
    assert code == 2 and f"{config}:2" in err


def test_a_malformed_pack_exits_2_naming_file_and_line_cold_and_warm(pack_dir: Path) -> None:
    argv = ("rules", "list", "--rules", str(pack_dir))
    good = run(*argv)
    assert good[0] == 0 and entries()
    (pack_dir / "mine.yaml").write_text(BROKEN_TITLE)
    before = entries()
    for _ in range(2):
        code, out, err = run(*argv)
        assert code == 2 and out == "" and f"{pack_dir / 'mine.yaml'}:5" in err
        assert process(*argv)[0] == 2
    assert entries() == before  # nothing cached for the broken pack
    (pack_dir / "mine.yaml").write_text(PACK)  # fixed back: the earlier entry serves again
    assert run(*argv) == good and process(*argv) == (0, set())


HOSTILE: dict[str, bytes] = {
    "garbage": b"\x00\xff not json at all",
    "empty": b"",
    "not utf-8": b'{"schema": "\xff"}',
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "huge": b'{"pad": "' + b"x" * (listcache.MAX_ENTRY_BYTES + 10) + b'"}',
    "a list": b"[]",
    "extra key": b'{"schema": "ami-auditor/rules-list-cache/1", "key": "K", "packs": 1, "rows": [], "x": 1}',
    "wrong key": b'{"schema": "ami-auditor/rules-list-cache/1", "key": "0", "packs": 1, "rows": []}',
    "packs a bool": b'{"schema": "ami-auditor/rules-list-cache/1", "key": "K", "packs": true, "rows": []}',
    "packs huge": b'{"schema": "ami-auditor/rules-list-cache/1", "key": "K", "packs": 1e400, "rows": []}',
    "rows a dict": b'{"schema": "ami-auditor/rules-list-cache/1", "key": "K", "packs": 1, "rows": {}}',
    "row of wrong types": b'{"schema": "ami-auditor/rules-list-cache/1", "key": "K", "packs": 1, "rows": [{"id": 1, '
                          b'"severity": [], "pack": null, "title": {}, "tags": "x", "reads": [2], "source": 3}]}',
    "row missing keys": b'{"schema": "ami-auditor/rules-list-cache/1", "key": "K", "packs": 1, "rows": [{"id": "a"}]}',
    "tags not strings": b'{"schema": "ami-auditor/rules-list-cache/1", "key": "K", "packs": 1, "rows": [{"id": "a", '
                        b'"severity": "low", "pack": "p", "title": "t", "tags": [1], "reads": [], "source": "s"}]}',
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_cache_file_is_ignored_and_replaced(kind: str) -> None:
    reference = run("rules", "list", "--json")
    path = entry_for()
    path.write_bytes(HOSTILE[kind].replace(b'"K"', json.dumps(path.stem.removeprefix("rules-list-")).encode()))
    assert run("rules", "list", "--json") == reference
    assert json.loads(path.read_text())["rows"] == json.loads(reference[1])  # rewritten by the validated run


def test_a_cache_file_others_could_write_is_not_trusted() -> None:
    reference = run("rules", "list")
    path = entry_for()
    doc = json.loads(path.read_text())
    doc["rows"][0]["title"] = "forged"
    path.write_text(json.dumps(doc))
    path.chmod(0o622)  # group- and world-writable
    assert run("rules", "list") == reference
    path.write_text(json.dumps(doc))
    path.chmod(0o600)  # the same bytes, written by us: a hit (the user's own cache is trusted)
    assert "forged" in run("rules", "list")[1]


@pytest.mark.parametrize("kind", ["symlink to /dev/zero", "symlink loop", "fifo", "directory", "dangling symlink"])
def test_a_cache_entry_that_is_not_a_regular_file_is_ignored(kind: str, tmp_path: Path) -> None:
    reference = run("rules", "list")
    path = entry_for()
    path.unlink()
    if kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "symlink loop":
        path.symlink_to(path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to(tmp_path / "missing")
    assert run("rules", "list") == reference
    assert run("rules", "list") == reference
    if kind != "directory":  # replaced by a real entry (the rename replaces the link itself, not its target)
        assert path.is_file() and not path.is_symlink() and json.loads(path.read_text())["packs"] > 0


def test_an_unusable_cache_directory_only_skips_caching(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = run("rules", "list")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # mkdir fails: no cache, same output, every run validates
    assert run("rules", "list") == reference
    assert process("rules", "list") == (0, {"yaml", "jmespath", "jinja2"})
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored (XDG spec): ~/.cache is used
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert run("rules", "list") == reference
    assert list((tmp_path / "home" / ".cache" / "ami-auditor").glob("rules-list-*.json"))
    assert not Path("relative").exists()


def test_old_entries_are_pruned(pack_dir: Path) -> None:
    for i in range(listcache.KEEP + 5):
        (pack_dir / "mine.yaml").write_text(PACK.replace("limit: 3", f"limit: {i}"))
        assert run("rules", "list", "--rules", str(pack_dir))[0] == 0
    assert len(entries()) == listcache.KEEP


def test_another_python_or_library_install_is_another_key(monkeypatch: pytest.MonkeyPatch) -> None:
    key = listcache.listing_key(RuleOptions())
    assert key is not None and listcache.listing_key(RuleOptions()) == key
    monkeypatch.setattr(listcache.sys, "version", "3.99.0 (other build)")
    assert listcache.listing_key(RuleOptions()) != key
    monkeypatch.undo()
    real = listcache._libraries()
    assert [name for name, *_ in real] == ["yaml", "jmespath", "jinja2", "jsonschema_rs"]
    assert all(origin for _, origin, *_ in real)
    monkeypatch.setattr(listcache, "_libraries", lambda: [[*real[0][:3], real[0][3] + 1], *real[1:]])  # upgraded
    assert listcache.listing_key(RuleOptions()) != key
