"""A disk that is full, read-only or refuses a rename while reports or snapshots are written.

Real file systems, no mocks: a small tmpfs filled up (ENOSPC), a read-only bind mount (EROFS) and an
immutable file (`chattr +i`: EPERM even for root, which ignores mode bits). The run must exit 3 with one
clear line, the previous set must be byte-identical afterwards and no temporary file may be left; an
--out that cannot be written at all is bad input (exit 2) found before any host is contacted.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from tests.paths import DATA

DATA = DATA / "reports"
FORMATS = "json,html,md,junit,prom"

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                                reason="mounting a tmpfs needs root")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(out, err))
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "256k") -> Iterator[Path]:
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


@contextlib.contextmanager
def read_only(source: Path, where: Path) -> Iterator[Path]:
    where.mkdir()
    subprocess.run(["mount", "--bind", str(source), str(where)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(where)], check=True)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill(directory: Path, leave: int) -> None:
    """Fill the file system holding `directory` (a tmpfs mounted on its parent) up, then free `leave` bytes."""
    fd = os.open(directory.parent / ".filler", os.O_WRONLY | os.O_CREAT, 0o600)
    written = 0
    try:
        while True:
            written += os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    os.ftruncate(fd, max(0, written - leave))
    os.close(fd)


def contents(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def previous_set(out: Path) -> dict[str, bytes]:
    code, _, err = run("report", str(DATA / "clean.json"), "--format", FORMATS, "--out", str(out))
    assert code == 0, err
    before = contents(out)
    assert len(before) == 5
    return before


def assert_one_clear_line(err: str, why: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in err, err
    assert "not saved" in lines[0] and why in lines[0], err


def test_report_into_a_full_disk_exits_3_and_keeps_the_previous_set(tmp_path: Path) -> None:
    """Before: exit 4, and report.json of the new report sat beside the previous HTML, Markdown, …"""
    new_json = len(run("report", str(DATA / "fleet.json"), "--format", "json")[1].encode())
    with tmpfs(tmp_path / "disk") as disk:
        out = disk / "out"
        before = previous_set(out)
        fill(out, leave=new_json + 8192)  # the new JSON fits, the new HTML does not
        code, _, err = run("report", str(DATA / "fleet.json"), "--format", FORMATS, "--out", str(out))
        assert code == 3
        assert_one_clear_line(err, "No space left on device")
        assert contents(out) == before  # byte-identical, and no temporary file left


def test_a_rename_refused_midway_puts_the_renamed_files_back(tmp_path: Path) -> None:
    """report.md is immutable: json and html are already renamed when md's rename fails (EPERM)."""
    with tmpfs(tmp_path / "disk", size="1m") as disk:
        out = disk / "out"
        before = previous_set(out)
        subprocess.run(["chattr", "+i", str(out / "report.md")], check=True)
        try:
            code, _, err = run("report", str(DATA / "fleet.json"), "--format", FORMATS, "--out", str(out))
        finally:
            subprocess.run(["chattr", "-i", str(out / "report.md")], check=True)
        assert code == 3
        assert_one_clear_line(err, "report.md")
        assert contents(out) == before


def test_an_out_on_a_read_only_mount_is_bad_input_and_nothing_changes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    before = previous_set(out)
    with read_only(out, tmp_path / "ro") as ro:
        code, _, err = run("report", str(DATA / "fleet.json"), "--format", FORMATS, "--out", str(ro))
        assert code == 2 and "Read-only file system" in err, err
        code, stdout, err = run("scan", "local", "--no-store", "--format", FORMATS, "--out", str(ro))
        assert code == 2 and "Read-only file system" in err and stdout == "", err
        code, stdout, err = run("collect", "local", "-o", str(ro))
        assert code == 2 and "Read-only file system" in err and stdout == "", err
    assert contents(out) == before


def test_writing_a_set_on_a_file_system_gone_read_only_is_output_error(tmp_path: Path) -> None:
    """EROFS after prepare (a remount under a running scan): the writer says so; nothing changes."""
    from auditor.atomicio import write_files
    from auditor.errors import OutputError

    out = tmp_path / "out"
    before = previous_set(out)
    with read_only(out, tmp_path / "ro") as ro:
        with pytest.raises(OutputError, match="Read-only file system") as caught:
            write_files([(ro / "report.json", "{}"), (ro / "report.new", b"x")])
        assert "not saved" in str(caught.value)
    assert contents(out) == before


def test_scan_into_a_full_disk_exits_3_keeps_the_previous_set_and_records_the_scan(tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite3"
    with tmpfs(tmp_path / "disk") as disk:
        out = disk / "out"
        before = previous_set(out)
        fill(out, leave=4096)
        code, stdout, err = run("scan", "local", "--binary", "sh", "--store", str(store), "--format", FORMATS,
                                "--out", str(out))
        assert code == 3, err
        assert_one_clear_line(err, "No space left on device")
        assert contents(out) == before
    code, listed, err = run("history", "list", "--store", str(store), "--json")
    assert code == 0, err
    scans = json.loads(listed)["scans"]
    assert len(scans) == 1 and "interrupted" not in json.dumps(scans)  # the results are kept in the store


def test_collect_into_a_full_disk_exits_3_and_keeps_the_previous_snapshots(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk") as disk:
        out = disk / "snap"
        out.mkdir()
        (out / "local.json").write_text('{"previous": true}\n')
        (out / "other.json").write_text('{"other": true}\n')
        before = contents(out)
        fill(out, leave=0)
        code, _, err = run("collect", "local", "--binary", "sh", "-o", str(out))
        assert code == 3, err
        assert_one_clear_line(err, "No space left on device")
        assert contents(out) == before
