"""The real fleet scanned several ways gives the same answers: `--ec2 tag:…` + SSM (instance-id batches
and tag Targets), `--ec2 tag:… --via ssh` with the fleet's key and known_hosts, and the SSH inventory.

EC2 is moto's server (instances tagged like the fleet hosts, their private IPs the hosts' 127.0.2.x
addresses: moto accepts a VPC and subnets in 127.0.0.0/8); SSM is the local endpoint in
tests/ssm_endpoint, which stands in for AWS Systems Manager and runs the document's script inside
the matching fleet host (its namespaces, as root, as the SSM agent would).
"""

from __future__ import annotations

import io
import ipaddress
import json
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.compare.normalize import normalize
from auditor.context import Env
from tests.fleet import Fleet
from tests.ssm_endpoint import AwsStandIns, fleet_runner

pytestmark = pytest.mark.fleet


def _scan(argv: list[str], out: Path) -> tuple[int, dict]:
    # --no-store: each test scans the same hosts twice (two ways in); the second must not judge the
    # first as its previous scan (trend rules), the two are compared as equals
    code = main(["scan", *argv, "--format", "json", "--out", str(out), "--fail-on", "critical", "--no-store"],
                Env(io.StringIO(), io.StringIO()))
    return code, json.loads((out / "report.json").read_text())


def _findings(report: dict) -> set[tuple]:
    return {(f["host"], f["rule"], f.get("item"), f["severity"]) for f in report["findings"]}


def _collect(argv: list[str], out: Path) -> int:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["collect", *argv, "-o", str(out)], Env(stdout, stderr))
    print(stdout.getvalue(), stderr.getvalue())  # shown when a test fails
    return code


def _views(out: Path) -> dict[str, dict]:
    return {p.stem: normalize(json.loads(p.read_text())).flat for p in sorted(out.glob("*.json"))}


def _same_views(a: dict[str, dict], b: dict[str, dict], names: list[str]) -> None:
    assert sorted(a) == names == sorted(b)
    for name in names:
        differ = {k for k in a[name].keys() | b[name].keys() if a[name].get(k) != b[name].get(k)}
        assert not differ, f"{name}: {sorted(differ)[:10]}"


def _launch_at_fleet_addresses(aws: AwsStandIns, fleet: Fleet) -> None:
    """One moto instance per fleet host, tagged cluster=fleet-ssh (moto's in-process state outlives a
    server: a tag of its own keeps the other test's instances apart), its PrivateIpAddress the host's
    address (a /28 subnet per AZ and address block, as a VPC would have)."""
    image = aws.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    vpc = aws.ec2.create_vpc(CidrBlock="127.0.0.0/16")["Vpc"]["VpcId"]
    subnets: dict[Any, tuple[str, str]] = {}
    for h in fleet.hosts:
        net = ipaddress.ip_network(f"{h.address}/28", strict=False)
        if net not in subnets:
            sub = aws.ec2.create_subnet(VpcId=vpc, CidrBlock=str(net), AvailabilityZone=h.az)["Subnet"]["SubnetId"]
            subnets[net] = (sub, h.az)
        sub, az = subnets[net]
        assert az == h.az, f"{h.name}: {net} already holds {az} hosts"
        tags = [{"Key": "Name", "Value": h.name}, {"Key": "cluster", "Value": "fleet-ssh"}]
        [inst] = aws.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, SubnetId=sub,
                                       PrivateIpAddress=h.address,
                                       TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"]
        assert inst["PrivateIpAddress"] == h.address


