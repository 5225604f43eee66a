"""contrib/image-builder/ami-auditor-gate.yaml run as AWSTOE runs it (tests/awstoe.py) on fleet hosts made
Debian 12 instances (tests/deploy_host.py): S3Download of the wheel pip built from a real S3 endpoint
(moto's server on loopback), then each ExecuteBash step as written. The gate passes on an AZ-a host and
fails the pipeline on an AZ-b host, where ecs.service crash-loops."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.awstoe import StepResult, run_component
from tests.deploy_host import DebianInstance
from tests.fleet import Fleet
from tests.wheelhouse import ROOT, wheelhouse

COMPONENT = ROOT / "contrib/image-builder/ami-auditor-gate.yaml"
BUCKET = "pipeline-artifacts"
STATE = "var/tmp/ami-auditor"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wheelhouse")


@pytest.fixture(scope="module")
def s3(wheels: Path) -> Iterator[object]:
    """A real S3 endpoint holding the wheel under the name pip gave it (how a pipeline uploads it)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    client = boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=BUCKET)
    wheel = wheelhouse(wheels)
    client.upload_file(str(wheel), BUCKET, f"releases/{wheel.name}")
    client.upload_file(str(wheel), BUCKET, "releases/ami-auditor.whl")  # a wheel under a made-up name
    try:
        yield client
    finally:
        server.stop()


def gate(fleet: Fleet, name: str, wheels: Path, s3: object, key: str) -> tuple[list[StepResult], dict | None]:
    """The component's steps on host `name` with the wheel at `key`; the steps and the JSON report."""
    root = fleet.host(name).root
    with DebianInstance(root, wheels):
        try:
            steps = run_component(COMPONENT, {"WheelS3Uri": f"s3://{BUCKET}/{key}"}, root, s3,
                                  lambda script: fleet.exec(name, ["bash", script], timeout=600))
            report = root / STATE / "report/report.json"
            return steps, json.loads(report.read_text()) if report.exists() else None
        finally:
            for path in (STATE, "var/tmp/awstoe"):
                fleet.exec(name, ["rm", "-rf", f"/{path}"])


def _wheel_key(wheels: Path) -> str:
    return f"releases/{next(wheels.glob('ami_auditor-*.whl')).name}"


@pytest.mark.fleet
def test_gate_installs_from_s3_and_passes_on_an_az_a_host(fleet: Fleet, wheels: Path, s3: object) -> None:
    steps, report = gate(fleet, "a1", wheels, s3, _wheel_key(wheels))
    assert [(s.name, s.exit_code) for s in steps] == [("DownloadAuditor", 0), ("InstallAuditor", 0), ("RunGate", 0)], \
        steps[-1].output
    assert "InstallAuditor: ami-auditor 0.1.0 with Python 3.11" in steps[1].output
    assert "ami-auditor exited 0" in steps[2].output
    assert report is not None and [h["status"] for h in report["hosts"]] == ["ok"]


@pytest.mark.fleet
def test_gate_fails_the_pipeline_on_an_az_b_host(fleet_ready_crashloop: Fleet, wheels: Path, s3: object) -> None:
    steps, report = gate(fleet_ready_crashloop, "b1", wheels, s3, _wheel_key(wheels))
    assert [(s.name, s.exit_code) for s in steps] == [("DownloadAuditor", 0), ("InstallAuditor", 0), ("RunGate", 1)], \
        steps[-1].output
    high = [f for f in report["findings"] if f["severity"] in ("high", "critical")] if report else []
    assert any("ecs.service" in json.dumps(f) for f in high), report


@pytest.mark.fleet
def test_a_wheel_not_under_its_own_name_fails_install_with_one_line(fleet: Fleet, wheels: Path, s3: object) -> None:
    steps, _ = gate(fleet, "a1", wheels, s3, "releases/ami-auditor.whl")
    assert [(s.name, s.exit_code) for s in steps] == [("DownloadAuditor", 0), ("InstallAuditor", 1)]
    assert steps[1].output.strip().splitlines() == [
        "InstallAuditor: WheelS3Uri must end in the wheel's own file name (ami_auditor-VERSION-py3-none-any.whl), "
        "got ami-auditor.whl"]
