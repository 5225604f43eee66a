"""`ami-auditor collect`: one snapshot JSON per host. Each snapshot is staged beside its file as its host
completes and then dropped (memory does not grow with the fleet); the set replaces the previous snapshots
of those names once every host is done, as a whole or not at all (a full or read-only disk: exit 3)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import exitcodes
from ..atomicio import StagedFiles, check_writable_dir
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
    from ..run.live_hosts import iter_hosts  # here, not at start-up: `--help` stays light
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
    from ..render.json_renderer import render_bytes

    lines: list[str] = [""] * len(specs)  # per host only its status line survives its snapshot
    reached = complete = 0
    with StagedFiles() as staged:
        for index, result in iter_hosts(specs, parallel=opts.parallel, binaries=opts.binaries,
                                        deadline_s=opts.deadline_s, progress=progress_printer(env), notes=notes,
                                        exec_versions=opts.exec_versions, deep_cpu=opts.deep_cpu):
            if result.snapshot is not None:
                staged.add(out / f"{stems[result.name]}.json", render_bytes(result.snapshot))
            lines[index] = one_line(result)
            reached += result.status == "ok"
            complete += result.complete
        for note in notes:
            env.err(f"note: {note}")
        staged.commit()
    for line in lines:
        env.out(line)
    env.out(f"{reached}/{len(specs)} hosts collected; snapshots in {out}/")
    return exitcodes.decide(exitcodes.Outcome(incomplete=complete < len(specs)))
