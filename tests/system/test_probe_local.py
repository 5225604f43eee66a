"""The real probe on this machine, under dash and bash, through the local transport and the CLI."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import jsonschema
import pytest

from auditor.cli import main
from auditor.collect.framing import new_nonce, with_nonce
from auditor.collect.probe import probe_request, probe_script, validate_binaries
from auditor.collect.schema import snapshot_json_schema
from auditor.collect.section_list import probe_section_names
from auditor.collect.sections import split_sections
from auditor.context import Env
from auditor.errors import InputError
from auditor.transport.local import LocalTransport
from tests.probe_requests import shell_request

SECTIONS = set(probe_section_names())  # the one section list (collect/section_list.py)


@pytest.mark.parametrize("shell", ["/bin/dash", "/bin/bash"])
def test_probe_runs_to_the_end_under_posix_shells(shell: str) -> None:
    if not Path(shell).exists():
        pytest.skip(f"{shell} not installed")
    nonce = new_nonce()
    result = LocalTransport(shell=shell).run(probe_request(["sh", "python3"], nonce=nonce), deadline_s=30)
    sections, done = split_sections(result.stdout, nonce)
    assert done, result.stderr
    assert set(sections) == SECTIONS
    assert sections["os"].rc == 0 and "ID=" in sections["os"].body
    assert "@ sh" in sections["binaries"].body and "found=1" in sections["binaries"].body


def test_probe_never_reads_root_memory_stat_and_writes_nothing() -> None:
    script = probe_script()
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))
    assert not re.search(r"memory\.(numa_)?stat", code)
    # every redirection goes to /dev/null or another descriptor; no file is written
    # (awk comparisons such as `d >= 5` are not redirections: targets must look like files)
    targets = re.findall(r"(?<![0-9&<])>{1,2}\s*([/$A-Za-z\"'][^\s;|)]*)", code)
    assert targets and all(t == "/dev/null" for t in targets), targets


def test_binary_arguments_are_validated_not_interpolated() -> None:
    assert validate_binaries(["kubelet", "/opt/bin/kubelet", "nvidia-smi"]) == [
        "kubelet", "/opt/bin/kubelet", "nvidia-smi"]
    for bad in ["kubelet; rm -rf /", "$(reboot)", "a b", "../etc/passwd", "/opt/../etc/shadow", "`id`", "",
                "/tmp/..", "/usr/bin/./runc", "/usr//bin/runc", "/usr/bin/runc/", ".", "..", "/", "-x"]:
        with pytest.raises(InputError):
            validate_binaries([bad])


def test_collect_local_writes_a_valid_snapshot(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["collect", "local", "-o", str(tmp_path), "--binary", "sh"], Env(out, err))
    assert code == 0, err.getvalue()
    snap = json.loads((tmp_path / "local.json").read_text())
    jsonschema.validate(snap, snapshot_json_schema())
    assert snap["facts"]["kernel"]["release"]
    assert snap["facts"]["cgroups"]["mode"] in ("v1", "v2", "hybrid")
    assert snap["facts"]["cgroups"]["memory"]["dying"] is not None
    assert snap["facts"]["binaries"][0]["sha256"] and len(snap["facts"]["binaries"][0]["sha256"]) == 64
    assert snap["facts"]["cpu"]["count"] >= 1 and snap["facts"]["cpu"]["cores"]
    assert snap["probe"]["complete"] is True
    assert 0 < snap["probe"]["cpu_s"] < 30  # the probe reports its own CPU cost (`times`)
    if not Path("/run/systemd/system").is_dir():  # this VM: no systemd as PID 1 → explicit unknown
        assert snap["facts"]["systemd"] is None and "systemd" in snap["errors"]
    assert out.getvalue().startswith("local ")
    assert "1/1 hosts collected" in out.getvalue()


def test_collect_bad_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    err = io.StringIO()
    assert main(["collect", "local", "-o", str(tmp_path / "o"), "--binary", "x;id"], Env(io.StringIO(), err)) == 2
    assert "neither a plain name" in err.getvalue()
    assert main(["collect", "ftp://nope", "-o", str(tmp_path / "o")], Env(io.StringIO(), err)) == 2
    assert "unknown target" in err.getvalue()
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(shutil.which("timeout") is None, reason="coreutils timeout missing")
def test_local_transport_deadline_raises_timeout() -> None:
    from auditor.errors import ProbeTimeout

    with pytest.raises(ProbeTimeout):
        LocalTransport().run(shell_request("sleep 5"), deadline_s=0.5)


@pytest.mark.parametrize("head", ["", "AMI_NONCE=\n", "AMI_NONCE=xyz\n", "AMI_NONCE=" + "A" * 32 + "\n",
                                  "AMI_NONCE=" + "a" * 31 + "\n", "AMI_NONCE=" + "a" * 33 + "\n"])
def test_probe_refuses_to_run_without_a_valid_nonce(head: str) -> None:
    result = LocalTransport().run(shell_request(head + probe_script(), ["sh"]), deadline_s=30)
    assert result.exit_status != 0 and result.stdout == "" and "AMI_NONCE" in result.stderr


@pytest.mark.parametrize("args", [["--root", "/"], ["--exec-versions", "--root", "/"], ["--root", "IMAGE"],
                                  ["sh", "--root", "/"], ["--root"]])
def test_probe_refuses_the_retired_root_option(tmp_path: Path, args: list[str]) -> None:
    """The probe audits only the live host it runs on; the old offline mode (`--root DIR`, which read an
    image with this machine's tools and followed its links out of it) is refused like a missing nonce."""
    image = tmp_path / "image"
    (image / "etc").mkdir(parents=True)
    (image / "etc" / "os-release").write_text("ID=planted\n")
    args = [str(image) if a == "IMAGE" else a for a in args]
    result = LocalTransport().run(shell_request(with_nonce(probe_script(), new_nonce()), args), deadline_s=30)
    assert result.exit_status == 64 and result.stdout == ""
    assert "--root" in result.stderr and "refusing to run" in result.stderr


def _fake_binary(directory: Path, sentinel: Path, owner: int = 0, mode: int = 0o755) -> Path:
    """A `runc` that would leave `sentinel` behind if anything ran it."""
    directory.mkdir(parents=True, exist_ok=True)
    fake = directory / "runc"
    fake.write_text(f"#!/bin/sh\necho 'runc version 9.9.9'\n: > '{sentinel}'\n")
    fake.chmod(mode)
    os.chown(fake, owner, -1)
    return fake


def _binary_facts(path: Path, exec_versions: bool) -> dict:
    nonce = new_nonce()
    result = LocalTransport().run(probe_request([str(path)], exec_versions, nonce=nonce), deadline_s=30)
    sections, done = split_sections(result.stdout, nonce)
    assert done, result.stderr
    from auditor.collect.parsers.binaries import parse_binaries

    [facts] = parse_binaries(sections["binaries"].body)
    return facts


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="ownership checks need root")


