"""AWS clients, how their failures map to our error kinds, and pagination — in one place.

Retries: botocore's `standard` mode, 3 attempts (worst backoff ~3 s). Not `adaptive` (FIELD-NOTES §8
suggests it): adaptive's client-side token bucket sleeps *before* a call, outside any deadline we hold
(docs/performance.md). Our own loops retry instead, each bounded by the run's deadline: every polling
round, and SendCommand while the deadline allows (`transport/ssm_send.throttled`).
Endpoints follow botocore's standard `AWS_ENDPOINT_URL[_SSM|_S3|_EC2]` variables (tests use them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..errors import AuditorError, AuthFailed, InputError, TransportError, Unreachable

RETRIES = {"mode": "standard", "max_attempts": 3}
# S3 output reads sit inside a scan's deadline: an object that does not answer costs ≤ 2 × 10 s, not 4 × 30 s
S3_RETRIES = {"mode": "standard", "max_attempts": 2}
S3_READ_TIMEOUT_S = 10
THROTTLING = ("ThrottlingException", "Throttling", "RequestLimitExceeded", "TooManyRequestsException",
              "SlowDown")
AUTH_CODES = ("AccessDeniedException", "AccessDenied", "UnrecognizedClientException", "InvalidClientTokenId",
              "ExpiredTokenException", "ExpiredToken", "AuthFailure")
UNREACHABLE_CODES = ("InvalidInstanceId", "EndpointConnectionError")
# the request itself was wrong (a user's filter or option), not the host or the service
INPUT_CODES = ("InvalidParameterValue", "InvalidParameterCombination", "InvalidFilter", "ValidationException")


def clients(region: str | None, profile: str | None, *names: str) -> list[Any]:
    """Clients from one session (the normal credential chain); thread-safe once made, sessions are not."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, NoRegionError, ProfileNotFound

    config = Config(retries=RETRIES, connect_timeout=10, read_timeout=30, max_pool_connections=32)  # type: ignore[arg-type]
    s3 = Config(retries=S3_RETRIES, connect_timeout=5, read_timeout=S3_READ_TIMEOUT_S,  # type: ignore[arg-type]
                max_pool_connections=32)
    try:
        session = boto3.Session(profile_name=profile, region_name=region)
        return [session.client(name, config=s3 if name == "s3" else config)  # type: ignore[call-overload]
                for name in names]
    except ProfileNotFound as exc:
        raise AuthFailed(f"AWS profile not found: {exc}") from None
    except NoRegionError:
        raise TransportError("no AWS region: give --region, ssm://i-…?region=…, or set AWS_REGION") from None
    except BotoCoreError as exc:
        raise TransportError(f"AWS client: {exc}") from None


def error_code(exc: Exception) -> tuple[str, str]:
    """(code, message) of a botocore ClientError, or the exception's type and text."""
    response = getattr(exc, "response", None) or {}
    err = response.get("Error") or {}
    return str(err.get("Code") or type(exc).__name__), str(err.get("Message") or exc)


def is_throttling(exc: Exception) -> bool:
    return error_code(exc)[0] in THROTTLING


def error_for_aws(exc: Exception, what: str) -> TransportError:
    """A TransportError of the right status for an AWS API failure: auth, unreachable, or plain error."""
    from botocore.exceptions import NoCredentialsError

    code, message = error_code(exc)
    text = f"{what}: {code}: {message}"
    if isinstance(exc, NoCredentialsError) or code in AUTH_CODES:
        return AuthFailed(text)
    if code in UNREACHABLE_CODES or "Could not connect" in message:
        return Unreachable(text)
    return TransportError(text)


def request_error(exc: Exception, what: str) -> InputError | TransportError:
    """Like `error_for_aws`, but a request AWS refused as malformed (a user's filter) is bad input (exit 2)."""
    code, message = error_code(exc)
    if code in INPUT_CODES:
        return InputError(f"{what}: AWS refused the request: {code}: {message}")
    return error_for_aws(exc, what)


def pages(client: Any, operation: str, what: str, page_size: int | None = None,
          mapper: Callable[[Exception, str], AuditorError] = error_for_aws, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every page of `operation` through boto3's own paginator; a failure becomes `mapper`'s error."""
    config = {"PageSize": page_size} if page_size else {}
    try:
        yield from client.get_paginator(operation).paginate(PaginationConfig=config, **kwargs)
    except Exception as exc:  # noqa: BLE001 - botocore raises many types; all become one named failure
        raise mapper(exc, what) from None
