"""`ami-auditor collect`: one snapshot JSON per host, written as one set once every host is done (a full or
read-only disk: exit 3 and the previous snapshots of those names unchanged)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import exitcodes
from ..atomicio import check_writable_dir, write_files
from ..context import Env
from ..render.terminal import one_line, progress_printer
from .checks import unique_stems
from .common import add_target_options, file_stem, target_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect", help="collect a snapshot of each host (one round trip per host)")
    add_target_options(p)
    p.add_argument("-o", "--out", default="snapshots", metavar="DIR",
                   help="where to write NAME.json (names that sanitise alike get -<sha256[:8]>)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from ..app import collect_hosts, redact_errors  # here, not at start-up: `--help` stays light
    from ..targets.resolve import resolve_specs

    opts = target_options(args)
    notes: list[str] = []
    specs = resolve_specs(opts, notes)
    out = Path(args.out)
    check_writable_dir(out, "--out")  # before any host is contacted
    stems = unique_stems([s.name for s in specs], file_stem)
    for spec in specs:
        if stems[spec.name] != file_stem(spec.name):
            env.err(f"note: {spec.name!r} is written as {stems[spec.name]}.json "
                    f"(another host's name also sanitises to {file_stem(spec.name)}.json)")
    results = collect_hosts(specs, parallel=opts.parallel, binaries=opts.binaries, deadline_s=opts.deadline_s,
                            progress=progress_printer(env), notes=notes, exec_versions=opts.exec_versions,
                            deep_cpu=opts.deep_cpu)
    results = redact_errors(results)
    for note in notes:
        env.err(f"note: {note}")
    from ..render.json_renderer import render_bytes

    write_files([(out / f"{stems[r.name]}.json", render_bytes(r.snapshot)) for r in results if r.snapshot is not None])
    for result in results:
        env.out(one_line(result))
    reached = sum(r.status == "ok" for r in results)
    env.out(f"{reached}/{len(results)} hosts collected; snapshots in {out}/")
    return exitcodes.combine(False, not all(r.complete for r in results))
