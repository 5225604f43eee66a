"""Tag-targeted SSM scans reading outputs from S3 (`scan --ec2 tag:… --via ssm --ssm-targets
--ssm-s3-bucket B`) when one instance's output, key or S3 read misbehaves: that host gets a named
status, every other host its own result, and the run its exit code (3: incomplete), never a crash.

Real HTTP throughout: moto's server (EC2 tags, S3 outputs) and the local SSM endpoint (tests/ssm_endpoint)
in replay mode, each instance answering with a recorded probe output carrying its own identity.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.transport.ssm_document import FOOTER, HEADER, decode_output
from tests.paths import ROOT
from tests.s3_fault_proxy import S3FaultProxy
from tests.ssm_endpoint import AwsStandIns
from tests.ssm_endpoint.recorded import recorded_document_output
from tests.ssm_endpoint.replay import _SCRIPT_NONCE, Identity, Replay

BUCKET = "tgt-out"
PREFIX = "ami-auditor"
N = 3
Mode = Callable[[Identity, str, str], str]  # (identity, nonce, its good output) -> what the instance prints


class Tagged:
    """N tagged instances; `mode[k]` replaces what instance k prints, `on_sent(command_id)` runs once sent."""

    def __init__(self, aws: AwsStandIns, replay: Replay):
        self.aws, self.replay = aws, replay
        self.ids: list[str] = []
        self.mode: dict[int, Mode] = {}
        image = aws.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        for k in range(N):
            tags = [{"Key": "fleet", "Value": "tgt"}, {"Key": "Name", "Value": f"h{k}"}]
            [inst] = aws.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1,
                                           TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
                                           Placement={"AvailabilityZone": "us-east-1a"})["Instances"]
            self.ids.append(inst["InstanceId"])
            ident = Identity(inst["InstanceId"], image, inst["InstanceType"], "us-east-1a", "use1-az1")
            aws.endpoint.add_instance(inst["InstanceId"], self.runner(k, ident))

    def runner(self, k: int, ident: Identity):
        def run(script: str, env: dict[str, str], timeout: float) -> tuple[str, str, int]:
            m = _SCRIPT_NONCE.search(script)
            nonce = env.get("SSM_nonce") or (m.group(1) if m else "")
            good = self.replay.answer(ident, nonce)
            return (self.mode[k](ident, nonce, good) if k in self.mode else good), "", 0
        return run

    def scan(self, tmp: Path, *extra: str, bucket: bool = True) -> tuple[int, dict[str, dict], dict, str]:
        """Exit code, hosts by name, the report and stderr of one `scan`."""
        argv = ["scan", "--ec2", "tag:fleet=tgt", "--via", "ssm", "--ssm-targets", "--region", "us-east-1",
                "--ssm-poll-interval", "0.2", "--no-store", "--format", "json", "--out", str(tmp),
                "--fail-on", "critical", "--deadline", "30", *extra]
        if bucket:
            argv += ["--ssm-s3-bucket", BUCKET, "--ssm-s3-prefix", PREFIX]
        stdout, stderr = io.StringIO(), io.StringIO()
        code = main(argv, Env(stdout, stderr))
        report = json.loads((tmp / "report.json").read_text()) if (tmp / "report.json").exists() else {}
        return code, {h["name"]: h for h in report.get("hosts", [])}, report, stderr.getvalue()


@pytest.fixture(scope="module")
def tagged() -> Iterator[Tagged]:
    with AwsStandIns(visibility_lag_s=0.2) as aws:
        aws.install_probe_document(BUCKET)
        yield Tagged(aws, Replay(recorded_document_output()))


@pytest.fixture(autouse=True)
def _reset(tagged: Tagged) -> Iterator[None]:
    yield
    tagged.mode.clear()
    for inst in tagged.aws.endpoint.instances.values():
        inst.s3_write, inst.behaviour = True, "run"


def framed(raw: str) -> str:
    """Probe stdout framed as the document's wrapper prints it."""
    return f"{HEADER} gzip-base64\n{base64.b64encode(gzip.compress(raw.encode(), mtime=0)).decode()}\n{FOOTER}\n"


