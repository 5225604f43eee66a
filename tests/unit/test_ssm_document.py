"""The SSM document and its output framing: the real wrapper script run with /bin/sh, decoded back."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from auditor.collect.probe import DEFAULT_BINARIES, probe_script
from auditor.transport.ssm_document import (
    BINARIES_PATTERN,
    decode_output,
    document_content,
    document_json,
    document_probe_sha256,
    probe_sha256,
    wrapper_script,
)
from auditor.transport.ssm_output import status_error
from tests.paths import ROOT

DOCS = ROOT / "docs"


NONCE = "0123456789abcdef" * 2


def _run(script: str, binaries: str | None = "a b", **extra: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "SSM_nonce": NONCE} | ({"SSM_binaries": binaries} if binaries is not None else {})
    return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env=env | extra,
                          check=True).stdout


def test_document_is_small_and_names_only_its_parameters() -> None:
    text = document_json(probe_script(), list(DEFAULT_BINARIES))
    assert len(text.encode()) < 64 * 1024  # SSM's document size limit
    doc = json.loads(text)
    refs = set(re.findall(r"\{\{\s*([\w:.-]+)\s*\}\}", json.dumps(doc["mainSteps"])))
    # the probe's own {{…}} are hidden in base64
    assert refs == {"executionTimeout", "binaries", "nonce", "execVersions", "deepCpu"}
    for name in ("binaries", "nonce", "execVersions", "deepCpu"):
        assert doc["parameters"][name]["interpolationType"] == "ENV_VAR"
    nonce = doc["parameters"]["nonce"]
    assert nonce["allowedPattern"] == "^[0-9a-f]{32}$" and "default" not in nonce  # required
    assert doc["parameters"]["execVersions"] == {**doc["parameters"]["execVersions"], "default": "no",
                                                 "allowedPattern": "^(yes|no)$"}
    assert doc["parameters"]["deepCpu"] == {**doc["parameters"]["deepCpu"], "default": "no",
                                            "allowedPattern": "^(yes|no)$"}
    assert document_probe_sha256(text) == probe_sha256(probe_script())


@pytest.mark.parametrize("value", ["kubelet; rm -rf /", "$(id)", "`id`", "a'b", "a\nb", "x*", "a|b",
                                   # unclean paths: `..`/`.` segments, `//`, trailing slash, relative
                                   "/tmp/../usr/bin/runc", "kubelet /opt/../tmp/runc", "/usr/bin/./runc",
                                   "/usr/bin/..", "/usr/bin/.", "/usr//bin/runc", "//usr/bin/runc", "/usr/bin/",
                                   "/", "..", ".", "../runc", "bin/runc", "-x", "--exec-versions"])
def test_binaries_pattern_refuses_shell_syntax_and_unclean_paths(value: str) -> None:
    assert not re.search(BINARIES_PATTERN, value)


@pytest.mark.parametrize("value", ["", "kubelet", "kubelet containerd runc", "/usr/bin/kubelet ecs-init",
                                   "/opt/.hidden/runc", "/opt/.../runc", "c++ a.b_c-d"])
def test_binaries_pattern_admits_names_and_clean_absolute_paths(value: str) -> None:
    assert re.search(BINARIES_PATTERN, value)


def test_the_nonce_reaches_the_probe_on_stdin_never_as_an_argument() -> None:
    script = wrapper_script('echo "first=$AMI_NONCE"; echo "args=$*"\n')  # line 1 set AMI_NONCE
    out = decode_output(_run(script, "kubelet"))
    assert out.stdout == f"first={NONCE}\nargs=kubelet\n"


def test_exec_versions_parameter_becomes_the_probe_flag() -> None:
    script = wrapper_script('echo "args=$*"\n')
    assert decode_output(_run(script, "runc", SSM_execVersions="yes")).stdout == "args=--exec-versions runc\n"
    assert decode_output(_run(script, "runc", SSM_execVersions="no")).stdout == "args=runc\n"


def test_deep_cpu_parameter_becomes_the_probe_flag() -> None:
    script = wrapper_script('echo "args=$*"\n')
    out = _run(script, "runc", SSM_execVersions="yes", SSM_deepCpu="yes")
    assert decode_output(out).stdout == "args=--deep-cpu --exec-versions runc\n"
    assert decode_output(_run(script, "runc", SSM_deepCpu="no")).stdout == "args=runc\n"
    inline = wrapper_script('echo "args=$*"\n', ["runc"], NONCE, deep_cpu=True)
    out = subprocess.run(["/bin/sh", "-c", inline], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
                         check=True).stdout
    assert decode_output(out).stdout == "args=--deep-cpu runc\n"


def test_run_shell_script_mode_sets_nonce_and_flag_inline_quoted() -> None:
    script = wrapper_script('echo "first=$AMI_NONCE args=$*"\n', ["runc"], NONCE, exec_versions=True)
    assert f"SSM_nonce={NONCE}" in script and "SSM_execVersions=yes" in script
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
                         check=True).stdout
    assert decode_output(out).stdout == f"first={NONCE} args=--exec-versions runc\n"
    with pytest.raises(ValueError):
        wrapper_script("true\n", ["runc"], "not-a-nonce")


def test_binaries_arrive_as_arguments_not_code() -> None:
    script = wrapper_script('for a in "$@"; do echo "arg=$a"; done\n')
    out = decode_output(_run(script, "kubelet /opt/bin/x"))
    assert out.stdout == "arg=kubelet\narg=/opt/bin/x\n" and out.exit_status == 0 and not out.truncated


def test_old_agents_fall_back_to_the_substituted_parameter() -> None:
    script = "\n".join(document_content('echo "n=$#"\n', [])["mainSteps"][0]["inputs"]["runCommand"])
    script = script.replace("{{ binaries }}", "kubelet runc")  # what an agent without ENV_VAR support does
    script = script.replace("{{ nonce }}", NONCE).replace("{{ execVersions }}", "no")
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    assert decode_output(out).stdout == "n=2\n"


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
