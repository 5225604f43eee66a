"""Where the scanner runs, from the EC2 instance metadata service (IMDSv2): instance id and AZ.

Only for `ami://`, which attaches a volume to the scanning instance in its AZ. The endpoint follows
botocore's `AWS_EC2_METADATA_SERVICE_ENDPOINT` (tests point it at a loopback stand-in) and
`AWS_EC2_METADATA_DISABLED=true` turns it off. Proxies are bypassed; answers are size-bounded and
must look like an instance id / AZ name.
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass

from ..errors import TransportError

DEFAULT_ENDPOINT = "http://169.254.169.254"
TIMEOUT_S = 2.0
MAX_ANSWER = 1024
INSTANCE_ID_RE = re.compile(r"^i-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
AZ_RE = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+(?:-[a-z]+-\d+)?[a-z]$")  # us-east-1a, us-west-2-lax-1a


REGION_RE = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+$")


@dataclass(frozen=True)
class Placement:
    instance_id: str
    az: str
    region: str


def _endpoint() -> str:
    return (os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _call(opener: urllib.request.OpenerDirector, request: urllib.request.Request) -> str:
    with opener.open(request, timeout=TIMEOUT_S) as response:
        answer: bytes = response.read(MAX_ANSWER + 1)
        return answer.decode("ascii", "replace")


def placement() -> Placement:
    """This instance's id and AZ (TransportError naming --az / --attach-to when IMDS cannot answer)."""
    hint = "give --az and --attach-to when the scanner is not an EC2 instance (or IMDS is off)"
    if os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        raise TransportError(f"instance metadata is disabled (AWS_EC2_METADATA_DISABLED): {hint}")
    base = _endpoint()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        token = _call(opener, urllib.request.Request(
            f"{base}/latest/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}))
        headers = {"X-aws-ec2-metadata-token": token.strip()}
        instance_id = _call(opener, urllib.request.Request(f"{base}/latest/meta-data/instance-id", headers=headers))
        az = _call(opener, urllib.request.Request(
            f"{base}/latest/meta-data/placement/availability-zone", headers=headers))
        region = _call(opener, urllib.request.Request(f"{base}/latest/meta-data/placement/region", headers=headers))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise TransportError(f"instance metadata ({base}) did not answer: {exc}; {hint}") from None
    instance_id, az, region = instance_id.strip(), az.strip(), region.strip()
    if not INSTANCE_ID_RE.match(instance_id) or not AZ_RE.match(az) or not REGION_RE.match(region):
        raise TransportError(f"instance metadata ({base}) gave an unexpected answer; {hint}")
    return Placement(instance_id, az, region)  # the region from IMDS: an AZ name minus its letter fails in Local Zones
