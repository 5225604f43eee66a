"""Outputs SSM wrote to the `--ssm-s3-bucket`: listed by command prefix, read bounded.

SSM writes each invocation's stdout to `<prefix>/<command id>/<instance id>/<plugin>/<step>/stdout`
once the step has finished. Listing `<prefix>/<command id>/` (ListObjectsV2, ≤ 1,000 keys a page)
tells which instances have finished without one SSM API call per instance; each object is then read
with at most `limit` bytes fetched (a hostile or huge object never becomes a huge allocation).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from ..aws.api import pages

T = TypeVar("T")
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


def list_outputs(s3: Any, bucket: str, prefix: str, command_id: str) -> dict[str, OutputObject]:
    """Instance id → its stdout object, for every output of `command_id` written so far (TransportError
    when the bucket cannot be listed)."""
    start = command_prefix(prefix, command_id)
    found: dict[str, OutputObject] = {}
    for page in pages(s3, "list_objects_v2", f"ListObjectsV2 s3://{bucket}/{start}", Bucket=bucket, Prefix=start):
        for obj in page.get("Contents") or []:
            key = str(obj.get("Key") or "")
            instance_id, _, rest = key[len(start):].partition("/")
            if instance_id and rest.endswith("stdout") and (rest == "stdout" or rest.endswith("/stdout")):
                found.setdefault(instance_id, OutputObject(instance_id, key, int(obj.get("Size") or 0),
                                                           obj.get("LastModified")))
    return found


def key_of_url(url: str, bucket: str) -> str:
    """The object key of an invocation's `StandardOutputUrl` (path-style or virtual-hosted)."""
    parts = urlsplit(url)
    path = unquote(parts.path.lstrip("/"))
    in_path = path.startswith(bucket + "/") and not parts.netloc.startswith(bucket + ".")
    return path[len(bucket) + 1:] if in_path else path


def read_object(s3: Any, bucket: str, key: str, limit: int) -> tuple[str, bool]:
    """At most `limit` bytes of the object, in chunks (never more is fetched into memory); True when
    the object was longer."""
    stream = s3.get_object(Bucket=bucket, Key=key)["Body"]
    chunks: list[bytes] = []
    total = 0
    try:
        while total <= limit:
            chunk = stream.read(min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        stream.close()
    return b"".join(chunks)[:limit].decode("utf-8", "replace"), total > limit


def bounded_map(pool: Executor, fn: Callable[[T], R], items: Iterable[T], window: int) -> Iterator[R]:
    """`fn` over `items` in `pool`, results in order, never more than `window` submitted and not yet
    taken: memory stays bounded however slowly the caller consumes them."""
    futures: deque[Future[R]] = deque()
    for item in items:
        futures.append(pool.submit(fn, item))
        if len(futures) >= window:
            yield futures.popleft().result()
    while futures:
        yield futures.popleft().result()
