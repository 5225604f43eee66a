"""EC2 discovery over real HTTP against moto's server (EC2), joined with the local SSM endpoint (which
stands in for AWS Systems Manager: moto does not implement DescribeInstanceInformation)."""

from __future__ import annotations

import gc
import io
import json
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from auditor.aws.api import clients as aws_clients
from auditor.aws.ssm import SSMSettings
from auditor.cli import main
from auditor.context import Env
from auditor.errors import InputError
from auditor.targets.ec2 import Discovery, discover, parse_filter
from tests.ssm_endpoint import AwsStandIns, local_runner


@pytest.fixture(scope="module")
def aws() -> Iterator[AwsStandIns]:
    with AwsStandIns(visibility_lag_s=0.2) as a:
        a.install_probe_document()
        images = a.ec2.describe_images(Owners=["amazon"])["Images"]
        image, other = images[0]["ImageId"], images[1]["ImageId"]

        def launch(name: str, az: str, ami: str = image, cluster: str = "ml", count: int = 1) -> list[str]:
            tags = [{"Key": "cluster", "Value": cluster}] + ([{"Key": "Name", "Value": name}] if name else [])
            out = a.ec2.run_instances(ImageId=ami, MinCount=count, MaxCount=count, InstanceType="p4d.24xlarge",
                                      Placement={"AvailabilityZone": az},
                                      TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
            return [i["InstanceId"] for i in out["Instances"]]

        a.ids = {"a1": launch("a1", "us-east-1a")[0], "b1": launch("b1", "us-east-1b")[0],
                 "b2": launch("b2", "us-east-1b", ami=other)[0], "web": launch("web", "us-east-1a", cluster="web")[0],
                 "gone": launch("gone", "us-east-1a")[0]}
        a.ec2.stop_instances(InstanceIds=[a.ids["gone"]])
        a.unnamed = [launch("", "us-east-1b")[0] for _ in range(12)]  # 12 reservations: pages of 5
        a.image, a.other = image, other
        for name in ("a1", "b1", "b2"):
            a.endpoint.add_instance(a.ids[name], local_runner())
        a.endpoint.add_instance(a.unnamed[0], local_runner(), ping="ConnectionLost")
        yield a


def _discover(aws: AwsStandIns, *filters: str, **kw) -> list:
    d = Discovery(tuple(parse_filter(f) for f in filters), ssm=SSMSettings(region="us-east-1"), **kw)
    return discover(d)[0]


def test_tag_filter_finds_running_instances_with_labels(aws: AwsStandIns) -> None:
    specs = {s.name: s for s in _discover(aws, "tag:cluster=ml")}
    assert {"a1", "b1", "b2"} <= set(specs) and "web" not in specs and "gone" not in specs  # running by default
    a1 = specs["a1"]
    assert a1.target == f"ssm://{aws.ids['a1']}?region=us-east-1"
    assert a1.labels["az"] == "us-east-1a" and a1.labels["az_id"].startswith("use1-az")
    assert a1.labels["ami_id"] == aws.image and a1.labels["instance_type"] == "p4d.24xlarge"
    assert a1.labels["cluster"] == "ml" and a1.labels["ssm_ping"] == "Online"
    unnamed = [s for s in specs.values() if s.name.startswith("i-")]
    assert len(unnamed) == 12  # no Name tag: named by instance id
    states = {s.labels["ssm_ping"] for s in unnamed}
    assert states == {"ConnectionLost", "NotManaged"}


def test_image_state_and_az_filters(aws: AwsStandIns) -> None:
    assert [s.name for s in _discover(aws, "tag:cluster=ml", f"image-id={aws.other}")] == ["b2"]
    assert [s.name for s in _discover(aws, "tag:Name=gone", "instance-state-name=stopped")] == ["gone"]
    b_side = _discover(aws, "tag:cluster=ml", "availability-zone=us-east-1b")
    assert {s.labels["az"] for s in b_side} == {"us-east-1b"} and len(b_side) == 14


def test_describe_instances_is_paginated(aws: AwsStandIns) -> None:
    ec2, ssm = aws_clients("us-east-1", None, "ec2", "ssm")
    pages: list[int] = []
    ec2.meta.events.register("after-call.ec2.DescribeInstances", lambda **kw: pages.append(1))
    d = Discovery((parse_filter("tag:cluster=ml"),), page_size=5, ssm=SSMSettings(region="us-east-1"))
    specs, _ = discover(d, clients=(ec2, ssm))
    assert len(specs) == 15 and len(pages) >= 3


class _Mark:
    """Put into each instance description DescribeInstances returns: alive while discovery holds it."""


def test_discovery_does_not_hold_every_page(aws: AwsStandIns) -> None:
    """Each page is reduced to what discovery keeps as it is read: when the agents are looked up (after the
    last page), at most one page of whole descriptions is still alive, not every instance's."""
    ec2, ssm = aws_clients("us-east-1", None, "ec2", "ssm")
    marks: list[weakref.ref[_Mark]] = []
    alive: list[int] = []

    def mark(parsed: dict, **_: object) -> None:
        for reservation in parsed.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                instance["_mark"] = m = _Mark()
                marks.append(weakref.ref(m))

    def count(**_: object) -> None:
        gc.collect()
        alive.append(sum(ref() is not None for ref in marks))

    ec2.meta.events.register("after-call.ec2.DescribeInstances", mark)
    ssm.meta.events.register("before-call.ssm.DescribeInstanceInformation", count)
    d = Discovery((parse_filter("tag:cluster=ml"),), page_size=5, ssm=SSMSettings(region="us-east-1"))
    specs, _ = discover(d, clients=(ec2, ssm))
    assert len(specs) == 15 and len(marks) == 15 and alive
    assert max(alive) <= 5, f"{max(alive)} whole descriptions held while the agents were looked up"


def test_via_ssh_uses_the_private_or_public_address(aws: AwsStandIns) -> None:
    raw = aws.ec2.describe_instances(InstanceIds=[aws.ids["a1"]])["Reservations"][0]["Instances"][0]
    [private] = _discover(aws, "tag:Name=a1", via="ssh")
    assert private.target == f"ssh://{raw['PrivateIpAddress']}"
    [public] = _discover(aws, "tag:Name=a1", via="ssh", ssh_address="public")
    assert public.target == f"ssh://{raw['PublicIpAddress']}"
    assert "ssm_ping" not in public.labels


@pytest.mark.parametrize("text", ["cluster=ml", "tag:cluster", "tag:=x", "availability-zone=", "bogus-filter=1"])
def test_bad_filters_are_input_errors(text: str) -> None:
    with pytest.raises(InputError):
        parse_filter(text)


def test_cli_bad_filter_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    err = io.StringIO()
    code = main(["collect", "--ec2", "cluster=ml", "-o", str(tmp_path / "out")], Env(io.StringIO(), err))
    assert code == 2 and "unknown filter 'cluster' (use tag:KEY" in err.getvalue()
    assert not (tmp_path / "out").exists()


def test_cli_no_match_exits_2(aws: AwsStandIns, tmp_path: Path) -> None:
    err = io.StringIO()
    code = main(["collect", "--ec2", "tag:cluster=nope", "-o", str(tmp_path / "o")], Env(io.StringIO(), err))
    assert code == 2 and "no EC2 instances match --ec2 tag:cluster=nope" in err.getvalue()


def test_cli_a_discovered_name_an_inventory_also_gives_names_both_and_sends_nothing(
        aws: AwsStandIns, tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("hosts:\n  - name: a1\n    target: ssh://root@127.0.0.1:1\n")
    sent = len(aws.endpoint.sent_commands)
    err = io.StringIO()
    code = main(["collect", "--ec2", "tag:cluster=ml", "-i", str(inventory), "--region", "us-east-1",
                 "-o", str(tmp_path / "out")], Env(io.StringIO(), err))
    assert code == 2, err.getvalue()
    assert f"host name 'a1' given twice by EC2 instance {aws.ids['a1']} (--ec2) (first: {inventory}:2)" \
        in err.getvalue()
    assert not (tmp_path / "out").exists()
    assert len(aws.endpoint.sent_commands) == sent  # no instance was sent the probe


def test_cli_collect_discovered_hosts_via_ssm(aws: AwsStandIns, tmp_path: Path) -> None:
    out = io.StringIO()
    code = main(["collect", "--ec2", "tag:cluster=ml", "--ec2", "availability-zone=us-east-1a,us-east-1b",
                 "--region", "us-east-1", "--ssm-poll-interval", "0.2", "-o", str(tmp_path)], Env(out, io.StringIO()))
    assert code == 3  # the ConnectionLost and unmanaged instances were not reached
    written = sorted(p.stem for p in tmp_path.glob("*.json"))
    assert written == ["a1", "b1", "b2"]
    snap = json.loads((tmp_path / "b2.json").read_text())
    assert snap["labels"]["ami_id"] == aws.other and snap["labels"]["az"] == "us-east-1b"
    assert "SSM agent ConnectionLost; no command sent" in out.getvalue()
    assert "not a managed instance" in out.getvalue()
