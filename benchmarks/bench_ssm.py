"""Benchmark: collect N instances through SSM on the local test endpoint (stands in for AWS SSM).

Prints API calls per operation (SendCommand should be ceil(N/50); polling is ListCommandInvocations,
one call per command per round, so it is bounded by commands × rounds), wall time and peak memory.
Every instance answers with one real output of the document's script recorded on this machine at
start (the endpoint does not run 1,000 probes); the client side — batching, polling, fetching,
decompressing and parsing N snapshots — is what is measured. Run: python3 benchmarks/bench_ssm.py
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.app import collect_hosts  # noqa: E402
from auditor.collect.probe import DEFAULT_BINARIES, probe_script  # noqa: E402
from auditor.models import HostSpec  # noqa: E402
from auditor.transport.ssm import SSMSettings  # noqa: E402
from auditor.transport.ssm_document import DOCUMENT_NAME, document_json, wrapper_script  # noqa: E402
from tests.ssm_endpoint import AwsStandIns, canned_runner  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--poll", type=float, default=1.0, help="first poll interval (s)")
    ap.add_argument("--lag", type=float, default=1.0, help="endpoint's InvocationDoesNotExist window (s)")
    ap.add_argument("--run-s", type=float, default=2.0, help="simulated time each instance runs the probe (s)")
    args = ap.parse_args()

    env = {"SSM_binaries": " ".join(DEFAULT_BINARIES), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    recorded = subprocess.run(["/bin/sh", "-c", wrapper_script(probe_script())], capture_output=True, text=True,
                              env=env, check=True).stdout
    n = args.instances
    with AwsStandIns(visibility_lag_s=args.lag, workers=256) as aws:
        aws.ssm.create_document(Name=DOCUMENT_NAME, Content=document_json(probe_script(), list(DEFAULT_BINARIES)),
                                DocumentType="Command", DocumentFormat="JSON")
        ids = [f"i-{i:017x}" for i in range(n)]
        for iid in ids:
            aws.endpoint.add_instance(iid, canned_runner(recorded), delay_s=args.run_s)
        aws.endpoint.calls.clear()
        settings = SSMSettings(poll_interval_s=args.poll)
        specs = [HostSpec(f"h{i:04d}", f"ssm://{iid}", options={"ssm": settings}) for i, iid in enumerate(ids)]
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        results = collect_hosts(specs, deadline_s=60)
        wall = time.perf_counter() - t0
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        calls = dict(aws.endpoint.calls)
        errors = dict(aws.endpoint.errors)

    ok = sum(r.status == "ok" for r in results)
    commands = math.ceil(n / 50)
    print(f"instances                  {n}  (ok {ok}; recorded output {len(recorded)} chars, "
          f"{results[0].snapshot['probe']['stdout_bytes'] if results[0].snapshot else '?'} bytes decoded)")
    for op in sorted(calls):
        print(f"{op:<27}{calls[op]:>6}")
    print(f"SendCommand expected       {commands:>6}  (ceil(N/50))")
    rounds = calls.get("ListCommandInvocations", 0) / commands
    print(f"polling rounds per command {rounds:>6.1f}  (ListCommandInvocations / commands; bounded by the deadline)")
    print(f"API errors                 {errors or 'none'}")
    print(f"wall time                  {wall:6.2f} s  (each instance 'runs' {args.run_s:.1f} s; endpoint lag "
          f"{args.lag:.1f} s)")
    print(f"peak RSS                   {rss1 / 1024:6.1f} MiB (before the run {rss0 / 1024:.1f} MiB; "
          "includes the in-process endpoint)")
    return 0 if ok == n else 1


if __name__ == "__main__":
    sys.exit(main())
