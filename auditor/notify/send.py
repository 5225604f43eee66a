"""Delivering alerts: `sns:ARN` (boto3 Publish) and `webhook:URL` (JSON POST), each retried.

Targets are validated before any host is contacted (bad ones exit 2): scheme, host, port, and no
whitespace, control or non-ASCII character (http.client would refuse them only when sending). A webhook
URL can hold a secret (Slack puts it in the path): messages name only its scheme, host and port, and a
delivery error has the URL's path, query and fragment cut out.
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from .regions import check_region

_ARN = re.compile(r"^arn:aws[a-z-]*:sns:(?P<region>[a-z0-9-]+):\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$")
_HOSTNAME = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?$")  # DNS names and IPv4; IDNs as punycode
AWS_SERVICES = {"securityhub": "securityhub", "ssm-compliance": "ssm"}  # their senders: stage.SYNCS
ATTEMPTS = 3
TIMEOUT_S = 10.0
BACKOFF_S = 0.5


@dataclass(frozen=True)
class Target:
    kind: str  # sns | webhook | securityhub | ssm-compliance
    address: str  # the topic ARN, the URL, or the region
    region: str | None = None

    @property
    def shown(self) -> str:
        if self.kind != "webhook":
            return f"{self.kind}:{self.address}"
        return f"webhook:{_origin(urllib.parse.urlsplit(self.address))}/…"

    def redact(self, text: str) -> str:
        """`text` with this webhook URL's secret parts (path, query, fragment) cut out."""
        if self.kind != "webhook":
            return text
        parts = urllib.parse.urlsplit(self.address)
        for secret in sorted((p for p in (parts.path, parts.query, parts.fragment) if len(p) > 1), key=len,
                             reverse=True):
            text = text.replace(secret, "…")
        return text


def _origin(parts: urllib.parse.SplitResult) -> str:
    """scheme://host[:port] of a validated URL (IPv6 in brackets)."""
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''}"


def _check_webhook(url: str) -> None:
    """InputError unless `url` is an http(s) URL http.client can send to; the message never shows the URL."""
    problem = "--notify webhook:"
    if any(c.isspace() for c in url):
        raise InputError(f"{problem} the URL contains whitespace; percent-encode it (%20)")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise InputError(f"{problem} the URL contains a control character")
    if not url.isascii():
        raise InputError(f"{problem} the URL contains a non-ASCII character; percent-encode it (IDN hosts as punycode)")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket: the message would be urllib's, shown without the URL
        raise InputError(f"{problem} not a valid URL (check the brackets of an IPv6 host)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{problem} needs an http(s) URL with a host")
    if parts.username is not None or parts.password is not None:
        raise InputError(f"{problem} a URL with a user or password is refused (it would be echoed)")
    host = parts.hostname
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise InputError(f"{problem} the host is not a valid IPv6 address") from None
    elif not _HOSTNAME.match(host):
        raise InputError(f"{problem} the host may hold only letters, digits, '.', '-' and '_'")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        raise InputError(f"{problem} {parts.scheme}://{host}: the port must be a number from 1 to 65535")


def parse_target(text: str) -> Target:
    kind, _, rest = text.partition(":")
    if kind == "sns":
        m = _ARN.match(rest)
        if not m:
            raise InputError("--notify sns: needs a topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)")
        return Target("sns", rest, m["region"])
    if kind == "webhook":
        _check_webhook(rest)
        return Target("webhook", rest)
    if kind in AWS_SERVICES:
        region = check_region(kind, rest, AWS_SERVICES[kind])
        return Target(kind, region, region)
    raise InputError(f"--notify: give sns:TOPIC_ARN, webhook:URL, securityhub[:REGION] or ssm-compliance[:REGION], "
                     f"not {kind!r}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # a POST is never replayed elsewhere
        return None


def _post(target: Target, body: dict[str, Any]) -> None:
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(target.address, data=data, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "ami-auditor"})
    opener = urllib.request.build_opener(_NoRedirect)
    with opener.open(request, timeout=TIMEOUT_S) as response:
        response.read(65536)


def _publish(target: Target, body: dict[str, Any]) -> None:
    import boto3
    from botocore.config import Config

    client = boto3.client("sns", region_name=target.region,
                          config=Config(retries={"mode": "standard", "max_attempts": 1},
                                        connect_timeout=TIMEOUT_S, read_timeout=TIMEOUT_S))
    subject = f"ami-auditor: {body['new_findings']} new findings"
    client.publish(TopicArn=target.address, Subject=subject[:100], Message=json.dumps(body, ensure_ascii=False))


SENDERS: dict[str, Callable[[Target, dict[str, Any]], None]] = {"sns": _publish, "webhook": _post}


def deliver(target: Target, body: dict[str, Any], attempts: int = ATTEMPTS,
            sleep: Callable[[float], None] = time.sleep) -> str | None:
    """Send with retries; None when delivered, else why it failed (one line)."""
    last = ""
    for attempt in range(attempts):
        try:
            SENDERS[target.kind](target, body)
            return None
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                break  # the request itself is wrong: retrying will not help
        except Exception as exc:  # noqa: BLE001 - any failure to alert is reported, never raised
            last = f"{type(exc).__name__}: {exc}"
        if attempt + 1 < attempts:
            sleep(BACKOFF_S * 2**attempt)
    return f"{target.shown}: not delivered after {attempt + 1} attempt(s): {target.redact(last)}"
