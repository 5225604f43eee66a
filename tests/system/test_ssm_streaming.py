"""The SSM path streams and reads outputs page by page, over real HTTP: boto3 → the local SSM endpoint
(tests/ssm_endpoint, standing in for AWS Systems Manager) and moto's S3 server.

Instances answer in replay mode: one real output of the document's script recorded on this machine,
re-framed with each command's nonce and carrying each instance's own identity (no host runs them).
"""

from __future__ import annotations

import base64
import gzip
import time
from collections.abc import Iterator

import pytest

from auditor.aws.ssm import SSMSettings
from auditor.collect import framing
from auditor.collect.probe import DEFAULT_BINARIES, probe_request
from auditor.collect.snapshot import build_snapshot
from auditor.errors import ProbeTimeout, TransportError, Unreachable
from auditor.models import CommandResult, HostSpec, TransportOptions
from auditor.run.live_hosts import collect_hosts, iter_hosts
from auditor.transport.ssm import run_ssm_batch
from auditor.transport.ssm_document import FOOTER, HEADER, decode_output
from tests.framing_fixtures import FIXTURE_NONCE
from tests.ssm_endpoint import AwsStandIns, canned_runner
from tests.ssm_endpoint.recorded import recorded_document_output
from tests.ssm_endpoint.replay import Identity, Replay

BUCKET = "audit-stream"
TAGS = (("tag:fleet", ("stream",)),)


def iid(n: int) -> str:
    return f"i-{n:017x}"


@pytest.fixture(scope="module")
def replay() -> Replay:
    return Replay(recorded_document_output())


@pytest.fixture(scope="module")
def aws() -> Iterator[AwsStandIns]:
    with AwsStandIns(visibility_lag_s=0.2, workers=64) as a:
        a.install_probe_document(BUCKET)
        yield a


@pytest.fixture(autouse=True)
def _reset(aws: AwsStandIns) -> Iterator[None]:
    aws.endpoint.instances.clear()
    aws.endpoint.calls.clear()
    aws.endpoint.errors.clear()
    yield


def fleet(aws: AwsStandIns, replay: Replay, numbers: range, tag: str = "stream", **kw: object) -> list[str]:
    ids = [iid(n) for n in numbers]
    for n, i in zip(numbers, ids):
        aws.endpoint.add_instance(i, replay.runner(Identity(i, az=f"us-east-1{'abc'[n % 3]}")),
                                  tags={"fleet": tag}, **kw)  # type: ignore[arg-type]
    return ids


def specs(ids: list[str], settings: SSMSettings) -> list[HostSpec]:
    return [HostSpec(f"h-{i}", f"ssm://{i}", options=TransportOptions(ssm=settings, ssm_ping="Online")) for i in ids]


def test_replay_answers_with_the_instance_identity_and_the_commands_nonce(replay: Replay) -> None:
    nonce = "fe" * 16
    decoded = decode_output(replay.answer(Identity("i-0feedfacecafe0001", az="us-east-1c", az_id="use1-az3"), nonce))
    assert decoded.framed and not decoded.truncated
    assert FIXTURE_NONCE not in decoded.stdout  # every marker carries the command's nonce
    snap = build_snapshot(HostSpec("x", "ssm://i-0feedfacecafe0001"),
                          CommandResult(decoded.stdout, "", decoded.exit_status), nonce)
    assert snap["host"]["instance_id"] == "i-0feedfacecafe0001"
    assert snap["host"]["az"] == "us-east-1c" and snap["host"]["az_id"] == "use1-az3"
    other = decode_output(replay.answer(Identity("i-0feedfacecafe0002"), nonce)).stdout
    assert build_snapshot(HostSpec("y", "ssm://i-0feedfacecafe0002"), CommandResult(other, "", 0),
                          nonce)["host"]["instance_id"] == "i-0feedfacecafe0002"


def test_tag_targeted_s3_path_makes_no_per_instance_ssm_call(aws: AwsStandIns, replay: Replay) -> None:
    n = 400
    ids = fleet(aws, replay, range(1, n + 1))
    settings = SSMSettings(poll_interval_s=0.5, s3_bucket=BUCKET, s3_prefix="no-per-instance", targets=TAGS,
                           max_concurrency="100%")
    results = collect_hosts(specs(ids, settings), deadline_s=60)
    assert [r.status for r in results] == ["ok"] * n, {r.error for r in results}
    assert [r.snapshot["host"]["instance_id"] for r in results] == ids  # each its own output
    calls = aws.endpoint.calls
    assert calls["GetCommandInvocation"] == 0 and calls["ListCommandInvocations"] == 0, dict(calls)
    assert calls["SendCommand"] == 1
    assert sum(calls.values()) / n <= 0.05, dict(calls)


def test_s3_path_names_each_failure(aws: AwsStandIns, replay: Replay) -> None:
    ok = fleet(aws, replay, range(601, 611), tag="mixed")
    [lost] = fleet(aws, replay, range(611, 612), tag="mixed", behaviour="undeliverable")
    [slow] = fleet(aws, replay, range(612, 613), tag="mixed", delay_s=30)
    [unwritten] = fleet(aws, replay, range(613, 614), tag="mixed", s3_write=False)
    [gone] = fleet(aws, replay, range(614, 615), tag="gone")  # tag changed since discovery: never invoked
    settings = SSMSettings(poll_interval_s=0.2, s3_bucket=BUCKET, s3_prefix="mixed",
                           targets=(("tag:fleet", ("mixed",)),), max_concurrency="100%", max_errors="100%")
    every = ok + [lost, slow, unwritten, gone]
    by_index = dict(run_ssm_batch(specs(every, settings), probe_request(DEFAULT_BINARIES), deadline_s=3))
    out = {i: by_index[n] for n, i in enumerate(every)}
    assert all(isinstance(out[i], CommandResult) and not out[i].truncated for i in ok)
    assert isinstance(out[lost], Unreachable) and "Undeliverable" in str(out[lost])
    assert isinstance(out[slow], ProbeTimeout) and "Execution Timed Out" in str(out[slow])
    assert isinstance(out[gone], Unreachable) and "SSM never ran command" in str(out[gone])
    result = out[unwritten]  # SSM's own 24,000 characters, and why S3 was not read
    assert isinstance(result, CommandResult) and "S3 output object missing" in result.stderr
    calls = aws.endpoint.calls
    assert calls["GetCommandInvocation"] == 1  # only the instance whose output never reached S3
    assert calls["ListCommandInvocations"] == 1  # one page settles the 4 failures once the command is done


