"""Outputs SSM wrote to the `--ssm-s3-bucket`: listed by command prefix, read bounded.

SSM writes each invocation's stdout to `<prefix>/<command id>/<instance id>/<plugin>/<step>/stdout`
once the step has finished. Every instance profile may write under the prefix, so only that exact key
of a well-formed instance id is read (a planted `<cid>/<victim>/aaa/stdout` is not), and an id seen only
in S3 is no evidence that SSM ran there. Listing `<prefix>/<command id>/` (ListObjectsV2, ≤ 1,000 keys a page)
tells which instances have finished without one SSM API call per instance; each object is then read
with at most `limit` bytes fetched (a hostile or huge object never becomes a huge allocation).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from ..aws.api import error_code, error_for_aws, pages
from ..errors import AuditorError, TransportError
from .ssm_document import STEP_NAME

INSTANCE_ID = re.compile(r"^(i|mi)-[0-9a-f]{8,17}$")
PLUGIN = "awsrunShellScript"  # `aws:runShellScript` as SSM spells it in output keys
# the step's directory: our document's step, or AWS-RunShellScript's (schema 1.2 `0.awsrunShellScript`;
# its 2.2 form names the step `runShellScript`)
DOCUMENT_STEPS = (STEP_NAME,)
RUN_SHELL_SCRIPT_STEPS = ("0.awsrunShellScript", "runShellScript")
# the prefix cannot be listed at all (permissions, the bucket): a reason to read from SSM instead; anything
# else (throttling, 5xx, a dropped connection) passes, and the next round lists again
REFUSED = ("AccessDenied", "AllAccessDisabled", "NoSuchBucket", "InvalidBucketName", "PermanentRedirect",
           "AuthorizationHeaderMalformed", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccountProblem")
T = TypeVar("T")


class ListingRefused(TransportError):
    """S3 refuses to list the output prefix for good (no s3:ListBucket, no such bucket…)."""


def listing_error(exc: Exception, what: str) -> AuditorError:
    error = error_for_aws(exc, what)
    return ListingRefused(str(error)) if error_code(exc)[0] in REFUSED else error
R = TypeVar("R")


@dataclass(frozen=True)
class OutputObject:
    """One instance's stdout object: where it is and when SSM wrote it."""

    instance_id: str
    key: str
    size: int
    written: datetime | None


def command_prefix(prefix: str, command_id: str) -> str:
    base = prefix.strip("/")
    return f"{base}/{command_id}/" if base else f"{command_id}/"


def list_outputs(s3: Any, bucket: str, prefix: str, command_id: str,
                 steps: tuple[str, ...] = DOCUMENT_STEPS) -> dict[str, OutputObject]:
    """Instance id → its stdout object, for every output of `command_id` written so far, only at the key
    SSM writes for one of `steps` (ListingRefused when the prefix cannot be listed, TransportError when
    this listing failed)."""
    start = command_prefix(prefix, command_id)
    rank = {f"/{PLUGIN}/{step}/stdout": n for n, step in enumerate(steps)}  # the first step's key wins
    found: dict[str, tuple[int, OutputObject]] = {}
    for page in pages(s3, "list_objects_v2", f"ListObjectsV2 s3://{bucket}/{start}", mapper=listing_error,
                      Bucket=bucket, Prefix=start):
        for obj in page.get("Contents") or []:
            key = str(obj.get("Key") or "")
            instance_id, slash, rest = key[len(start):].partition("/")
            n = rank.get(slash + rest)
            if n is not None and INSTANCE_ID.match(instance_id) and n < found.get(instance_id, (len(rank),))[0]:
                found[instance_id] = n, OutputObject(instance_id, key, int(obj.get("Size") or 0),
                                                     obj.get("LastModified"))
    return {iid: obj for iid, (_, obj) in found.items()}


def key_of_url(url: str, bucket: str) -> str:
    """The object key of an invocation's `StandardOutputUrl` (path-style or virtual-hosted)."""
    parts = urlsplit(url)
    path = unquote(parts.path.lstrip("/"))
    in_path = path.startswith(bucket + "/") and not parts.netloc.startswith(bucket + ".")
    return path[len(bucket) + 1:] if in_path else path


class ReadTimedOut(Exception):
    """An S3 read that ran past its wall-clock budget (a body trickling in, a server that never answers)."""


def read_object(s3: Any, bucket: str, key: str, limit: int, until: float | None = None) -> tuple[str, bool]:
    """At most `limit` bytes of the object, in chunks (never more is fetched into memory); True when
    the object was longer. Past `until` (monotonic) it raises ReadTimedOut: each chunk is one socket read
    (read1), so a body trickling in is cut at the budget, not when it ends."""
    stream = s3.get_object(Bucket=bucket, Key=key)["Body"]
    read = getattr(getattr(stream, "_raw_stream", None), "read1", None) or stream.read
    chunks: list[bytes] = []
    total = 0
    try:
        while total <= limit:
            if until is not None and time.monotonic() > until:
                raise ReadTimedOut(f"S3 GetObject of s3://{bucket}/{key} ran out of time after {total} bytes")
            chunk = read(min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        stream.close()
    return b"".join(chunks)[:limit].decode("utf-8", "replace"), total > limit


def bounded_map(pool: Executor, fn: Callable[[T], R], items: Iterable[T], window: int,
                until: float | None = None, late: Callable[[T], R] | None = None) -> Iterator[R]:
    """`fn` over `items` in `pool`, results in order, never more than `window` submitted and not yet
    taken: memory stays bounded however slowly the caller consumes them. With `until` (monotonic) and
    `late`, an item not done by then yields `late(item)` instead: its stuck worker is left behind."""
    futures: deque[tuple[T, Future[R]]] = deque()

    def take() -> R:
        item, future = futures.popleft()
        if until is None or late is None:
            return future.result()
        try:
            return future.result(timeout=max(0.0, until - time.monotonic()))
        except FutureTimeout:
            future.cancel()
            return late(item)

    for item in items:
        futures.append((item, pool.submit(fn, item)))
        if len(futures) >= window:
            yield take()
    while futures:
        yield take()
