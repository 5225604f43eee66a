"""Fault injection on the real test fleet (issue 10): each case breaks one host for real, runs the real
`scan` CLI over it and two healthy fleet hosts, and checks status, error text, the healthy hosts, the
saved report and history, and the exit code.

FAULT_CASES lists every case id (the tests parametrize over slices of it; a test checks they all ran).
"""

from __future__ import annotations

SSH_CASES = [
    "container-killed-mid-probe",
    "probe-killed-mid-run",
    "sshd-stopped",
    "tcp-accepted-no-banner",
    "systemctl-hangs-past-deadline",
    "systemctl-version-hangs-per-command-timeout",
    "auth-wrong-identity",
    "auth-wrong-user",
    "host-key-unknown",
    "host-key-changed",
    "output-50mb",
    "output-invalid-utf8",
    "output-binary-garbage",
]
SSM_CASES = [
    "ssm-undeliverable",
    "ssm-execution-timed-out",
    "ssm-throttled-transient",
    "ssm-throttled-persistent",
    "ssm-s3-output-vanished",
]
FAULT_CASES = SSH_CASES + SSM_CASES
