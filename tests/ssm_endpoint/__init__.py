"""Local stand-ins for AWS used by the SSM/EC2 tests and the benchmark: moto's server (EC2, S3) and
our SSM JSON-protocol endpoint (`server.SSMEndpoint`), which stands in for AWS Systems Manager."""

from .aws import AwsStandIns
from .server import SSMEndpoint, canned_runner, fleet_runner, local_runner

__all__ = ["AwsStandIns", "SSMEndpoint", "canned_runner", "fleet_runner", "local_runner"]
