"""Snapshot files are asked of the kernel ahead of their read (inputfile.read_ahead): a directory not in
the page cache is read from disk while the files before are parsed. The hint is checked by what the kernel
really holds (util-linux `fincore`), and it is only a hint: whatever a file is, it never blocks or raises."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from auditor.evaluate import files
from auditor.inputfile import read_ahead


def _resident_pages(path: Path) -> int:
    done = subprocess.run(["fincore", "--noheadings", "--raw", "--output", "PAGES", str(path)],
                          capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def _drop_from_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if _resident_pages(path):
        pytest.skip("this filesystem keeps the file's pages (tmpfs): nothing to read ahead")


@pytest.mark.skipif(shutil.which("fincore") is None, reason="util-linux fincore is not installed")
def test_a_file_out_of_the_page_cache_is_brought_in_by_the_hint(tmp_path: Path) -> None:
    path = tmp_path / "h0001.json"
    path.write_bytes(b'{"name": "h0001"}' + b" " * (256 << 10))
    _drop_from_cache(path)
    read_ahead(str(path))
    waited = 0.0
    while not _resident_pages(path) and waited < 30:
        time.sleep(0.05)
        waited += 0.05
    assert _resident_pages(path) > 0


@pytest.mark.skipif(shutil.which("fincore") is None, reason="util-linux fincore is not installed")
def test_the_hint_asks_for_no_more_than_the_read_may_take(tmp_path: Path) -> None:
    """A file over the read's limit is refused by the read; its hint must not pull all of it from disk."""
    path = tmp_path / "huge.json"
    path.write_bytes(os.urandom(4 << 20))
    _drop_from_cache(path)
    read_ahead(str(path), limit=(64 << 10) - 1)
    waited = 0.0
    while not _resident_pages(path) and waited < 30:
        time.sleep(0.05)
        waited += 0.05
    time.sleep(0.2)  # let any further readahead land
    page = os.sysconf("SC_PAGE_SIZE")  # 64 KiB asked for; a kernel may round its readahead up, never to 4 MiB
    assert 0 < _resident_pages(path) <= 4 * (64 << 10) // page < (4 << 20) // page


def test_the_hint_never_blocks_or_raises_whatever_the_file_is(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.json")  # no writer: a blocking open would wait forever
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "dangling.json").symlink_to(tmp_path / "gone")
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "locked.json").write_text("{}")
    (tmp_path / "locked.json").chmod(0)
    names = ["fifo.json", "zero.json", "dangling.json", "dir.json", "locked.json", "missing.json", "nul\0.json"]
    done = threading.Event()

    def hint_all() -> None:
        for name in names:
            read_ahead(str(tmp_path / name))
        done.set()

    threading.Thread(target=hint_all, daemon=True).start()
    assert done.wait(60), "a hint blocked"


def test_every_file_is_read_once_in_order_with_the_read_ahead(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file is hinted once, before it is read, and READ_AHEAD files ahead at most."""
    paths = [str(tmp_path / f"h{i:04d}.json") for i in range(files.READ_AHEAD * 2 + 5)]
    hinted: list[str] = []
    monkeypatch.setattr(files, "read_ahead", hinted.append)  # records the calls; the kernel part is above
    for index, path in enumerate(files._read_ahead(paths)):
        assert path == paths[index] and path in hinted
        assert len(hinted) <= index + 1 + files.READ_AHEAD
    assert hinted == paths
