"""Run one of the probe's own filter functions (FILTERS) on text, under /bin/sh: the real-capture tests
feed published command output through the very code a host runs, not a Python copy of it."""

from __future__ import annotations

import subprocess

from auditor.collect.probe import probe_script

_MAIN = "\ncpu_begin\nrun meta s_meta\n"  # where the probe's definitions end and its run begins
FILTERS = ("restart_tally", "dpkg_owner_of", "info_lines", "stat_lines", "trouble_lines", "meminfo_kv",
           "ecs_exits", "chrony_state")


def probe_filter(name: str, text: str) -> str:
    """stdout of the probe function `name` (one of FILTERS) reading `text` on stdin."""
    if name not in FILTERS:
        raise ValueError(name)
    script = probe_script()
    head, found, _ = script.partition(_MAIN)
    assert found, "the probe's main block moved: update tests/probe_shell.py"
    program = f"AMI_NONCE={'0' * 32}\n{head}\n{name}\n"
    done = subprocess.run(["sh", "-c", program, "probe"], input=text, capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode in (0, 1), done.stderr  # grep finding nothing is status 1
    return done.stdout