def assert_only_h1_failed(code: int, hosts: dict[str, dict], err: str, why: str) -> None:
    assert code == 3, err
    assert hosts["h1"]["status"] == "error" and why in hosts["h1"]["error"], hosts["h1"]
    assert [hosts[h]["status"] for h in ("h0", "h2")] == ["ok", "ok"]


@pytest.mark.parametrize("bucket", [True, False], ids=["s3", "inline"])
def test_a_non_ascii_payload_is_that_hosts_error_not_a_crash(tagged: Tagged, tmp_path: Path, bucket: bool) -> None:
    tagged.mode[1] = lambda ident, nonce, good: f"{HEADER} gzip-base64\nH4sI\u00e9\u00e9\u00e9\u00e9\n{FOOTER}\n"
    code, hosts, _, err = tagged.scan(tmp_path, bucket=bucket)
    assert_only_h1_failed(code, hosts, err, "payload is not base64")


def test_s3_object_bytes_that_are_not_utf8_are_that_hosts_error(tagged: Tagged, tmp_path: Path) -> None:
    """The object is planted where the agent would write it (its own upload fails)."""
    tagged.aws.endpoint.instances[tagged.ids[1]].s3_write = False
    tagged.mode[1] = lambda ident, nonce, good: "x"  # SSM's own copy: not ours either
    real_send = tagged.aws.endpoint.op_SendCommand

    def send(req: dict) -> dict:
        answer = real_send(req)
        key = f"{PREFIX}/{answer['Command']['CommandId']}/{tagged.ids[1]}/awsrunShellScript/probe/stdout"
        tagged.aws.s3.put_object(Bucket=BUCKET, Key=key, Body=f"{HEADER} gzip-base64\nH4sI".encode()
                                + b"\xff\xfe\xfd\xfc" + f"\n{FOOTER}\n".encode())
        return answer

    code, hosts, _, err = planting(tagged, send, tmp_path)
    assert_only_h1_failed(code, hosts, err, "payload is not base64")


def planting(tagged: Tagged, send: Callable[[dict], dict], tmp: Path) -> tuple[int, dict[str, dict], dict, str]:
    """A scan whose SendCommand is answered by `send` (which plants objects once the command exists)."""
    tagged.aws.endpoint.op_SendCommand = send  # type: ignore[method-assign]
    try:
        return tagged.scan(tmp)
    finally:
        del tagged.aws.endpoint.op_SendCommand


@pytest.mark.parametrize("digits", ["9" * 5000, "9" * 20, "256", "-1", ""],
                         ids=["5000-digits", "20-digits", "256", "negative", "empty"])
def test_an_exit_mark_that_is_no_shell_status_is_that_hosts_named_error(tagged: Tagged, tmp_path: Path,
                                                                         digits: str) -> None:
    """Python refuses int() of > 4,300 digits (it crashed the scan); a 20-digit or negative status was
    silently ignored and the host passed."""
    tagged.mode[1] = lambda ident, nonce, good: framed(decode_output(good).stdout + f"@@AMI-AUDITOR-EXIT {digits}@@\n")
    code, hosts, _, err = tagged.scan(tmp_path)
    assert_only_h1_failed(code, hosts, err, "exit mark is not a shell status")


def test_output_framed_with_another_runs_nonce_is_named_replayed_or_forged(tagged: Tagged, tmp_path: Path) -> None:
    """It showed status ok, "probe did not finish (probe exited with status 0)" and every area missing."""
    tagged.mode[1] = lambda ident, nonce, good: tagged.replay.answer(ident, "0123456789abcdef" * 2)
    code, hosts, _, err = tagged.scan(tmp_path)
    assert_only_h1_failed(code, hosts, err, "no section carried this run's nonce: output replayed or forged")


