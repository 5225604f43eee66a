"""Benchmark: a tag-targeted SSM scan over a simulated fleet of N instances, outputs in S3.

`scan --ec2 tag:fleet=bench --via ssm --ssm-targets --ssm-s3-bucket B` against moto's server (EC2 for
discovery by tag, S3 for the outputs) and the test SSM endpoint in replay mode: every instance answers
with one real document output recorded on this machine, re-framed with the command's nonce and carrying
the instance's own identity (tests/ssm_endpoint/replay.py). No host runs a probe.

Up to three children per size, each its own process so its peak RSS is its own (the stand-ins run here):
- `layer`: EC2 discovery + `run_ssm_batch`, each outcome built into its snapshot and dropped as it
  arrives — what the SSM transport itself holds;
- `scan`: the real CLI (`ami-auditor scan … --format json --out DIR --no-store`): each host's output is
  judged and indexed as it is read and its snapshot dropped (the evaluation core); what grows is the
  report (a stub and the findings per host);
- `scan-store` (asked for by name): the same scan recording into a new history store, as a scheduled
  scan does (trends read per host, each host's row packed and spooled to disk until the scan is recorded).
Prints, per size and child: wall time, peak RSS, SSM API calls by operation and per instance, the load
average when the child ended, and when its SendCommand came (child start-up + discovery).

The simulated EC2 is test infrastructure, adjusted where moto's own cost would be what is measured: the
instances are seeded straight into the moto backend this process serves (`seeding`: one reservation per
instance, no EBS volume), and while measuring moto looks an instance's tags up in its per-resource dict
instead of scanning every tag of every resource (`indexed_ec2_tags`: the same tags). The scanner's
requests and moto's answers are otherwise unchanged: real HTTP, pages of 1,000, filters on the server.
Run: python3 benchmarks/bench_ssm_scale.py --instances 2000,10000,100000 --children scan --poll 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BUCKET = "bench-outputs"
TAG = "tag:fleet=bench"
AZS = (("us-east-1a", "use1-az1"), ("us-east-1b", "use1-az2"), ("us-east-1c", "use1-az4"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", default="1000,10000", help="comma-separated fleet sizes")
    ap.add_argument("--children", default="layer,scan",
                    help="layer, scan, scan-store (the scan recording into a new history store), comma-separated")
    ap.add_argument("--poll", type=float, default=2.0, help="--ssm-poll-interval (first poll, s)")
    ap.add_argument("--deadline", type=float, default=0.0,
                    help="scan --deadline (s); default max(900, 60 ms per instance): the outputs are read as fast "
                         "as the scanner builds and judges them (~16-35 ms each here), and what is still unread "
                         "when the deadline passes is reported as timed out")
    ap.add_argument("--no-ec2", action="store_true",
                    help="layer only: instances only in the SSM endpoint, specs built here instead of EC2 discovery "
                         "(the SSM layer alone)")
    ap.add_argument("--child-layer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--prefix", default="layer", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_layer:
        return layer(args.prefix, args.poll, args.instances if args.no_ec2 else "")
    rows = []
    for n in (int(x) for x in args.instances.split(",")):
        rows.extend(measure(n, args.children.split(","), args.poll, not args.no_ec2,
                            args.deadline or max(900.0, 0.06 * n)))
    report(rows)
    return 0


def layer(prefix: str, poll: float, ids_file: str = "") -> int:
    """The child: discovery (or the instance ids in `ids_file`) + run_ssm_batch, each snapshot built and
    dropped as it arrives."""
    from auditor.collect.probe import DEFAULT_BINARIES, probe_request
    from auditor.collect.snapshot import build_snapshot
    from auditor.models import CommandResult
    from auditor.options import AwsOptions
    from auditor.targets.ec2 import parse_filter
    from auditor.targets.resolve import discovered_hosts
    from auditor.transport.ssm import run_ssm_batch

    aws = AwsOptions(ec2=(parse_filter(TAG),), region="us-east-1", ssm_s3_bucket=BUCKET, ssm_s3_prefix=prefix,
                     ssm_poll_interval=poll, ssm_targets=True, ssm_max_concurrency="100%", ssm_max_errors="100%")
    t0 = time.perf_counter()
    if ids_file:
        from auditor.aws.ssm import SSMSettings
        from auditor.models import HostSpec, TransportOptions

        settings = SSMSettings(region="us-east-1", s3_bucket=BUCKET, s3_prefix=prefix, poll_interval_s=poll,
                               targets=(("tag:fleet", ("bench",)),), max_concurrency="100%", max_errors="100%")
        options = TransportOptions(ssm=settings, ssm_ping="Online")
        specs = [HostSpec(iid, f"ssm://{iid}", {"instance_id": iid}, options=options)
                 for iid in Path(ids_file).read_text().split()]
    else:
        specs = discovered_hosts(aws)
    after_discovery, discovered_s, first_s = vm_hwm(), time.perf_counter() - t0, 0.0
    ok = errors = 0
    for index, outcome in run_ssm_batch(specs, probe_request(DEFAULT_BINARIES), deadline_s=900):
        first_s = first_s or time.perf_counter() - t0
        if isinstance(outcome, CommandResult) and outcome.nonce:
            snapshot = build_snapshot(specs[index], outcome, outcome.nonce)
            ok += snapshot["host"].get("instance_id") == specs[index].labels.get("instance_id")
        else:
            errors += 1
    print(json.dumps({"ok": ok, "errors": errors, "hosts": len(specs),
                      "peak_after_discovery_mib": round(after_discovery / 2**20),
                      "peak_mib": round(vm_hwm() / 2**20), "discovered_s": round(discovered_s, 1),
                      "first_outcome_s": round(first_s, 1), "last_outcome_s": round(time.perf_counter() - t0, 1)}))
    return 0


def vm_hwm() -> int:
    """This process's own peak RSS in bytes (rusage would count pages shared with the parent before exec)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def setup(aws: object, n: int, ec2_too: bool = True) -> list[str]:
    """n instances in moto's EC2 (tagged, over three AZs; or not: `ec2_too`) and in the endpoint's registry,
    replaying; their ids."""
    from tests.ssm_endpoint.recorded import recorded_document_output
    from tests.ssm_endpoint.replay import Identity, Replay

    replay = Replay(recorded_document_output())
    aws.install_probe_document()  # type: ignore[attr-defined]
    aws.s3.create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
    image = aws.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]  # type: ignore[attr-defined]
    if not ec2_too:
        ids = [f"i-{k:017x}" for k in range(1, n + 1)]
        for k, iid in enumerate(ids):
            az, az_id = AZS[k % len(AZS)]
            aws.endpoint.add_instance(iid, replay.runner(Identity(iid, image, "m6i.large", az, az_id)),  # type: ignore[attr-defined]
                                      tags={"fleet": "bench"})
        return ids
    made = 0
    with seeding(image) as launch:
        while made < n:  # AZs in runs of 1,000 instances, as before
            az, az_id = AZS[(made // 1000) % len(AZS)]
            iid = launch(az)
            aws.endpoint.add_instance(iid, replay.runner(Identity(iid, image, "m6i.large", az, az_id)),  # type: ignore[attr-defined]
                                      tags={"fleet": "bench"})  # SSM resolves Targets from its registry
            made += 1
    return [i for i in aws.endpoint.instances]  # type: ignore[attr-defined]


@contextlib.contextmanager
def seeding(image: str) -> Iterator[Callable[[str], str]]:
    """`launch(az)` → the id of a new running instance tagged fleet=bench, seeded straight into the moto
    EC2 backend that AwsStandIns serves in this process (test infrastructure, not the product's path).

    One reservation per instance, as instances launched one at a time or by Auto Scaling groups are:
    moto counts DescribeInstances' MaxResults in reservations, so RunInstances with MaxCount=250 made
    pages of 1,000 reservations — the whole fleet in one response — where AWS pages by instance. No EBS
    volume: for each new instance moto tags its volumes through a scan of every volume (quadratic in the
    fleet). While seeding, the one AMI is looked up once instead of once per instance, and the instance-type
    check (a no-op unless moto is told to enforce it) is skipped."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    images = backend.describe_images(filters={"image-id": image})
    no_volume = [{"DeviceName": "/dev/xvda", "NoDevice": "", "Ebs": {}}]

    def launch(az: str) -> str:
        reservation = backend.run_instances(
            image, 1, None, [], instance_type="m6i.large", is_instance_type_default=True, placement=az,
            region_name="us-east-1", subnet_id=None, key_name=None, security_group_ids=[], nics=[], private_ip=None,
            associate_public_ip=None, tags={"instance": {"fleet": "bench"}}, ebs_optimized=False,
            disable_api_stop=False, instance_market_options={}, instance_initiated_shutdown_behavior=None,
            launch_template={}, hibernation_options={}, monitoring_state="disabled", ipv6_address_count=None,
            metadata_options={}, client_token="bench", block_device_mappings=no_volume)
        return str(reservation.instances[0].id)

    backend.describe_images = lambda *a, **k: images  # the instance's AMI attributes, per Instance()
    try:
        yield launch
    finally:
        del backend.describe_images


@contextlib.contextmanager
def indexed_ec2_tags() -> Iterator[None]:
    """moto's EC2 looks up one resource's tags by scanning every tag of every resource (get_tags →
    describe_tags), so each DescribeInstances page with a tag filter costs O(fleet²) in the moto server —
    a cost of the stand-in, not of AWS. While measuring, the same tags (the same dicts, in the same order)
    come from the backend's own per-resource dict instead. Test infrastructure only."""
    from moto.ec2.models.core import TaggedEC2Resource
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    def get_tags(self: Any) -> list[dict[str, str]]:
        tags = self.ec2_backend.tags.get(self.id) if self.id else None
        kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(self.id), "") if tags else ""
        return [{"resource_id": self.id, "key": k, "value": v, "resource_type": kind} for k, v in (tags or {}).items()]

    original = TaggedEC2Resource.get_tags
    TaggedEC2Resource.get_tags = get_tags  # type: ignore[method-assign]
    try:
        yield
    finally:
        TaggedEC2Resource.get_tags = original  # type: ignore[method-assign]


# The child reports its own peak (VmHWM of its own address space, after exec): the rusage of a child
# started by vfork/fork counts the parent's pages it shared before exec (here, the stand-ins').
_PEAK = ("import atexit, sys\n"
         "_peak_file = sys.argv.pop(1)\n"
         "def _peak():\n"
         "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
         "    open(_peak_file, 'w').write(hwm)\n"
         "atexit.register(_peak)\n")


def child(argv: list[str], env: dict[str, str], code: str) -> tuple[float, int, int, str]:
    """Run `code` (argv after it) in a fresh interpreter; (wall s, its peak RSS bytes, exit code, stdout)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r") as peak:
        proc = subprocess.run([sys.executable, "-c", _PEAK + code, peak.name, *argv], env=env, stdout=out,
                              stderr=err, cwd=ROOT, check=False)
        out.seek(0)
        err.seek(0)
        text = out.read() or f"(no result; exit {proc.returncode}; stderr ends: {err.read()[-600:]!r})"
        hwm_kib = int(peak.read() or 0)
    return time.perf_counter() - t0, hwm_kib * 1024, proc.returncode, text


def measure(n: int, children: list[str], poll: float, ec2_too: bool = True,
            deadline: float = 900.0) -> list[dict]:
    import logging

    from tests.ssm_endpoint import AwsStandIns

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request otherwise

    rows = []
    with AwsStandIns(visibility_lag_s=1.0, workers=32, s3_direct=True) as aws, indexed_ec2_tags():
        t0 = time.perf_counter()
        ids = setup(aws, n, ec2_too)
        ids_file = Path(tempfile.mkdtemp(prefix="bench-ssm-ids-")) / "ids"
        ids_file.write_text("\n".join(ids))
        print(f"# {n} instances set up in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for name in children:
            aws.endpoint.calls.clear()
            if name == "layer":
                me = str(Path(__file__))
                source = f"import sys, runpy; sys.argv = [{me!r}] + sys.argv[1:]; runpy.run_path({me!r}, " \
                    "run_name='__main__')"
                prefix = f"layer{n}"
                argv = ["--child-layer", "--prefix", prefix, "--poll", str(poll)]
                argv += [] if ec2_too else ["--no-ec2", "--instances", str(ids_file)]
            else:
                outdir, prefix = tempfile.mkdtemp(prefix="bench-ssm-scale-"), f"{name}{n}"
                keep = Path(tempfile.mkdtemp(prefix="bench-ssm-store-"))  # scan-store: a new store per run
                store = ["--store", str(keep / "history.sqlite3")] if name == "scan-store" else ["--no-store"]
                source = "import sys; from auditor.cli import main; sys.argv = ['ami-auditor'] + sys.argv[1:]; " \
                    "sys.exit(main())"
                argv = ["scan", "--ec2", TAG, "--via", "ssm",
                        "--ssm-targets", "--ssm-s3-bucket", BUCKET, "--ssm-s3-prefix", prefix, "--region",
                        "us-east-1", "--ssm-poll-interval", str(poll), "--ssm-max-concurrency", "100%",
                        "--ssm-max-errors", "100%", "--deadline", str(deadline), *store, "--quiet",
                        "--format", "json", "--out", outdir]
            started = time.monotonic()
            wall, rss, code, text = child(argv, env, source)
            calls = dict(aws.endpoint.calls)
            runs = [v for v in aws.endpoint.invocations.values() if v.started and v.ended and v.s3_prefix == prefix]
            answered = max(v.ended for v in runs) - min(v.started for v in runs) if runs else 0.0
            # the child's start to its (first) SendCommand: interpreter start-up, discovery, the agent check
            sent = min((c.sent_at for cid, c in aws.endpoint.command_info.items()
                        if c.ids and aws.endpoint.invocations[(cid, c.ids[0])].s3_prefix == prefix),
                       default=started) - started
            if name in ("scan", "scan-store"):
                saved = Path(outdir) / "report.json"
                hosts = (json.loads(saved.read_text()) if saved.exists() else {}).get("hosts") or []
                result = {"ok": sum(h.get("status") == "ok" for h in hosts), "hosts": len(hosts), "exit": code}
                if name == "scan-store":  # the hosts the store recorded (a complete scan)
                    with contextlib.closing(sqlite3.connect(keep / "history.sqlite3")) as db:
                        result["recorded"] = db.execute("SELECT count(*) FROM scan_hosts h JOIN scans s ON "
                                                        "s.id = h.scan_id WHERE s.state = 'complete'").fetchone()[0]
                text = json.dumps(result)
                shutil.rmtree(outdir, ignore_errors=True)
                shutil.rmtree(keep, ignore_errors=True)
            rows.append({"n": n, "child": name, "wall": wall, "rss": rss, "calls": calls, "result": text.strip(),
                         "answered": answered, "sent": sent, "load": os.getloadavg()})
            print(f"# {name} {n}: {wall:.0f} s, {rss / 2**20:.0f} MiB, {text.strip()}", file=sys.stderr, flush=True)
    return rows


def report(rows: list[dict]) -> None:
    print(f"{'instances':>9} {'child':<6} {'wall s':>7} {'peak RSS MiB':>13} {'SSM calls':>9} {'per inst':>9} "
          f"{'load 1/5/15 at end':>18}  by operation")
    for r in rows:
        total = sum(r["calls"].values())
        ops = ", ".join(f"{op} {c}" for op, c in sorted(r["calls"].items()))
        print(f"{r['n']:>9} {r['child']:<6} {r['wall']:>7.1f} {r['rss'] / 2**20:>13.0f} {total:>9} "
              f"{total / r['n']:>9.4f} {'/'.join(f'{x:.1f}' for x in r['load']):>18}  {ops}")
        print(f"{'':>17}SendCommand {r['sent']:.1f} s after the child started (discovery); the endpoint answered "
              f"every instance within {r['answered']:.1f} s; child: {r['result']}")
    for name in dict.fromkeys(r["child"] for r in rows):  # growth: what each 1,000 more instances cost
        sizes = sorted((r["n"], r["rss"]) for r in rows if r["child"] == name)
        for (n0, rss0), (n1, rss1) in zip(sizes, sizes[1:]):
            print(f"{name}: {(rss1 - rss0) / 2**20 / (n1 - n0) * 1000:.1f} MiB more peak RSS per 1,000 instances "
                  f"from {n0} to {n1}")


if __name__ == "__main__":
    sys.exit(main())
