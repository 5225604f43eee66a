"""SSM output is untrusted: a gzip bomb (2.8 MB of base64 that inflates to 2 GiB) in the S3 output object,
and an over-long S3 object, are read only up to their caps, over real HTTP (the local SSM endpoint and
moto's S3 server). The host keeps the facts before the cap, marked truncated with a clear note."""

from __future__ import annotations

import base64
import resource
import struct
import zlib
from collections.abc import Callable, Iterator

import pytest

from auditor.aws.ssm import SSMSettings
from auditor.models import HostSpec, TransportOptions
from auditor.run.live_hosts import collect_hosts
from auditor.transport.base import DEFAULT_MAX_OUTPUT
from auditor.transport.ssm_document import FOOTER, HEADER, decode_output
from auditor.transport.ssm_s3 import read_object
from tests.ssm_endpoint import AwsStandIns, canned_runner
from tests.ssm_endpoint.recorded import recorded_document_output

MiB = 1 << 20
BOMB_MIB = 2048  # inflated size of the filler: 2 GiB
Runner = Callable[[str, dict[str, str], float], tuple[str, str, int]]


def gzip_bomb(prefix: bytes, filler_mib: int, suffix: bytes) -> bytes:
    """A valid gzip stream of prefix + filler_mib MiB of "#" + suffix, built without compressing the
    filler more than once: full-flushed deflate blocks of identical input are identical and independent."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"#" * MiB
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH) == block  # the next MiB encodes identically
    tail = (c.compress(suffix) + c.flush())[:-8]  # final block without zlib's trailer (it saw 2 MiB only)
    crc = zlib.crc32(prefix)
    for _ in range(filler_mib):
        crc = zlib.crc32(chunk, crc)
    crc = zlib.crc32(suffix, crc)
    size = len(prefix) + filler_mib * MiB + len(suffix)
    return head + block * filler_mib + tail + struct.pack("<II", crc, size & 0xFFFFFFFF)


def framed(gz: bytes) -> str:
    """The SSM wrapper's framing around a gzip stream (as the document script prints it)."""
    return f"{HEADER} gzip-base64\n{base64.b64encode(gz).decode()}\n{FOOTER}\n"


@pytest.fixture(scope="module")
def probe_stdout() -> bytes:
    return decode_output(recorded_document_output()).stdout.encode()


@pytest.fixture(scope="module")
def bomb_text(probe_stdout: bytes) -> str:
    return framed(gzip_bomb(probe_stdout, BOMB_MIB, b"@@AMI-AUDITOR-EXIT 0@@\n"))


def bomb_runner(recorded: str) -> Runner:
    """The endpoint's canned answer (framed for this command) with 2 GiB of inflated filler before the
    probe's last line (its end mark), so a cap really cuts the output."""
    canned = canned_runner(recorded)

    def run(script: str, env: dict[str, str], timeout: float) -> tuple[str, str, int]:
        out, err, status = canned(script, env, timeout)
        probe = decode_output(out).stdout.encode()
        probe = probe[: probe.rstrip(b"\n").rfind(b"\n") + 1]  # the bomb comes before the probe's last line
        return framed(gzip_bomb(probe, BOMB_MIB, b"@@AMI-AUDITOR-EXIT 0@@\n")), err, status

    return run


@pytest.fixture(scope="module")
def aws() -> Iterator[AwsStandIns]:
    with AwsStandIns(visibility_lag_s=0.1) as a:
        a.install_probe_document("audit-out")
        yield a


def test_the_bomb_builder_makes_a_real_gzip_stream(probe_stdout: bytes) -> None:
    gz = gzip_bomb(probe_stdout, 3, b"END\n")
    data = zlib.decompress(gz, 31)
    assert data == probe_stdout + b"#" * (3 * MiB) + b"END\n"


def test_decode_output_inflates_a_gzip_bomb_only_up_to_the_cap(bomb_text: str, probe_stdout: bytes) -> None:
    assert 2 * MiB < len(bomb_text) < 3 * MiB  # ~2.8 MB of base64 …
    decoded = decode_output(bomb_text, max_output=4 * MiB)  # … that would inflate to 2 GiB
    assert decoded.framed and decoded.truncated and decoded.capped
    assert len(decoded.stdout) == 4 * MiB
    assert decoded.stdout.startswith(probe_stdout.decode())
    small = decode_output(framed(gzip_bomb(b"out\n", 0, b"@@AMI-AUDITOR-EXIT 0@@\n")), max_output=4 * MiB)
    assert not small.capped and not small.truncated and small.stdout == "out\n"


def test_s3_gzip_bomb_gives_the_facts_before_the_cap_marked_truncated(aws: AwsStandIns) -> None:
    aws.endpoint.add_instance("i-0000000000000b0b0", bomb_runner(recorded_document_output()))
    settings = SSMSettings(poll_interval_s=0.1, s3_bucket="audit-out", s3_prefix="bomb")
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    [result] = collect_hosts([HostSpec("bomb", "ssm://i-0000000000000b0b0", options=TransportOptions(ssm=settings))],
                             deadline_s=30)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak_before
    assert grown < 512 * MiB, f"peak memory grew by {grown / MiB:.0f} MiB"  # 2 GiB were never allocated
    assert result.status == "ok", result.error
    snap = result.snapshot
    assert snap["probe"]["truncated"] and not snap["probe"]["complete"]
    assert f"over the {DEFAULT_MAX_OUTPUT} byte limit once decompressed" in snap["errors"]["probe"]
    assert snap["facts"]["os"]["id"] == "debian"  # the sections before the cap still parse


def test_read_s3_never_fetches_more_than_its_limit(aws: AwsStandIns) -> None:
    aws.s3.put_object(Bucket="audit-out", Key="big/stdout", Body=b"x" * (3 * MiB))
    text, capped = read_object(aws.s3, "audit-out", "big/stdout", MiB)
    assert capped and text == "x" * MiB
    aws.s3.put_object(Bucket="audit-out", Key="small/stdout", Body=b"y" * MiB)
    assert read_object(aws.s3, "audit-out", "small/stdout", MiB) == ("y" * MiB, False)