@pytest.mark.parametrize("bucket", [BUCKET, None], ids=["s3-prefix", "invocation-pages"])
def test_outputs_are_yielded_before_the_last_instance_finishes(aws: AwsStandIns, replay: Replay,
                                                               bucket: str | None) -> None:
    base = 701 if bucket else 731  # instance ids of their own: invocations stay in the endpoint
    fast = fleet(aws, replay, range(base, base + 20))
    [slow] = fleet(aws, replay, range(base + 20, base + 21), delay_s=6)
    settings = SSMSettings(poll_interval_s=0.2, s3_bucket=bucket, s3_prefix="early")
    request = probe_request(DEFAULT_BINARIES)
    started = time.monotonic()
    seen: list[tuple[float, bool]] = []  # (when, was the slow instance done at that moment?)
    for _, outcome in run_ssm_batch(specs(fast + [slow], settings), request, deadline_s=30):
        assert isinstance(outcome, CommandResult), outcome
        [inv] = [v for (_, i), v in aws.endpoint.invocations.items() if i == slow]
        seen.append((time.monotonic() - started, inv.status == "Success"))
    assert len(seen) == 21
    assert sum(not done for _, done in seen) >= 15, seen  # most outputs parsed while the slow one still ran
    assert seen[-1][1]


def test_a_scan_gets_each_ssm_host_while_the_batch_still_runs(aws: AwsStandIns, replay: Replay) -> None:
    """The scan's own door (live_hosts.iter_hosts): SSM hosts arrive one by one as their outputs are read, each
    already a snapshot, not as one list when the last instance is done."""
    fast = fleet(aws, replay, range(761, 781))
    [slow] = fleet(aws, replay, range(781, 782), delay_s=6)
    settings = SSMSettings(poll_interval_s=0.2, s3_bucket=BUCKET, s3_prefix="scan")
    seen: list[bool] = []  # per host as it arrives: was the slow instance done at that moment?
    for _, result in iter_hosts(specs(fast + [slow], settings), deadline_s=30):
        assert result.status == "ok" and result.snapshot is not None, result.error
        [inv] = [v for (_, i), v in aws.endpoint.invocations.items() if i == slow]
        seen.append(inv.status == "Success")
    assert len(seen) == 21 and seen[-1]
    assert sum(not done for done in seen) >= 15, seen  # most hosts handed over while the slow one still ran


def small_output(exit_status: int = 0) -> str:
    raw = framing.section_text(FIXTURE_NONCE, "os", 'ID=debian\nVERSION_ID="12"') + \
        framing.done_marker(FIXTURE_NONCE) + f"\n@@AMI-AUDITOR-EXIT {exit_status}@@\n"
    return f"{HEADER} gzip-base64\n{base64.b64encode(gzip.compress(raw.encode(), mtime=0)).decode()}\n{FOOTER}\n"


def test_short_outputs_come_from_the_detailed_listing_alone(aws: AwsStandIns) -> None:
    ids = [iid(n) for n in range(801, 861)]
    for i in ids:
        aws.endpoint.add_instance(i, canned_runner(small_output()))
    outcomes = list(run_ssm_batch(specs(ids, SSMSettings(poll_interval_s=0.2)), probe_request(DEFAULT_BINARIES),
                                  deadline_s=30))
    assert sorted(i for i, _ in outcomes) == list(range(len(ids)))
    assert all(isinstance(o, CommandResult) and "ID=debian" in o.stdout and o.nonce for _, o in outcomes)
    calls = aws.endpoint.calls
    assert calls["GetCommandInvocation"] == 0 and calls["ListCommandInvocations"] >= 2, dict(calls)


def test_every_spec_gets_one_outcome_even_when_the_document_check_fails(aws: AwsStandIns) -> None:
    ids = [iid(n) for n in range(901, 904)]
    settings = SSMSettings(poll_interval_s=0.2, document="NoSuchDocument")
    out = list(run_ssm_batch(specs(ids + ids[:1], settings), probe_request(DEFAULT_BINARIES), deadline_s=10))
    assert sorted(i for i, _ in out) == [0, 1, 2, 3]
    assert all(isinstance(o, TransportError) and "install-document" in str(o) for _, o in out)


def test_an_unlistable_output_bucket_falls_back_to_ssm_with_a_note(aws: AwsStandIns, replay: Replay) -> None:
    ids = fleet(aws, replay, range(951, 956))
    settings = SSMSettings(poll_interval_s=0.2, s3_bucket="no-such-bucket", s3_prefix="x")
    notes: list[str] = []
    out = dict(run_ssm_batch(specs(ids, settings), probe_request(DEFAULT_BINARIES), deadline_s=20, notes=notes))
    assert all(isinstance(o, CommandResult) and not o.truncated for o in out.values()), out
    assert any("could not be listed in S3" in n and "NoSuchBucket" in n for n in notes), notes
    assert aws.endpoint.calls["GetCommandInvocation"] == len(ids)  # the price, named in the note