@needs_root
def test_binaries_are_never_run_by_default(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    facts = _binary_facts(_fake_binary(tmp_path / "bin", sentinel), exec_versions=False)
    assert facts["found"] and len(facts["sha256"]) == 64
    assert facts["version"] is None and facts["version_source"] == "none" and facts["version_refused"] is None
    assert not sentinel.exists()


@needs_root
@pytest.mark.parametrize("case", ["world-writable dir", "user-owned file", "group-writable file",
                                  "user-owned dir in chain"])
def test_exec_versions_refuses_what_a_non_root_user_could_change(tmp_path: Path, case: str) -> None:
    sentinel = tmp_path / "ran"
    safe = Path(tempfile.mkdtemp(prefix="ami-auditor-test-", dir="/opt"))  # /opt and / are root-only
    try:
        if case == "world-writable dir":  # /tmp itself (1777), like /tmp/runc
            fake, why = _fake_binary(tmp_path / "bin", sentinel), "world-writable"
        elif case == "user-owned file":
            fake, why = _fake_binary(safe / "bin", sentinel, owner=1000), "owned by uid 1000"
        elif case == "group-writable file":
            fake, why = _fake_binary(safe / "bin", sentinel, mode=0o775), "group- or world-writable (mode 775)"
        else:
            (safe / "user").mkdir()
            os.chown(safe / "user", 1000, -1)
            fake, why = _fake_binary(safe / "user" / "bin", sentinel), f"directory {safe}/user is owned by uid 1000"
        facts = _binary_facts(fake, exec_versions=True)
        assert facts["version"] is None and facts["version_source"] == "none"
        assert why in facts["version_refused"], facts["version_refused"]
        assert not sentinel.exists()
    finally:
        shutil.rmtree(safe)


@needs_root
def test_exec_versions_runs_a_root_only_binary_through_its_resolved_path(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    safe = Path(tempfile.mkdtemp(prefix="ami-auditor-test-", dir="/opt"))
    try:
        fake = _fake_binary(safe / "real", sentinel)
        (safe / "bin").mkdir()
        (safe / "bin" / "runc").symlink_to(fake)
        facts = _binary_facts(safe / "bin" / "runc", exec_versions=True)
        assert facts["version"] == "runc version 9.9.9" and facts["version_source"] == "exec"
        assert facts["version_refused"] is None and facts["realpath"] == str(fake)
        assert sentinel.exists()
    finally:
        shutil.rmtree(safe)


@needs_root
def test_exec_versions_follows_a_link_into_a_user_owned_place_and_refuses(tmp_path: Path) -> None:
    """/opt/…/bin/runc (safe) → /tmp/…/runc: the resolved file decides."""
    sentinel = tmp_path / "ran"
    safe = Path(tempfile.mkdtemp(prefix="ami-auditor-test-", dir="/opt"))
    try:
        (safe / "bin").mkdir()
        (safe / "bin" / "runc").symlink_to(_fake_binary(tmp_path / "bin", sentinel))
        facts = _binary_facts(safe / "bin" / "runc", exec_versions=True)
        assert "world-writable" in facts["version_refused"] and not sentinel.exists()
    finally:
        shutil.rmtree(safe)


def test_a_thread_name_with_a_newline_stays_one_row(tmp_path: Path) -> None:
    """comm is any 15 bytes a process picks (prctl PR_SET_NAME), newline included: one row, `?` for it."""
    import subprocess
    import sys

    busy = subprocess.Popen([sys.executable, "-c",
                             "import ctypes, time\n"
                             "ctypes.CDLL(None).prctl(15, b'ev\\n1 1 1 99 0 x', 0, 0, 0)\n"
                             "end = time.time() + 20\n"
                             "while time.time() < end: pass\n"])
    try:
        nonce = new_nonce()
        result = LocalTransport().run(probe_request(["sh"], nonce=nonce), deadline_s=30)
        sections, done = split_sections(result.stdout, nonce)
        assert done, result.stderr
        threads = sections["cpu"].body.split("--- threads\n", 1)[1].split("\n")
        mine = [row for row in threads if row.startswith(f"{busy.pid} {busy.pid} ")]
        assert len(mine) == 1 and mine[0].endswith(" ev?1_1_1_99_0_x"), mine
        assert not [row for row in threads if row.startswith("1 1 1 99")]
    finally:
        busy.kill()
        busy.wait()
