"""host.container: the probe's own identity section, run under /bin/sh in a private mount namespace where
/run/systemd says what systemd PID 1 writes in a container (and says nothing, as on a VM)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from auditor.collect.parsers.identity import parse_host
from auditor.collect.probe import probe_script
from auditor.collect.sections import Section

_MAIN = "\ncpu_begin\nrun meta s_meta\n"


def identity_in_namespace(container_file: str | None) -> dict[str, object]:
    """parse_host of the probe's s_identity, with /run/systemd replaced (in a private mount namespace only)
    by a tmpfs holding `container` = `container_file`, or no such file."""
    head, found, _ = probe_script().partition(_MAIN)
    assert found, "the probe's main block moved: update this test"
    setup = "mount -t tmpfs ami-auditor-test /run/systemd\n"
    if container_file is not None:
        setup += f"printf '%s\\n' '{container_file}' > /run/systemd/container\n"
    program = f"{setup}AMI_NONCE={'0' * 32}\n{head}\ns_identity\n"
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", program, "probe"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    return parse_host({"identity": Section("identity", done.stdout, 0)})


needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or
                                not os.path.isdir("/run/systemd"),
                                reason="needs root, unshare and /run/systemd for a private mount namespace")


@needs_root
@pytest.mark.parametrize("manager", ["systemd-nspawn", "lxc", "docker"])
def test_a_container_is_named_by_what_systemd_wrote(manager: str) -> None:
    host = identity_in_namespace(manager)
    assert host["container"] == manager
    assert host["boot_id"] and host["uptime_s"]  # the rest of the section is unchanged


@needs_root
def test_no_container_file_is_no_container() -> None:
    """Whatever marker files say: a VM whose root came from a docker image keeps /.dockerenv (this machine,
    when it has one, is such a VM) and is no container."""
    assert identity_in_namespace(None)["container"] is None
