"""Tag-targeted SSM (`--ssm-targets`): ONE SendCommand with `Targets`, MaxConcurrency and MaxErrors.

Real HTTP throughout: boto3 → moto's server (EC2: the instances and their tags) and the local SSM
endpoint (tests/ssm_endpoint), which stands in for AWS Systems Manager: it resolves the tag Targets
itself (against EC2's tags, or a registry tag that differs, as when a tag changed after discovery),
runs at most MaxConcurrency scripts at once and stops sending once failures exceed MaxErrors.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from auditor.cli import build_parser, main
from auditor.commands.aws_options import aws_from_args
from auditor.compare.normalize import normalize
from auditor.context import Env
from auditor.run.live_hosts import collect_hosts
from auditor.targets.resolve import discovered_hosts
from auditor.transport.ssm_document import DOCUMENT_NAME
from tests.ssm_endpoint import AwsStandIns, canned_runner, local_runner
from tests.ssm_endpoint.recorded import recorded_document_output

HYBRID = "mi-0123456789abcdef0"  # a managed on-prem node carrying the tag: SSM targets it, EC2 cannot list it


@pytest.fixture(scope="module")
def recorded() -> str:
    return recorded_document_output()


@pytest.fixture(scope="module")
def aws(recorded: str) -> Iterator[AwsStandIns]:
    with AwsStandIns(visibility_lag_s=0.3) as a:
        a.install_probe_document()
        image = a.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]

        def launch(name: str, **tags: str) -> str:
            tag_list = [{"Key": "Name", "Value": name}] + [{"Key": k, "Value": v} for k, v in tags.items()]
            spec = [{"ResourceType": "instance", "Tags": tag_list}]
            [inst] = a.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=spec)["Instances"]
            return inst["InstanceId"]

        a.ids = {}
        for name in ("t1", "t2", "t3"):  # the real probe, run on this machine
            a.ids[name] = launch(name, cluster="tt", role="probe")
            a.endpoint.add_instance(a.ids[name], local_runner())
        for name in ("m1", "m2", "m3", "m4"):
            a.ids[name] = launch(name, cluster="mix")
        a.endpoint.add_instance(a.ids["m1"], canned_runner(recorded))
        a.endpoint.add_instance(a.ids["m2"], canned_runner(recorded))
        a.endpoint.add_instance(a.ids["m3"], canned_runner(recorded), ping="ConnectionLost")
        # retagged after discovery: SSM resolves cluster=elsewhere, so it never invokes m4
        a.endpoint.add_instance(a.ids["m4"], canned_runner(recorded), tags={"Name": "m4", "cluster": "elsewhere"})
        a.endpoint.add_instance(HYBRID, canned_runner(recorded), tags={"cluster": "mix"})
        yield a


@pytest.fixture(autouse=True)
def _reset(aws: AwsStandIns) -> None:
    aws.endpoint.calls.clear()
    aws.endpoint.sent_commands.clear()
    aws.endpoint.executed.clear()


def _collect(argv: list[str], out: Path) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["collect", *argv, "--region", "us-east-1", "--ssm-poll-interval", "0.2", "-o", str(out)],
                Env(stdout, stderr))
    return code, stdout.getvalue(), stderr.getvalue()


def _command(aws: AwsStandIns):
    """The endpoint's record of the last command sent."""
    [cmd] = [c for c in aws.endpoint.command_info.values() if c.request is aws.endpoint.sent_commands[-1]]
    return cmd


def _views(out: Path) -> dict[str, dict]:
    return {p.stem: normalize(json.loads(p.read_text())).flat for p in sorted(out.glob("*.json"))}


