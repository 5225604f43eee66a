"""The real fleet scanned two ways gives the same answers: `--ec2 tag:… ` + SSM vs SSH.

EC2 is moto's server (instances tagged like the fleet hosts); SSM is the local endpoint in
tests/ssm_endpoint, which stands in for AWS Systems Manager and runs the document's script inside
the matching fleet host (its namespaces, as root, as the SSM agent would).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.collect.probe import DEFAULT_BINARIES, probe_script
from auditor.compare.normalize import normalize
from auditor.context import Env
from auditor.transport.ssm_document import DOCUMENT_NAME, document_json
from tests.fleet import Fleet
from tests.ssm_endpoint import AwsStandIns, fleet_runner

pytestmark = pytest.mark.fleet


def _scan(argv: list[str], out: Path) -> tuple[int, dict]:
    code = main(["scan", *argv, "--format", "json", "--out", str(out), "--fail-on", "critical"],
                Env(io.StringIO(), io.StringIO()))
    return code, json.loads((out / "report.json").read_text())


def _findings(report: dict) -> set[tuple]:
    return {(f["host"], f["rule"], f.get("item"), f["severity"]) for f in report["findings"]}


def _collect(argv: list[str], out: Path) -> int:
    return main(["collect", *argv, "-o", str(out)], Env(io.StringIO(), io.StringIO()))


def _views(out: Path) -> dict[str, dict]:
    return {p.stem: normalize(json.loads(p.read_text())).flat for p in sorted(out.glob("*.json"))}


def test_fleet_via_ec2_and_ssm_gives_the_same_findings_as_ssh(fleet_ready_crashloop: Fleet, tmp_path: Path) -> None:
    fleet = fleet_ready_crashloop
    names = sorted(h.name for h in fleet.hosts)
    with AwsStandIns(visibility_lag_s=0.5) as aws:
        aws.ssm.create_document(Name=DOCUMENT_NAME, Content=document_json(probe_script(), list(DEFAULT_BINARIES)),
                                DocumentType="Command", DocumentFormat="JSON")
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
    assert _collect(["-i", str(fleet.inventory_path)], tmp_path / "snap-ssh") == 0
    ssh_code, via_ssh = _scan(["-i", str(fleet.inventory_path)], tmp_path / "ssh")

    # one SendCommand per scan for 7 hosts, one output fetch per host per scan
    assert calls["SendCommand"] == 2 and calls["GetCommandInvocation"] == 2 * len(names)
    assert {h["name"]: h["status"] for h in via_ssm["hosts"]} == dict.fromkeys(names, "ok")
    assert via_ssm["hosts"][0]["labels"]["cluster"] == "fleet"

    # the same stable facts, host by host (volatile facts are not part of the normalized view)
    ssm_views, ssh_views = _views(tmp_path / "snap-ssm"), _views(tmp_path / "snap-ssh")
    assert sorted(ssm_views) == names
    for name in names:
        differ = {k for k in ssm_views[name].keys() | ssh_views[name].keys()
                  if ssm_views[name].get(k) != ssh_views[name].get(k)}
        assert not differ, f"{name}: {sorted(differ)[:10]}"

    # and the same findings and exit code
    assert ssm_code == ssh_code
    assert _findings(via_ssm) == _findings(via_ssh)
    assert {f[0] for f in _findings(via_ssm)} & {"b1", "b2", "b3"}  # the crash loop is found at all
