"""The region of an AWS `--notify` target, checked before any host is contacted (no network call)."""

from __future__ import annotations

import re

from ..errors import InputError

_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
PARTITIONS = ("aws", "aws-cn", "aws-us-gov")


def check_region(kind: str, given: str, service: str) -> str:
    """`given`, or the configured default (AWS_REGION, the profile), if botocore knows `service` there."""
    import boto3

    session = boto3.session.Session()
    region = given or session.region_name or ""
    if not region:
        raise InputError(f"--notify {kind}: no region: give {kind}:REGION or set AWS_REGION")
    known = {r for p in PARTITIONS for r in session.get_available_regions(service, partition_name=p)}
    if not _REGION.match(region) or region not in known:
        raise InputError(f"--notify {kind}:{region}: not a region {service} is offered in")
    return region
