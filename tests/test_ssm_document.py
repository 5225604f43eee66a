"""The SSM document and its output framing: the real wrapper script run with /bin/sh, decoded back."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from auditor.collect.probe import DEFAULT_BINARIES, probe_script
from auditor.transport.ssm import status_error
from auditor.transport.ssm_document import (
    BINARIES_PATTERN,
    decode_output,
    document_content,
    document_json,
    document_probe_sha256,
    probe_sha256,
    wrapper_script,
)

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _run(script: str, binaries: str | None = "a b") -> str:
    env = {"PATH": "/usr/bin:/bin"} | ({"SSM_binaries": binaries} if binaries is not None else {})
    return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout


def test_document_is_small_and_names_only_its_parameters() -> None:
    text = document_json(probe_script(), list(DEFAULT_BINARIES))
    assert len(text.encode()) < 64 * 1024  # SSM's document size limit
    doc = json.loads(text)
    refs = set(re.findall(r"\{\{\s*([\w:.-]+)\s*\}\}", json.dumps(doc["mainSteps"])))
    assert refs == {"executionTimeout", "binaries"}  # the probe's own {{…}} are hidden in base64
    assert doc["parameters"]["binaries"]["interpolationType"] == "ENV_VAR"
    assert document_probe_sha256(text) == probe_sha256(probe_script())


@pytest.mark.parametrize("value", ["kubelet; rm -rf /", "$(id)", "`id`", "a'b", "a\nb", "x*", "a|b"])
def test_binaries_pattern_refuses_shell_syntax(value: str) -> None:
    assert not re.search(BINARIES_PATTERN, value)


def test_binaries_arrive_as_arguments_not_code() -> None:
    script = wrapper_script('for a in "$@"; do echo "arg=$a"; done\n')
    out = decode_output(_run(script, "kubelet /opt/bin/x"))
    assert out.stdout == "arg=kubelet\narg=/opt/bin/x\n" and out.exit_status == 0 and not out.truncated


def test_old_agents_fall_back_to_the_substituted_parameter() -> None:
    script = "\n".join(document_content('echo "n=$#"\n', [])["mainSteps"][0]["inputs"]["runCommand"])
    script = script.replace("{{ binaries }}", "kubelet runc")  # what an agent without ENV_VAR support does
    assert decode_output(_run(script, None)).stdout == "n=2\n"


def test_probe_exit_status_and_truncation_are_recovered() -> None:
    out = _run(wrapper_script("head -c 200000 /dev/urandom | od -An -tx1; exit 3\n"))
    full = decode_output(out)
    assert full.exit_status == 3 and not full.truncated and len(full.stdout) > 500_000
    cut = decode_output(out[:24_000])
    assert cut.truncated and cut.framed and 0 < len(cut.stdout) < len(full.stdout)
    assert full.stdout.startswith(cut.stdout)
    assert not decode_output("hello").framed


@pytest.mark.parametrize(("inv", "status", "detail"), [
    ({"Status": "Failed", "StatusDetails": "Undeliverable", "ResponseCode": -1}, "unreachable", "Undeliverable"),
    ({"Status": "TimedOut", "StatusDetails": "Delivery Timed Out", "ResponseCode": -1}, "unreachable", "Delivery"),
    ({"Status": "TimedOut", "StatusDetails": "Execution Timed Out", "ResponseCode": -1}, "timeout", "Execution"),
    ({"Status": "Failed", "StatusDetails": "Terminated", "ResponseCode": -1}, "error", "Terminated"),
    ({"Status": "Cancelled", "StatusDetails": "Cancelled", "ResponseCode": -1}, "error", "Cancelled"),
    ({"Status": "Failed", "StatusDetails": "Failed", "ResponseCode": 2, "StandardErrorContent": "boom"}, "error",
     "boom"),
    ({"Status": "Failed", "StatusDetails": "Access Denied", "ResponseCode": -1}, "auth_failed", "Access Denied"),
])
def test_terminal_statuses_map_to_host_statuses_keeping_aws_detail(inv: dict, status: str, detail: str) -> None:
    err = status_error(inv)
    assert err is not None and err.status == status and detail in str(err)


def test_iam_policy_allows_only_the_audit_document() -> None:
    policy = json.loads((DOCS / "iam-policy.json").read_text())

    def actions_of(statement: dict) -> list[str]:
        return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]

    send = [s for s in policy["Statement"] if "ssm:SendCommand" in actions_of(s)]
    resources = {s["Resource"] for s in send}
    assert any(r.endswith(":document/AmiAuditor-Probe") for r in resources)
    assert not any("AWS-RunShellScript" in r or r == "*" for r in resources)
    actions = [a for s in policy["Statement"] for a in actions_of(s)]
    assert not any("*" in a for a in actions)