def test_fleet_discovered_in_ec2_and_scanned_via_ssh_with_the_fleet_key(fleet_ready_crashloop: Fleet,
                                                                        tmp_path: Path) -> None:
    fleet = fleet_ready_crashloop
    names = sorted(h.name for h in fleet.hosts)
    with AwsStandIns() as aws:
        _launch_at_fleet_addresses(aws, fleet)
        ssh_args = ["--ec2", "tag:cluster=fleet-ssh", "--region", "us-east-1", "--via", "ssh", "--ssh-user", "root",
                    "--ssh-identity", str(fleet.identity_file), "--ssh-known-hosts", str(fleet.known_hosts)]
        assert _collect(ssh_args, tmp_path / "snap-ec2") == 0
        ec2_code, via_ec2 = _scan(ssh_args, tmp_path / "ec2")
        ssm_calls = sum(aws.endpoint.calls.values())
    assert _collect(["-i", str(fleet.inventory_path)], tmp_path / "snap-inv") == 0
    inv_code, via_inv = _scan(["-i", str(fleet.inventory_path)], tmp_path / "inv")

    assert ssm_calls == 0  # --via ssh: no SSM at all
    assert {h["name"]: h["status"] for h in via_ec2["hosts"]} == dict.fromkeys(names, "ok")
    b1 = next(h for h in via_ec2["hosts"] if h["name"] == "b1")
    assert b1["labels"]["az"] == "us-east-1b" and b1["labels"]["cluster"] == "fleet-ssh"
    _same_views(_views(tmp_path / "snap-ec2"), _views(tmp_path / "snap-inv"), names)
    assert ec2_code == inv_code
    assert _findings(via_ec2) == _findings(via_inv)
    assert {f[0] for f in _findings(via_ec2)} & {"b1", "b2", "b3"}


def test_fleet_via_ec2_and_ssm_gives_the_same_findings_as_ssh(fleet_ready_crashloop: Fleet, tmp_path: Path) -> None:
    fleet = fleet_ready_crashloop
    names = sorted(h.name for h in fleet.hosts)
    with AwsStandIns(visibility_lag_s=0.5) as aws:
        aws.install_probe_document()
        image = aws.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        for h in fleet.hosts:
            tags = [{"Key": "Name", "Value": h.name}, {"Key": "cluster", "Value": "fleet"}]
            [inst] = aws.ec2.run_instances(
                ImageId=image, MinCount=1, MaxCount=1, Placement={"AvailabilityZone": h.az},
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"]
            aws.endpoint.add_instance(inst["InstanceId"], fleet_runner(fleet, h.name))
        ssm_args = ["--ec2", "tag:cluster=fleet", "--region", "us-east-1", "--ssm-poll-interval", "0.5",
                    "--deadline", "90"]
        assert _collect(ssm_args, tmp_path / "snap-ssm") == 0
        ssm_code, via_ssm = _scan(ssm_args, tmp_path / "ssm")
        calls = dict(aws.endpoint.calls)
        aws.endpoint.calls.clear()
        # tag Targets, at most 3 hosts at once: one SendCommand, the same snapshots
        assert _collect([*ssm_args, "--ssm-targets", "--ssm-max-concurrency", "3"], tmp_path / "snap-tags") == 0
        tag_calls = dict(aws.endpoint.calls)
        [tag_command] = [c for c in aws.endpoint.command_info.values() if "Targets" in c.request]
    assert _collect(["-i", str(fleet.inventory_path)], tmp_path / "snap-ssh") == 0
    ssh_code, via_ssh = _scan(["-i", str(fleet.inventory_path)], tmp_path / "ssh")

    # one SendCommand per scan for 7 hosts, one output fetch per host per scan
    assert calls["SendCommand"] == 2 and calls["GetCommandInvocation"] == 2 * len(names)
    assert tag_calls["SendCommand"] == 1 and tag_calls["GetCommandInvocation"] == len(names)
    assert tag_command.peak == 3
    _same_views(_views(tmp_path / "snap-tags"), _views(tmp_path / "snap-ssm"), names)
    assert {h["name"]: h["status"] for h in via_ssm["hosts"]} == dict.fromkeys(names, "ok")
    assert via_ssm["hosts"][0]["labels"]["cluster"] == "fleet"

    # the same stable facts, host by host (volatile facts are not part of the normalized view)
    _same_views(_views(tmp_path / "snap-ssm"), _views(tmp_path / "snap-ssh"), names)

    # and the same findings and exit code
    assert ssm_code == ssh_code
    assert _findings(via_ssm) == _findings(via_ssh)
    assert {f[0] for f in _findings(via_ssm)} & {"b1", "b2", "b3"}  # the crash loop is found at all
