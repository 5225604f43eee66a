"""SSM at the API level: the settings of a run, SendCommand's documented limits, and which instances
have an agent answering (DescribeInstanceInformation). Shared by EC2 discovery and the SSM transport."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..models import SSMSettings as SSMSettings  # re-exported: defined with the other settings a HostSpec holds
from ..options import SSM_DOCUMENT_NAME
from .api import pages

DOCUMENT_NAME = SSM_DOCUMENT_NAME  # named once, in the neutral options
RUN_SHELL_SCRIPT = "AWS-RunShellScript"
MAX_IDS_PER_COMMAND = 50  # SendCommand's documented limit; botocore does not enforce it
MAX_TARGET_KEYS = 5  # SendCommand Targets: ≤ 5 keys, ≤ 50 values each (botocore checks neither)
MAX_TARGET_VALUES = 50


def rate_count(value: str, total: int, at_least: int = 0) -> int:
    """An SSM rate control (`10` or `10%`) as a count of `total` targets."""
    if value.endswith("%"):
        return max(at_least, total * int(value[:-1]) // 100)
    return max(at_least, int(value))


def chunks(items: list[str], size: int = MAX_IDS_PER_COMMAND) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def ping_statuses(ssm: Any, instance_ids: list[str]) -> dict[str, str]:
    """PingStatus (Online, ConnectionLost, Inactive) per managed instance; unmanaged ids are absent.

    DescribeInstanceInformation with an InstanceIds filter of ≤ 50 ids per call (one page each)."""
    found: dict[str, str] = {}
    for batch in chunks(instance_ids):
        for page in pages(ssm, "describe_instance_information", "DescribeInstanceInformation", page_size=50,
                          Filters=[{"Key": "InstanceIds", "Values": batch}]):
            for info in page.get("InstanceInformationList", []):
                found[info["InstanceId"]] = info.get("PingStatus") or "Unknown"
    return found