def test_tag_targets_give_the_same_snapshots_as_instance_ids_with_one_sendcommand(aws: AwsStandIns,
                                                                                  tmp_path: Path) -> None:
    select = ["--ec2", "tag:cluster=tt", "--ec2", "tag:role=probe"]
    assert _collect(select, tmp_path / "ids")[0] == 0
    assert aws.endpoint.sent_commands[0]["InstanceIds"] and "Targets" not in aws.endpoint.sent_commands[0]
    aws.endpoint.calls.clear()
    aws.endpoint.sent_commands.clear()

    code, _, err = _collect([*select, "--ssm-targets", "--ssm-max-concurrency", "2"], tmp_path / "tags")
    assert code == 0, err
    [sent] = aws.endpoint.sent_commands
    assert sent["Targets"] == [{"Key": "tag:cluster", "Values": ["tt"]}, {"Key": "tag:role", "Values": ["probe"]}]
    assert "InstanceIds" not in sent
    assert (sent["MaxConcurrency"], sent["MaxErrors"]) == ("2", "10%")
    # two waves of the 60 s default deadline: queued invocations must still be deliverable
    assert sent["TimeoutSeconds"] == 120 and sent["Parameters"]["executionTimeout"] == ["60"]
    assert _command(aws).peak == 2 and _command(aws).max_concurrency == 2
    calls = aws.endpoint.calls
    assert calls["SendCommand"] == 1 and calls["GetCommandInvocation"] == 3
    assert calls["ListCommands"] == 0  # nothing awaited went missing: no command-status lookups

    by_ids, by_tags = _views(tmp_path / "ids"), _views(tmp_path / "tags")
    assert sorted(by_tags) == ["t1", "t2", "t3"] == sorted(by_ids)
    for name in by_ids:
        differ = {k for k in by_ids[name].keys() | by_tags[name].keys() if by_ids[name].get(k) != by_tags[name].get(k)}
        assert not differ, f"{name}: {sorted(differ)[:10]}"


def test_max_concurrency_is_never_exceeded(aws: AwsStandIns, tmp_path: Path) -> None:
    code, _, err = _collect(["--ec2", "tag:cluster=tt", "--ssm-targets", "--ssm-max-concurrency", "1"], tmp_path)
    assert code == 0, err
    assert _command(aws).peak == 1 and _command(aws).max_concurrency == 1
    assert sorted(aws.endpoint.executed) == sorted(aws.ids[n] for n in ("t1", "t2", "t3"))


def test_never_invoked_and_unknown_instances(aws: AwsStandIns, tmp_path: Path) -> None:
    code, out, err = _collect(["--ec2", "tag:cluster=mix", "--ssm-targets"], tmp_path)
    assert code == 3  # m3 and m4 were not audited
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("m")}
    assert lines["m1"].split()[1] == lines["m2"].split()[1] == "ok"
    assert "unreachable" in lines["m3"] and "SSM agent ConnectionLost; no command sent" in lines["m3"]
    assert "unreachable" in lines["m4"] and "SSM never ran command" in lines["m4"]
    assert "tag:cluster=mix" in lines["m4"]
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == ["m1", "m2"]
    # the hybrid node SSM resolved from the tag ran the probe: named in a note, not fetched, not a host
    assert f"also ran on 1 instance(s) EC2 discovery did not return ({HYBRID})" in err
    calls = aws.endpoint.calls
    assert calls["SendCommand"] == 1 and calls["GetCommandInvocation"] == 2
    assert calls["ListCommands"] >= 1
    assert aws.endpoint.executed[HYBRID] == 1 and aws.endpoint.executed[aws.ids["m4"]] == 0


def test_max_errors_stops_dispatch(aws: AwsStandIns, recorded: str) -> None:
    image = aws.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ids = sorted(i["InstanceId"] for i in aws.ec2.run_instances(
        ImageId=image, MinCount=6, MaxCount=6,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "cluster", "Value": "err"}]}])["Instances"])
    for n, iid in enumerate(ids):  # the endpoint sends in instance-id order; the first two fail
        runner = canned_runner("", "sh: cannot run", 2) if n < 2 else canned_runner(recorded)
        aws.endpoint.add_instance(iid, runner)
    args = build_parser().parse_args(["collect", "--ec2", "tag:cluster=err", "--region", "us-east-1", "--ssm-targets",
                                      "--ssm-max-concurrency", "1", "--ssm-max-errors", "1",
                                      "--ssm-poll-interval", "0.2"])
    specs = sorted(discovered_hosts(aws_from_args(args)), key=lambda s: s.labels["instance_id"])
    notes: list[str] = []
    results = collect_hosts(specs, deadline_s=30, notes=notes)
    assert [r.status for r in results] == ["error"] * 6
    assert all("SSM Failed/Failed (ResponseCode 2)" in r.error for r in results[:2])
    for r in results[2:]:
        assert "Terminated" in r.error and "MaxErrors=1" in r.error
    assert sum(aws.endpoint.executed[i] for i in ids) == 2  # SSM stopped sending after the second failure
    assert aws.endpoint.calls["SendCommand"] == 1 and not notes


