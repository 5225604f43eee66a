"""Live hosts, the source `scan`, `collect` and `diff` read: reach each host, run the probe once, build its
snapshot; many hosts at once, each result handed on as its host completes."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from .. import workers
from ..collect.probe import DEFAULT_BINARIES, probe_request, validate_binaries
from ..collect.snapshot import build_snapshot, refused, untrusted
from ..errors import TransportError
from ..models import PROBE_REFUSED_STATUS, HostResult, HostSpec
from ..options import DEFAULT_PARALLEL
from ..targets.inventory import redact_urls
from ..transport import batched, open_transport
from ..transport.base import DEFAULT_DEADLINE_S

ProgressFn = Callable[[HostResult, int, int], None]


def collect_host(
    spec: HostSpec,
    binaries: Iterable[str] = DEFAULT_BINARIES,
    deadline_s: float = DEFAULT_DEADLINE_S,
    exec_versions: bool = False,
    deep_cpu: bool = False,
) -> HostResult:
    """Run the probe once on one host; every failure becomes the host's status, never an exception.

    The probe request (collect.probe.probe_request) carries a fresh framing nonce (collect/framing.py)."""
    started = time.monotonic()
    request = probe_request(tuple(binaries), exec_versions, deep_cpu)
    try:
        transport = open_transport(spec)
        try:
            result = transport.run(request, deadline_s=deadline_s)
        finally:
            transport.close()
        snapshot = build_snapshot(spec, result, result.nonce or request.nonce)
        if why := refused(snapshot):
            return HostResult(spec, PROBE_REFUSED_STATUS, why, None, time.monotonic() - started)
        if why := untrusted(snapshot):
            return HostResult(spec, "error", why, None, time.monotonic() - started)
        return HostResult(spec, "ok", None, snapshot, time.monotonic() - started)
    except TransportError as exc:
        return HostResult(spec, exc.status, str(exc) or type(exc).__name__, None, time.monotonic() - started)
    except Exception as exc:  # noqa: BLE001 - one host's surprise must not sink the fleet scan
        return HostResult(spec, "error", f"{type(exc).__name__}: {exc}", None, time.monotonic() - started)


def collect_ssm(
    specs: list[HostSpec],
    binaries: Iterable[str] = DEFAULT_BINARIES,
    deadline_s: float = DEFAULT_DEADLINE_S,
    notes: list[str] | None = None,
    exec_versions: bool = False,
    deep_cpu: bool = False,
) -> Iterator[tuple[int, HostResult]]:
    """All ssm:// hosts in one batch: one SendCommand per ≤ 50 instances, or one tag-targeted command
    (transport/ssm.py); run-wide remarks go to `notes`. Each SendCommand gets its own framing nonce.
    Yields (index in `specs`, result) as each output arrives, built into its snapshot then (the raw text
    is dropped); a host the batch never answered for is an `error` at the end."""
    from ..transport.ssm import run_ssm_batch

    started = time.monotonic()
    request = probe_request(list(binaries), exec_versions, deep_cpu)
    answered = [False] * len(specs)
    for index, outcome in run_ssm_batch(specs, request, deadline_s, notes):
        spec = specs[index]
        answered[index] = True
        if isinstance(outcome, TransportError):
            yield index, HostResult(spec, outcome.status, str(outcome), None, time.monotonic() - started)
        elif outcome.nonce is None:
            yield index, HostResult(spec, "error", "SSM result carries no framing nonce", None,
                                    time.monotonic() - started)
        else:
            snapshot = build_snapshot(spec, outcome, outcome.nonce, instance_id=urlsplit(spec.target).netloc)
            if why := refused(snapshot):
                yield index, HostResult(spec, PROBE_REFUSED_STATUS, why, None, time.monotonic() - started)
                continue
            why = untrusted(snapshot)
            yield index, HostResult(spec, "error" if why else "ok", why, None if why else snapshot,
                                    outcome.duration_s)
    for index, spec in enumerate(specs):
        if not answered[index]:
            yield index, HostResult(spec, "error", "no outcome", None, 0.0)


def iter_hosts(
    specs: list[HostSpec],
    parallel: int = DEFAULT_PARALLEL,
    binaries: Iterable[str] = DEFAULT_BINARIES,
    deadline_s: float = DEFAULT_DEADLINE_S,
    progress: ProgressFn | None = None,
    notes: list[str] | None = None,
    exec_versions: bool = False,
    deep_cpu: bool = False,
) -> Iterator[tuple[int, HostResult]]:
    """Collect many hosts with at most `parallel` at once: (index in `specs`, result) as each host completes,
    its error redacted (redact_errors), so a caller can consume each snapshot and drop it.

    `notes` receives run-wide remarks (e.g. instances a tag-targeted SSM command also ran on)."""
    binaries = validate_binaries(list(binaries))
    if any(spec.target.startswith("ssh://") for spec in specs):
        from ..transport.ssh_route import check_ssh_configs

        check_ssh_configs(specs)
    ssm = [i for i, spec in enumerate(specs) if batched(spec.target)]  # the registry says which
    ssm_set = set(ssm)
    rest = [i for i in range(len(specs)) if i not in ssm_set]

    def one(index: int) -> tuple[tuple[int, HostResult]]:
        return ((index, collect_host(specs[index], binaries, deadline_s, exec_versions, deep_cpu)),)

    def ssm_batch() -> Iterator[tuple[int, HostResult]]:  # streams: each host as its output is read
        for j, result in collect_ssm([specs[i] for i in ssm], binaries, deadline_s, notes, exec_versions, deep_cpu):
            yield ssm[j], result

    # The SSM batch (its own polling threads) runs beside the other hosts, not before them: an SSM fault
    # (throttling, an agent that never answers) must not hold every SSH host until its deadline passes.
    # Daemon workers (workers.py): a SIGTERM ends the scan within 2 s whatever a worker is doing.
    tasks: list[Callable[[], Iterable[tuple[int, HostResult]]]] = [ssm_batch] if ssm else []  # first: it starts at once
    tasks += [functools.partial(one, i) for i in rest]
    pool = workers.run(tasks, max(1, min(parallel, len(rest) or 1)) + bool(ssm))
    for done, (index, result) in enumerate(pool, start=1):
        redact_errors([result])
        if progress:
            progress(result, done, len(specs))
        yield index, result


def collect_hosts(specs: list[HostSpec], *args: Any, **kwargs: Any) -> list[HostResult]:
    """Every host's result (iter_hosts, the same arguments), in the input order: for callers that keep
    every snapshot (`collect -o`, tests)."""
    results: list[HostResult | None] = [None] * len(specs)
    for index, result in iter_hosts(specs, *args, **kwargs):
        results[index] = result
    return [r for r in results if r is not None]


def host_summary(result: HostResult) -> dict[str, Any]:
    """A short, stable one-line view of a host outcome."""
    snap = result.snapshot or {}
    return {
        "name": result.name,
        "status": result.status,
        "error": result.error,
        "errors": sorted((snap.get("errors") or {}).keys()),
        "duration_s": round(result.duration_s, 2),
    }


def redact_errors(results: Iterable[HostResult]) -> list[HostResult]:
    """Defence in depth: no password from a URL or ProxyJump (say, in an ssh_config) in a host's error,
    which reaches the terminal and the report. Targets with passwords are refused earlier."""
    results = list(results)
    for result in results:
        if result.error:
            result.error = redact_urls(result.error)
    return results
