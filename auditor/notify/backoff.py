"""Calls to AWS retried on throttling only, with exponential backoff (botocore's retries turned off)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

ATTEMPTS = 6
BACKOFF_S = 0.5
TIMEOUT_S = 20.0
THROTTLED = frozenset({"TooManyRequestsException", "ThrottlingException", "Throttling", "LimitExceededException"})


def client(service: str, region: str) -> Any:
    """A boto3 client that never retries by itself (total_max_attempts=1: retries.max_attempts=1 still
    retries once), so call_with_backoff decides."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=TIMEOUT_S,
                    read_timeout=TIMEOUT_S)
    return boto3.client(service, region_name=region, config=config)  # type: ignore[call-overload]


def call_with_backoff(call: Callable[[], Any], sleep: Callable[[float], None] = time.sleep,
                      attempts: int = ATTEMPTS) -> Any:
    """`call()`, again after a throttling error (0.5 s, 1 s, 2 s …); any other error is raised."""
    from botocore.exceptions import ClientError

    for attempt in range(attempts):
        try:
            return call()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in THROTTLED or attempt + 1 == attempts:
                raise
        sleep(BACKOFF_S * 2**attempt)
    raise AssertionError("unreachable")