def test_the_endpoint_enforces_target_limits(aws: AwsStandIns) -> None:
    six = [{"Key": f"tag:k{i}", "Values": ["v"]} for i in range(6)]
    with pytest.raises(ClientError) as info:
        aws.ssm.send_command(DocumentName=DOCUMENT_NAME, Targets=six)
    assert info.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError) as info:
        aws.ssm.send_command(DocumentName=DOCUMENT_NAME, Targets=six[:1], InstanceIds=[aws.ids["m1"]])
    assert info.value.response["Error"]["Code"] == "ValidationException"


@pytest.mark.parametrize(("argv", "message"), [
    (["--ec2", "tag:cluster=mix", "--ec2", "image-id=ami-1", "--ssm-targets"], "SSM cannot express image-id=ami-1"),
    (["--ec2", "instance-state-name=running", "--ssm-targets"], "without a tag filter"),
    ([*(a for i in range(6) for a in ("--ec2", f"tag:k{i}=v")), "--ssm-targets"], "at most 5 tag keys"),
    (["--ec2", "tag:cluster=mix", "--ssm-max-errors", "2"], "--ssm-max-errors needs --ssm-targets"),
    (["--ec2", "tag:cluster=mix", "--ssm-targets", "--ssm-max-concurrency", "0"], "bad MaxConcurrency '0'"),
    (["--ec2", "tag:cluster=mix", "--ssm-targets", "--via", "ssh"], "--ssm-targets needs --ec2 tag:KEY"),
    (["ssm://i-0123456789abcdef0", "--ssm-targets"], "--ssm-targets needs --ec2 tag:KEY"),
    (["--ec2", "tag:cluster=mix", "--ssh-known-hosts", "/etc/hostname"], "applies to ssh:// hosts"),
    (["--ec2", "tag:cluster=mix", "--via", "ssh", "--ssh-identity", "/nonexistent/key"], "no such file"),
])
def test_option_misuse_exits_2_before_any_aws_call(aws: AwsStandIns, tmp_path: Path, argv: list[str],
                                                   message: str) -> None:
    code, _, err = _collect(argv, tmp_path / "o")
    assert code == 2 and message in err
    assert not aws.endpoint.calls and not (tmp_path / "o").exists()


def test_ssh_files_flow_into_every_discovered_host(aws: AwsStandIns, tmp_path: Path) -> None:
    files = {n: tmp_path / n for n in ("key", "known_hosts", "ssh_config")}
    for f in files.values():
        f.write_text("")
    args = build_parser().parse_args(["collect", "--ec2", "tag:cluster=mix", "--region", "us-east-1", "--via", "ssh",
                                      "--ssh-user", "root", "--ssh-identity", str(files["key"]),
                                      "--ssh-known-hosts", str(files["known_hosts"]),
                                      "--ssh-config", str(files["ssh_config"])])
    specs = discovered_hosts(aws_from_args(args))
    assert sorted(s.name for s in specs) == ["m1", "m2", "m3", "m4"]
    for s in specs:
        assert s.target.startswith("ssh://root@")
        assert (s.ssh.user, s.ssh.identity_file, s.ssh.known_hosts, s.ssh.ssh_config) == (
            "root", str(files["key"]), str(files["known_hosts"]), str(files["ssh_config"]))
