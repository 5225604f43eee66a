"""Benchmark: collect N instances through SSM on the local test endpoint (stands in for AWS SSM), two ways:
instance-id batches (SendCommand per ≤ 50 ids) and tag Targets (`--ssm-targets`: one SendCommand).

Prints API calls per operation side by side (instance ids: SendCommand = ceil(N/50), polling is one
ListCommandInvocations page per ≤ 50 invocations per round either way), wall time and peak memory.
Every instance answers with one real output of the document's script recorded on this machine at
start (the endpoint does not run 1,000 probes); the client side — batching, polling, fetching,
decompressing and parsing N snapshots — is what is measured. Run: python3 benchmarks/bench_ssm.py
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.aws.ssm import SSMSettings, rate_count  # noqa: E402
from auditor.models import HostSpec, TransportOptions  # noqa: E402
from auditor.run.live_hosts import collect_hosts  # noqa: E402
from tests.ssm_endpoint import AwsStandIns, canned_runner  # noqa: E402
from tests.ssm_endpoint.recorded import recorded_document_output  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--poll", type=float, default=1.0, help="first poll interval (s)")
    ap.add_argument("--lag", type=float, default=1.0, help="endpoint's InvocationDoesNotExist window (s)")
    ap.add_argument("--run-s", type=float, default=2.0, help="simulated time each instance runs the probe (s)")
    ap.add_argument("--max-concurrency", default="100%",
                    help="Targets mode MaxConcurrency (default 100%%: all at once, like the id batches)")
    args = ap.parse_args()
    recorded, runs = "", []
    for mode in ("ids", "targets"):
        recorded, run = measure(args, mode)
        runs.append(run)
    report(args, recorded, runs)
    return 0 if all(r["ok"] == args.instances for r in runs) else 1


def measure(args: argparse.Namespace, mode: str) -> tuple[str, dict]:
    """Collect N instances one way; API calls, wall time and peak RSS."""
    # the document's real output here, framed with a nonce as the agent would pass it (without SSM_nonce
    # the probe refuses to run and the "recording" was a 113-character header with nothing in it)
    recorded = recorded_document_output()
    n = args.instances
    with AwsStandIns(visibility_lag_s=args.lag, workers=256) as aws:
        aws.install_probe_document()
        ids = [f"i-{i:017x}" for i in range(n)]
        for iid in ids:  # the tag lives in the endpoint's registry: SSM resolves Targets against it
            aws.endpoint.add_instance(iid, canned_runner(recorded), delay_s=args.run_s, tags={"cluster": "bench"})
        aws.endpoint.calls.clear()
        settings = SSMSettings(poll_interval_s=args.poll)
        if mode == "targets":
            settings = SSMSettings(poll_interval_s=args.poll, targets=(("tag:cluster", ("bench",)),),
                                   max_concurrency=args.max_concurrency, max_errors="10%")
        # discovery's PingStatus join is the same for both modes (and not SSM Run Command): given here
        specs = [HostSpec(f"h{i:04d}", f"ssm://{iid}", options=TransportOptions(ssm=settings, ssm_ping="Online"))
                 for i, iid in enumerate(ids)]
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        results = collect_hosts(specs, deadline_s=60)
        wall = time.perf_counter() - t0
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        calls = dict(aws.endpoint.calls)
        errors = dict(aws.endpoint.errors)
        peak = max((c.peak for c in aws.endpoint.command_info.values()), default=0)
    ok = sum(r.status == "ok" for r in results)
    stdout_bytes = results[0].snapshot["probe"]["stdout_bytes"] if results[0].snapshot else "?"
    return recorded, {"mode": mode, "ok": ok, "calls": calls, "errors": errors, "wall": wall, "rss0": rss0,
                      "rss1": rss1, "peak": peak, "stdout_bytes": stdout_bytes}


def report(args: argparse.Namespace, recorded: str, runs: list[dict]) -> None:
    n = args.instances
    ids, tags = runs
    print(f"instances                  {n}  (ok: ids {ids['ok']}, targets {tags['ok']}; recorded output "
          f"{len(recorded)} chars, {ids['stdout_bytes']} bytes decoded)")
    print(f"{'API calls':<27}{'ids':>7}{'targets':>9}")
    for op in sorted(ids["calls"].keys() | tags["calls"].keys()):
        print(f"{op:<27}{ids['calls'].get(op, 0):>7}{tags['calls'].get(op, 0):>9}")
    print(f"{'SendCommand expected':<27}{math.ceil(n / 50):>7}{1:>9}  (ceil(N/50) | one per fleet)")
    commands = (math.ceil(n / 50), 1)
    rounds = [r["calls"].get("ListCommandInvocations", 0) / c / math.ceil(n / 50 / c) for r, c in zip(runs, commands)]
    print(f"{'polling rounds':<27}{rounds[0]:>7.1f}{rounds[1]:>9.1f}  (ListCommandInvocations / pages per round)")
    print(f"{'peak running per command':<27}{ids['peak']:>7}{tags['peak']:>9}  (targets MaxConcurrency "
          f"{args.max_concurrency} = {rate_count(args.max_concurrency, n, 1)}; endpoint runs ≤ 256 at once)")
    for r in runs:
        print(f"{r['mode']:<8} wall {r['wall']:6.2f} s, API errors {r['errors'] or 'none'}, peak RSS "
              f"{r['rss1'] / 1024:6.1f} MiB (before {r['rss0'] / 1024:.1f} MiB; process-wide, endpoint included)")
    print(f"(each instance 'runs' {args.run_s:.1f} s; endpoint lag {args.lag:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