def test_only_ssms_own_key_for_an_instance_is_read_and_only_ssm_says_where_it_ran(tagged: Tagged,
                                                                                 tmp_path: Path) -> None:
    """Any instance may write under the prefix (the same nonce went to all): a `<victim>/aaa/stdout`
    listed before the agent's own key replaced the victim's output; `junkdir/x/stdout` (and a well-formed
    id SSM never ran on) made a note that the command "also ran on" it."""
    victim = tagged.ids[1]
    real_send = tagged.aws.endpoint.op_SendCommand

    def send(req: dict) -> dict:
        answer = real_send(req)
        start = f"{PREFIX}/{answer['Command']['CommandId']}"
        forged = tagged.replay.answer(Identity(victim, "ami-0f0f0f0f0f0f0f0f0"), req["Parameters"]["nonce"][0])
        for key in (f"{victim}/aaa/stdout", f"{victim}/awsrunShellScript/0.awsrunShellScript/stdout",
                    "junkdir/x/stdout", "i-0000000000000dead/awsrunShellScript/probe/stdout"):
            tagged.aws.s3.put_object(Bucket=BUCKET, Key=f"{start}/{key}", Body=forged.encode())
        return answer

    hybrid = "mi-0123456789abcdef0"  # SSM does run on it (tagged, not in EC2): that one is noted
    tagged.aws.endpoint.add_instance(hybrid, tagged.runner(0, Identity(hybrid)), tags={"fleet": "tgt"})
    try:
        code, hosts, report, err = planting(tagged, send, tmp_path)
    finally:
        del tagged.aws.endpoint.instances[hybrid]
    assert code == 0, err
    h1 = hosts["h1"]
    assert h1["status"] == "ok" and h1["facts_summary"]["ami_id"] == h1["labels"]["ami_id"] != "ami-0f0f0f0f0f0f0f0f0"
    [note] = [n for n in report.get("notes") or [] if "also ran on" in n]
    assert f"also ran on 1 instance(s) EC2 discovery did not return ({hybrid})" in note


def is_listing(method: str, path: str) -> bool:
    return method == "GET" and "list-type=2" in path


@pytest.mark.parametrize("fault", ["slowdown", "denied"])
def test_only_a_refused_listing_switches_to_one_ssm_call_per_instance(tagged: Tagged, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      fault: str) -> None:
    """Two ListObjectsV2 calls throttled through all of botocore's attempts made the whole run read
    every instance with GetCommandInvocation, with a note to allow s3:ListBucket."""
    with S3FaultProxy(tagged.aws.moto_url) as proxy:
        throttled = iter(range(6))  # 2 calls × 3 attempts
        if fault == "slowdown":
            proxy.rules.append(lambda m, p: ("error", 503, "SlowDown", "Please reduce your request rate.")
                               if is_listing(m, p) and next(throttled, None) is not None else None)
        else:
            proxy.rules.append(lambda m, p: ("error", 403, "AccessDenied", "Access Denied")
                               if is_listing(m, p) else None)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
        tagged.aws.endpoint.calls.clear()
        code, hosts, report, err = tagged.scan(tmp_path)
    assert code == 0, err
    assert [h["status"] for h in hosts.values()] == ["ok"] * N
    fallback = [n for n in report.get("notes") or [] if "could not be listed in S3" in n]
    per_instance = tagged.aws.endpoint.calls["GetCommandInvocation"]
    if fault == "slowdown":
        assert not fallback and per_instance == 0, (fallback, per_instance)
        assert next(throttled, None) is None  # the fault really happened
    else:
        assert "AccessDenied" in fallback[0] and per_instance == N


def reading(iid: str) -> Callable[[str, str], bool]:
    return lambda method, path: method == "GET" and iid in path and "list-type" not in path


