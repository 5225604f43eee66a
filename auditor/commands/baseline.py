"""`ami-auditor baseline capture TARGET|-i INVENTORY [--host NAME]|--snapshot FILE -o golden.yaml`."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from .. import exitcodes
from ..atomicio import check_writable_file, write_text_atomic
from ..context import Env
from ..errors import InputError
from ..snapshotdoc import Snapshot
from .common import add_target_options, target_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("baseline", help="golden baselines: capture one from a host")
    actions = p.add_subparsers(dest="baseline_command", metavar="ACTION")
    actions.required = True
    cap = actions.add_parser("capture", help="write a host's stable facts as an editable YAML baseline")
    add_target_options(cap)
    cap.add_argument("--host", metavar="NAME", help="with -i: the inventory host to capture")
    cap.add_argument("--snapshot", metavar="FILE", help="capture from a saved snapshot JSON instead of a live host")
    cap.add_argument("-o", "--out", required=True, metavar="FILE", help="baseline YAML to write (- for stdout)")
    cap.set_defaults(func=run_capture)


def _snapshot(args: argparse.Namespace, env: Env) -> Snapshot | int:
    """The source snapshot, or an exit code when the host could not be reached."""
    from ..compare.sources import load_snapshot_file
    from ..run.live_hosts import collect_host, redact_errors  # here, not at start-up: `--help` stays light
    from ..targets.resolve import resolve_specs

    if args.snapshot:
        if args.targets or args.inventory:
            raise InputError("give either --snapshot FILE or a target/inventory, not both")
        return load_snapshot_file(args.snapshot)
    opts = target_options(args)
    specs = resolve_specs(opts)
    if args.host:
        specs = [s for s in specs if s.name == args.host]
        if not specs:
            raise InputError(f"--host {args.host!r}: no such host in the targets/inventory")
    if len(specs) != 1:
        raise InputError(f"a baseline comes from one host; got {len(specs)} (pick one with --host NAME)")
    result = collect_host(specs[0], opts.binaries, opts.deadline_s, opts.exec_versions, opts.deep_cpu)
    snap = result.whole
    if snap is None:
        redact_errors([result])
        env.err(f"ami-auditor: {result.name}: {result.status}: {result.error}")
        return exitcodes.decide(exitcodes.Outcome(incomplete=True))
    return snap


def run_capture(args: argparse.Namespace, env: Env) -> int:
    from ..compare.baseline import load_baseline
    from ..compare.capture import capture, render
    from ..compare.normalize import normalize

    if args.out != "-":
        check_writable_file(Path(args.out), "-o/--out")  # before any host is contacted
    snapshot = _snapshot(args, env)
    if isinstance(snapshot, int):
        return snapshot
    source, expect = capture(snapshot)
    unknown = sorted(normalize(snapshot).unknown)
    text = render(source, expect, unknown)
    for area in unknown:
        env.err(f"ami-auditor: warning: {area} facts unknown on {source['host']} "
                f"({(snapshot.get('errors') or {}).get(area, 'collector failed')}); not in the baseline")
    if args.out == "-":
        env.write(text)
        return exitcodes.OK
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="ami-auditor-baseline.") as scratch:
        check = Path(scratch) / out.name
        check.write_text(text, encoding="utf-8")
        try:
            load_baseline(str(check))  # what we write must load back (checked away from --out)
        except InputError as exc:  # our bug, not the user's input: exit 4, naming --out, not the scratch file
            raise RuntimeError(f"the baseline for {out} would not load back ({exc.message}); nothing written") \
                from None
    write_text_atomic(out, text)
    env.out(f"baseline of {source['host']}: {len(expect)} facts → {out}")
    return exitcodes.OK
