"""SSM transport over real HTTP: boto3 → the local SSM endpoint (tests/ssm_endpoint, which stands in
for AWS Systems Manager and really runs the document's script with /bin/sh here) and moto's S3 server.

Instances that only need to answer in bulk use a recorded output of the real document script run once
on this machine (`canned_runner`), so 120 instances do not run 120 probes on shared cores.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from auditor.aws.ssm import SSMSettings
from auditor.collect import framing
from auditor.collect.probe import DEFAULT_BINARIES
from auditor.models import HostSpec, TransportOptions
from auditor.run.live_hosts import collect_hosts
from auditor.transport.ssm_document import DOCUMENT_NAME, decode_output, document_json, wrapper_script
from tests.framing_fixtures import FIXTURE_NONCE
from tests.ssm_endpoint import AwsStandIns, canned_runner, local_runner
from tests.ssm_endpoint.recorded import recorded_document_output

FAST = SSMSettings(poll_interval_s=0.1)


def iid(n: int) -> str:
    return f"i-{n:017x}"


def spec(n: int, settings: SSMSettings = FAST, name: str | None = None) -> HostSpec:
    return HostSpec(name or f"h{n}", f"ssm://{iid(n)}", options=TransportOptions(ssm=settings))


@pytest.fixture(scope="module")
def aws() -> Iterator[AwsStandIns]:
    with AwsStandIns(visibility_lag_s=0.3) as a:
        a.install_probe_document()
        yield a


@pytest.fixture(autouse=True)
def _reset(aws: AwsStandIns) -> Iterator[None]:
    aws.endpoint.calls.clear()
    aws.endpoint.errors.clear()
    aws.endpoint.sent_commands.clear()
    yield
    aws.endpoint.not_yet_gets = 0
    aws.endpoint.throttles.clear()


@pytest.fixture(scope="module")
def recorded() -> str:
    """What the real document script prints on this machine (SSM_binaries as the agent would set it)."""
    return recorded_document_output()


def _big_output(recorded: str, noise_bytes: int = 60_000) -> str:
    """The recorded probe output with incompressible lines before its end mark, framed by the real wrapper."""
    done = framing.done_marker(FIXTURE_NONCE)
    raw = decode_output(recorded).stdout.replace(done + "\n", "")
    fake_probe = ("cat <<'RAW'\n" + raw + "RAW\n"
                  f"head -c {noise_bytes} /dev/urandom | od -An -tx1\n"
                  f"echo '{done}'\n")
    proc = subprocess.run(["/bin/sh", "-c", wrapper_script(fake_probe, [], FIXTURE_NONCE)], capture_output=True,
                          text=True, check=True)
    return proc.stdout


def test_probe_runs_through_the_document_and_parses(aws: AwsStandIns) -> None:
    aws.endpoint.add_instance(iid(1), local_runner())
    [result] = collect_hosts([spec(1)], deadline_s=60)
    assert result.status == "ok", result.error
    snap = result.snapshot
    assert snap["probe"]["complete"] and not snap["probe"]["truncated"]
    assert snap["facts"]["os"]["id"] == "debian"
    # raw probe output is larger than SSM's inline cap; compressed it fits
    assert snap["probe"]["stdout_bytes"] > 24_000
    [sent] = aws.endpoint.sent_commands
    assert sent["DocumentName"] == DOCUMENT_NAME
    assert sent["TimeoutSeconds"] == 60 and sent["Parameters"]["executionTimeout"] == ["60"]
    assert sent["Parameters"]["binaries"] == [" ".join(DEFAULT_BINARIES)]
    assert framing.NONCE_RE.match(sent["Parameters"]["nonce"][0]) and sent["Parameters"]["execVersions"] == ["no"]


def test_sendcommand_is_batched_at_50_ids(aws: AwsStandIns, recorded: str) -> None:
    n = 120
    for i in range(10_000, 10_000 + n):
        aws.endpoint.add_instance(iid(i), canned_runner(recorded))
    results = collect_hosts([spec(i) for i in range(10_000, 10_000 + n)], deadline_s=30)
    assert [r.status for r in results] == ["ok"] * n
    calls = aws.endpoint.calls
    assert calls["SendCommand"] == math.ceil(n / 50)
    assert max(len(c["InstanceIds"]) for c in aws.endpoint.sent_commands) == 50
    assert calls["DescribeInstanceInformation"] == math.ceil(n / 50)
    assert calls["GetCommandInvocation"] == n  # one fetch per finished instance, no per-instance polling


def test_the_endpoint_enforces_the_50_id_limit_botocore_does_not(aws: AwsStandIns) -> None:
    with pytest.raises(ClientError) as info:
        aws.ssm.send_command(DocumentName=DOCUMENT_NAME, InstanceIds=[iid(i) for i in range(51)])
    assert info.value.response["Error"]["Code"] == "ValidationException"


@pytest.mark.parametrize("params", [
    {"binaries": ["kubelet"]},  # no nonce: the parameter is required
    {"binaries": ["kubelet"], "nonce": ["x" * 32]},
    {"binaries": ["kubelet"], "nonce": [FIXTURE_NONCE.upper()]},
    {"binaries": ["kubelet"], "nonce": [FIXTURE_NONCE + "0"]},
    {"binaries": ["/tmp/../usr/bin/runc"], "nonce": [FIXTURE_NONCE]},
    {"binaries": ["/usr/bin//runc"], "nonce": [FIXTURE_NONCE]},
    {"binaries": ["kubelet"], "nonce": [FIXTURE_NONCE], "execVersions": ["true"]},
], ids=["missing-nonce", "non-hex", "upper-case", "too-long", "dotdot", "double-slash", "exec-not-yes-no"])
def test_the_endpoint_refuses_parameters_outside_the_documents_patterns(aws: AwsStandIns, params: dict) -> None:
    """As AWS does: every value (and the default of one not given) must match its allowedPattern."""
    aws.endpoint.add_instance(iid(950), local_runner())
    with pytest.raises(ClientError) as info:
        aws.ssm.send_command(DocumentName=DOCUMENT_NAME, InstanceIds=[iid(950)], Parameters=params)
    assert info.value.response["Error"]["Code"] == "InvalidParameters"


def test_each_sendcommand_batch_gets_its_own_nonce(aws: AwsStandIns, recorded: str) -> None:
    for i in range(60):
        aws.endpoint.add_instance(iid(1000 + i), canned_runner(recorded))
    results = collect_hosts([spec(1000 + i) for i in range(60)], deadline_s=60)
    assert all(r.status == "ok" and r.snapshot["probe"]["complete"] for r in results)
    nonces = [sent["Parameters"]["nonce"][0] for sent in aws.endpoint.sent_commands]
    assert len(nonces) == 2 and len(set(nonces)) == 2 and FIXTURE_NONCE not in nonces


def test_undeliverable_offline_and_unmanaged_instances_get_a_status(aws: AwsStandIns, recorded: str) -> None:
    aws.endpoint.add_instance(iid(201), canned_runner(recorded), behaviour="undeliverable")
    aws.endpoint.add_instance(iid(202), canned_runner(recorded), ping="ConnectionLost")
    aws.endpoint.add_instance(iid(203), canned_runner(recorded))
    results = collect_hosts([spec(201), spec(202), spec(203), spec(204)], deadline_s=30)
    status = {r.name: (r.status, r.error) for r in results}
    assert status["h201"][0] == "unreachable" and "Undeliverable" in status["h201"][1]
    assert status["h202"] == ("unreachable", "SSM agent ConnectionLost; no command sent")
    assert status["h203"] == ("ok", None)
    assert status["h204"][0] == "unreachable" and "not a managed instance" in status["h204"][1]
    assert aws.endpoint.sent_commands[0]["InstanceIds"] == [iid(201), iid(203)]


def test_execution_timeout_is_set_and_reported(aws: AwsStandIns, recorded: str) -> None:
    aws.endpoint.add_instance(iid(301), canned_runner(recorded), delay_s=30)
    [result] = collect_hosts([spec(301)], deadline_s=2)
    assert result.status == "timeout"
    assert "Execution Timed Out" in result.error
    [sent] = aws.endpoint.sent_commands
    assert sent["Parameters"]["executionTimeout"] == ["2"]
    assert sent["TimeoutSeconds"] == 30  # SSM's minimum delivery timeout


def test_truncated_output_is_detected_and_the_readable_part_kept(aws: AwsStandIns, recorded: str) -> None:
    big = _big_output(recorded)
    assert len(big) > 24_000
    aws.endpoint.add_instance(iid(401), canned_runner(big))
    [result] = collect_hosts([spec(401)], deadline_s=30)
    assert result.status == "ok"
    snap = result.snapshot
    assert snap["probe"]["truncated"] and not snap["probe"]["complete"]
    assert "truncated" in snap["errors"]["probe"] and "--ssm-s3-bucket" in snap["errors"]["probe"]
    assert snap["facts"]["os"]["id"] == "debian"  # sections before the cut still parse


def test_s3_output_bucket_gives_the_full_output(aws: AwsStandIns, recorded: str) -> None:
    aws.s3.create_bucket(Bucket="audit-out")
    aws.endpoint.add_instance(iid(402), canned_runner(_big_output(recorded)))
    settings = SSMSettings(poll_interval_s=0.1, s3_bucket="audit-out", s3_prefix="runs")
    [result] = collect_hosts([spec(402, settings)], deadline_s=30)
    assert result.status == "ok", result.error
    assert result.snapshot["probe"]["complete"] and not result.snapshot["probe"]["truncated"]
    assert "probe" not in result.snapshot["errors"]
    [sent] = aws.endpoint.sent_commands
    assert sent["OutputS3BucketName"] == "audit-out" and sent["OutputS3KeyPrefix"] == "runs"
    keys = [o["Key"] for o in aws.s3.list_objects_v2(Bucket="audit-out", Prefix="runs/")["Contents"]]
    assert any(k.endswith(f"/{iid(402)}/awsrunShellScript/probe/stdout") for k in keys)


def test_throttling_is_retried(aws: AwsStandIns, recorded: str) -> None:
    for i in (501, 502):
        aws.endpoint.add_instance(iid(i), canned_runner(recorded))
    for op in ("SendCommand", "ListCommandInvocations", "GetCommandInvocation", "DescribeInstanceInformation"):
        aws.endpoint.throttle(op, 2)
    results = collect_hosts([spec(501), spec(502)], deadline_s=30)
    assert [r.status for r in results] == ["ok", "ok"]
    for op in ("SendCommand", "ListCommandInvocations", "GetCommandInvocation", "DescribeInstanceInformation"):
        assert aws.endpoint.errors[(op, "ThrottlingException")] == 2
    assert aws.endpoint.calls["SendCommand"] == 3  # two throttled, one accepted: a single command sent


def test_invocation_does_not_exist_right_after_send_means_not_yet(aws: AwsStandIns, recorded: str) -> None:
    aws.endpoint.not_yet_gets = 2
    for i in (601, 602, 603):
        aws.endpoint.add_instance(iid(i), canned_runner(recorded))
    results = collect_hosts([spec(i) for i in (601, 602, 603)], deadline_s=30)
    assert [r.status for r in results] == ["ok"] * 3
    assert aws.endpoint.errors[("GetCommandInvocation", "InvocationDoesNotExist")] >= 6


def test_an_out_of_date_document_is_refused_with_the_fix(aws: AwsStandIns, recorded: str) -> None:
    aws.ssm.create_document(Name="Old-Probe", Content=document_json("echo old probe\n", []),
                            DocumentType="Command", DocumentFormat="JSON")
    aws.endpoint.add_instance(iid(701), canned_runner(recorded))
    [result] = collect_hosts([spec(701, SSMSettings(document="Old-Probe", poll_interval_s=0.1))])
    assert result.status == "error"
    assert "ami-auditor ssm install-document" in result.error
    assert aws.endpoint.calls["SendCommand"] == 0


def test_run_shell_script_mode_sends_the_probe_inline(aws: AwsStandIns) -> None:
    aws.endpoint.add_instance(iid(801), local_runner())
    settings = SSMSettings(document=None, poll_interval_s=0.1)
    [result] = collect_hosts([spec(801, settings)], binaries=["sh", "/usr/bin/env"], deadline_s=60)
    assert result.status == "ok", result.error
    [sent] = aws.endpoint.sent_commands
    assert sent["DocumentName"] == "AWS-RunShellScript"
    assert "SSM_binaries='sh /usr/bin/env'" in sent["Parameters"]["commands"]
    names = {b["name"] for b in result.snapshot["facts"]["binaries"]}
    assert {"sh", "env"} <= names  # the probe names a binary given by path by its base name


def test_exec_versions_reaches_the_probe_as_a_document_parameter(aws: AwsStandIns) -> None:
    aws.endpoint.add_instance(iid(960), local_runner())
    [result] = collect_hosts([spec(960)], binaries=["sh"], deadline_s=60, exec_versions=True)
    assert result.status == "ok", result.error
    [sent] = aws.endpoint.sent_commands
    assert sent["Parameters"]["execVersions"] == ["yes"] and sent["Parameters"]["binaries"] == ["sh"]
    [sh] = result.snapshot["facts"]["binaries"]
    assert sh["version_refused"] == "no known version flag for sh" and sh["version_source"] != "exec"
