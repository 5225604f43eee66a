"""SSM faults from the local endpoint (tests/ssm_endpoint, standing in for AWS Systems Manager; it runs the
document's script inside fleet hosts): Undeliverable, execution TimedOut, throttling (a few calls, and
every call), and the S3 output object gone when the scanner reads it.

The inventory: golden and a1 over SSH (healthy), a2 over SSM (healthy, same batch as the fault) and a3 over
SSM (the fault). The real CLI runs in its own process, pointed at the endpoint by botocore's
AWS_ENDPOINT_URL_* variables.
"""

from __future__ import annotations

import base64
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fleet import Fleet
from tests.ssm_endpoint import AwsStandIns, fleet_runner

from .harness import FAULTY, HEALTHY, HostView, check_scan, run_scan, write_inventory

pytestmark = pytest.mark.fleet
BUCKET = "fault-out"
GRACE_S = 10.0  # SSM polling gives up at the deadline plus max(10 s, deadline/4) (transport/ssm.py)
NAMES = [*HEALTHY, "a2", FAULTY]
_ids = itertools.count(0x100)


@pytest.fixture(scope="module")
def aws() -> Iterator[AwsStandIns]:
    with AwsStandIns(visibility_lag_s=0.3) as a:
        a.install_probe_document(BUCKET)
        yield a


@pytest.fixture
def endpoint(aws: AwsStandIns) -> Iterator[Any]:
    s3 = aws.endpoint.s3
    yield aws.endpoint
    aws.endpoint.throttles.clear()
    aws.endpoint.s3 = s3


def _inventory(fleet: Fleet, endpoint: Any, tmp: Path, **faulty: Any) -> Path:
    """golden, a1 over SSH; a2 (healthy) and a3 (`faulty` instance options) as fresh SSM instances."""
    hosts = []
    for name, options in (("a2", {}), (FAULTY, faulty)):
        iid = f"i-{next(_ids):017x}"
        endpoint.add_instance(iid, fleet_runner(fleet, name), **options)
        labels = next(h.labels for h in fleet.hosts if h.name == name)
        hosts.append({"name": name, "target": f"ssm://{iid}", "labels": labels})
    return write_inventory(fleet, tmp / "inventory.yaml", hosts)


def _scan(inventory: Path, tmp: Path, deadline: float, *extra: str) -> Any:
    return run_scan(inventory, tmp, deadline, "--region", "us-east-1", "--ssm-poll-interval", "0.2", *extra)


@pytest.mark.parametrize("case", ["ssm-undeliverable"])
def test_undeliverable(fleet: Fleet, clean: dict[str, HostView], endpoint: Any, faulty_host: str,
                       tmp_path: Path, case: str) -> None:
    scan = _scan(_inventory(fleet, endpoint, tmp_path, behaviour="undeliverable"), tmp_path, 20)
    check_scan(scan, case, 20 + GRACE_S,
               {FAULTY: ("unreachable", r"SSM Failed/Undeliverable .*could not be delivered")}, clean, NAMES)


@pytest.mark.parametrize("case", ["ssm-execution-timed-out"])
def test_execution_timed_out(fleet: Fleet, clean: dict[str, HostView], endpoint: Any, faulty_host: str,
                             tmp_path: Path, case: str) -> None:
    """The script outlives executionTimeout (the agent kills it at the scan's --deadline)."""
    deadline = 8.0
    scan = _scan(_inventory(fleet, endpoint, tmp_path, delay_s=120), tmp_path, deadline)
    check_scan(scan, case, deadline + GRACE_S,
               {FAULTY: ("timeout", r"SSM TimedOut/Execution Timed Out .*timed out after 8s")}, clean, NAMES)


@pytest.mark.parametrize("case", ["ssm-throttled-transient", "ssm-throttled-persistent"])
def test_throttled(fleet: Fleet, clean: dict[str, HostView], endpoint: Any, faulty_host: str, tmp_path: Path,
                   case: str) -> None:
    """A few throttled calls of every operation are retried (all hosts collected). Every call throttled:
    the SSM hosts time out naming the throttling, within the deadline plus the polling grace. Before the
    fix, botocore's 10 adaptive attempts per call held such a scan 58-78 s with --deadline 10, and the SSH
    hosts waited for the SSM batch to give up before they were even contacted."""
    inventory = _inventory(fleet, endpoint, tmp_path)
    deadline = 8.0
    if case == "ssm-throttled-transient":
        for op in ("GetDocument", "DescribeInstanceInformation", "SendCommand", "ListCommandInvocations",
                   "GetCommandInvocation"):
            endpoint.throttle(op, 2)
        faulty: dict[str, tuple[str, str]] = {}
    else:
        endpoint.throttle("ListCommandInvocations", 10_000)
        why = r"no SSM result within 8s .*last polling error ThrottlingException: Rate exceeded"
        faulty = {"a2": ("timeout", why), FAULTY: ("timeout", why)}
    scan = _scan(inventory, tmp_path, deadline)
    check_scan(scan, case, deadline + GRACE_S, faulty, clean, NAMES)
    assert endpoint.errors[("ListCommandInvocations", "ThrottlingException")] >= 2
    if faulty:  # the SSH hosts finish first, not held until the SSM batch gives up (before the fix: last)
        assert sorted(scan.finish_order()[:2]) == sorted(HEALTHY), scan.finish_order()


class _VanishingS3:
    """The endpoint's S3 client, except that the output objects of one instance are deleted right after
    they are written (a lifecycle rule or someone cleaning the bucket between write and read)."""

    def __init__(self, s3: Any, instance_id: str):
        self.s3, self.instance_id = s3, instance_id

    def put_object(self, **kwargs: Any) -> Any:
        done = self.s3.put_object(**kwargs)
        if f"/{self.instance_id}/" in kwargs["Key"]:
            self.s3.delete_object(Bucket=kwargs["Bucket"], Key=kwargs["Key"])
        return done

    def __getattr__(self, name: str) -> Any:
        return getattr(self.s3, name)


@pytest.mark.parametrize("case", ["ssm-s3-output-vanished"])
def test_s3_output_object_vanished(fleet: Fleet, clean: dict[str, HostView], endpoint: Any, faulty_host: str,
                                   tmp_path: Path, case: str) -> None:
    """a3's output is past SSM's 24,000-character inline cap (64 KB of random text in /etc/eks/release),
    so the scanner reads it from the S3 bucket: gone. What was inline is kept and the error says why."""
    release = fleet.host(faulty_host).root / "etc/eks/release"
    release.parent.mkdir(exist_ok=True)
    release.write_text(base64.encodebytes(os.urandom(48_000)).decode())
    inventory = _inventory(fleet, endpoint, tmp_path)
    iid = yaml.safe_load(inventory.read_text())["hosts"][-1]["target"].removeprefix("ssm://")
    endpoint.s3 = _VanishingS3(endpoint.s3, iid)
    scan = _scan(inventory, tmp_path, 20, "--ssm-s3-bucket", BUCKET)
    check_scan(scan, case, 20 + GRACE_S,
               {FAULTY: ("ok", r"output truncated.*S3 output unreadable: NoSuchKey")}, clean, NAMES)