def test_s3_reads_are_bounded_by_the_deadline(tagged: Tagged, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """h1's object trickles in (100 bytes every 2 s), h2's GetObject never answers: a `--deadline 10`
    scan took 369 s, and a hung read 126 s (4 tries × 30 s) then "no output in S3 yet"."""
    with S3FaultProxy(tagged.aws.moto_url) as proxy:
        proxy.rules += [lambda m, p: ("trickle", 2.0, 100) if reading(tagged.ids[1])(m, p) else None,
                        lambda m, p: ("hang",) if reading(tagged.ids[2])(m, p) else None]
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
        started = time.monotonic()
        tagged.aws.endpoint.calls.clear()
        code, hosts, report, err = tagged.scan(tmp_path, "--deadline", "10")
        took = time.monotonic() - started
        assert {a for _, _, a in proxy.seen} >= {"trickle", "hang"}, (proxy.seen, tagged.ids, hosts)
    assert took < 60, f"{took:.0f} s"  # each read gives up after 5 s (half the deadline), not minutes later
    # settled from SSM's own status and output (whole here), saying why
    assert [h["status"] for h in hosts.values()] == ["ok"] * N, hosts
    [note] = [n for n in report.get("notes") or [] if "ran out of time" in n]
    assert tagged.ids[1] in note and tagged.ids[2] in note and "settled from SSM's own status" in note
    assert tagged.aws.endpoint.calls["GetCommandInvocation"] == 2
    assert code == 0, err


def test_sigterm_ends_the_scan_while_an_s3_read_is_stuck(tagged: Tagged, tmp_path: Path) -> None:
    """The read pool's threads were joined at interpreter exit: exit 143 came only once the stuck
    GetObject gave up (124 s with the old timeouts, ~20 s with the S3 client's own)."""
    with S3FaultProxy(tagged.aws.moto_url) as proxy:
        proxy.rules.append(lambda m, p: ("hang",) if reading(tagged.ids[1])(m, p) else None)
        argv = ["scan", "--ec2", "tag:fleet=tgt", "--via", "ssm", "--ssm-targets", "--region", "us-east-1",
                "--ssm-poll-interval", "0.2", "--no-store", "--format", "json", "--out", str(tmp_path),
                "--deadline", "120", "--ssm-s3-bucket", BUCKET, "--ssm-s3-prefix", PREFIX]
        env = {**os.environ, "AWS_ENDPOINT_URL_S3": proxy.url, "PYTHONPATH": str(ROOT)}
        child = subprocess.Popen([sys.executable, "-c", "import sys\nfrom auditor.cli import main\nsys.exit(main())",
                                  *argv], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            while not any(a == "hang" for _, _, a in proxy.seen) and child.poll() is None:
                time.sleep(0.1)
            assert child.poll() is None, child.communicate()
            child.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            child.wait(timeout=120)
            took = time.monotonic() - signalled
        finally:
            if child.poll() is None:
                child.kill()
            child.communicate()
    assert child.returncode == 143
    assert took < 10, f"{took:.1f} s"  # a stop takes ~2 s; the stuck read would have held it ~20 s


def test_one_straggler_at_the_deadline_does_not_hide_the_others_statuses(tagged: Tagged, tmp_path: Path) -> None:
    """h0 is never delivered (still Pending at the deadline), h1 succeeded but its S3 upload failed (SSM holds
    the output), h2 is undeliverable: all three were "timeout … no output in S3 yet; command cancelled"."""
    instances = tagged.aws.endpoint.instances
    instances[tagged.ids[0]].behaviour = "offline"
    instances[tagged.ids[1]].s3_write = False
    instances[tagged.ids[2]].behaviour = "undeliverable"
    tagged.aws.endpoint.calls.clear()
    code, hosts, _, err = tagged.scan(tmp_path, "--deadline", "10")
    assert code == 3, err
    assert hosts["h0"]["status"] == "timeout" and "last status Pending" in hosts["h0"]["error"], hosts["h0"]
    # ~20 s of idle rounds (0.2 s growing to 1 s) asked ListCommands every round (~25 calls): it backs off
    # (after 0.4, 0.8, … 16 s); the 3 stragglers are listed one by one (not every page of the command)
    calls = tagged.aws.endpoint.calls
    assert calls["ListCommands"] <= 8 and calls["ListCommandInvocations"] <= 3, dict(calls)
    assert hosts["h1"]["status"] == "ok", hosts["h1"]  # read from SSM's own copy
    assert hosts["h2"]["status"] == "unreachable" and "Undeliverable" in hosts["h2"]["error"], hosts["h2"]


def test_another_instances_output_is_not_taken_for_this_ones(tagged: Tagged, tmp_path: Path) -> None:
    """h2 prints h0's output (the right nonce: every targeted instance has it); it was ok, h0's id, exit 0."""
    tagged.mode[2] = lambda ident, nonce, good: tagged.replay.answer(Identity(tagged.ids[0], ident.ami_id), nonce)
    code, hosts, _, err = tagged.scan(tmp_path)
    assert code == 3, err
    assert hosts["h2"]["status"] == "error", hosts["h2"]
    assert tagged.ids[0] in hosts["h2"]["error"] and tagged.ids[2] in hosts["h2"]["error"]
    assert [hosts[h]["status"] for h in ("h0", "h1")] == ["ok", "ok"]
