"""`ami-auditor scan`: collect + judge + compare + render, one report per run.

Each stage (auditor/judge/stage.py, auditor/compare/stage.py, auditor/render/stage.py) offers
`add_options(parser)`, `prepare(args)` — which loads and validates every input file BEFORE any host
is contacted (bad input exits 2, nothing written) — and `apply(prepared, report, snapshots)`.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from .. import exitcodes
from ..app import collect_hosts
from ..collect.probe import DEFAULT_BINARIES
from ..collect.snapshot import now_iso
from ..context import Env
from ..history.stage import GROWTH_RULE
from ..models import SEVERITIES, Report, severity_rank
from .checks import check_host_keys, redact_errors
from .common import add_target_options, one_line, progress_printer, resolve_specs

# Order matters: judge before compare (symptom ranking reads findings), render last.
STAGES = ("judge", "history", "compare", "render")


def _stage(name: str) -> Any:
    return importlib.import_module(f"auditor.{name}.stage")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scan", help="collect, judge with rules, compare, and report")
    add_target_options(p)
    p.add_argument("--fail-on", choices=SEVERITIES, default="high",
                   help="exit 1 when a finding or drift at or above this severity is found (default high)")
    for name in STAGES:
        _stage(name).add_options(p)
    p.set_defaults(func=run)


def failing(report: Report) -> bool:
    """Any unwaived finding, or drift, at or above --fail-on."""
    if report.fail_on is None:
        return False
    bar = severity_rank(report.fail_on)
    if any(not f.waived and severity_rank(f.severity) >= bar for f in report.findings):
        return True
    return any(severity_rank(d.severity) >= bar for d in report.drift)


def run(args: argparse.Namespace, env: Env) -> int:
    prepared: dict[str, Any] = {}
    for name in STAGES:  # every input validated before any host is contacted or file written
        prepared[name] = _stage(name).prepare(args)
        if name == "judge":  # --symptom RULE must be one of these
            args.known_rule_ids = frozenset(prepared[name].ruleset.ids()) | {GROWTH_RULE}
    specs = resolve_specs(args)  # with --ec2, discovery (an API call, no host contacted) gives the labels
    plan = prepared["compare"]
    check_host_keys([(opt, key) for opt, key in (("--group-by", plan.group_by),
                                                  ("--symptom", plan.symptom.key if plan.symptom else None)) if key],
                    specs)
    results = collect_hosts(
        specs, parallel=args.parallel, binaries=args.binary or DEFAULT_BINARIES,
        deadline_s=args.deadline, progress=progress_printer(env), notes=args.notes,
        exec_versions=args.exec_versions,
    )
    results = redact_errors(results)
    report = Report(hosts=results, generated_at=now_iso(), fail_on=args.fail_on, notes=list(args.notes))
    snapshots = [r.snapshot for r in results if r.snapshot is not None]
    for name in ("judge", "history", "compare"):
        _stage(name).apply(prepared[name], report, snapshots)
    incomplete = not all(r.complete for r in results)
    report.exit_code = exitcodes.combine(failing(report), incomplete)
    for result in results:
        env.out(one_line(result))
    _stage("render").apply(prepared["render"], report, snapshots)
    saved = _stage("history").finish(prepared["history"], report)
    _stage("render").summarize(report, env)
    if saved:
        env.out(f"saved to history: {saved}")
    return report.exit_code
