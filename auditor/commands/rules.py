"""`ami-auditor rules list`, `ami-auditor rules check PATH [--snapshot FILE…]` and `ami-auditor rules facts
[PREFIX]` (the declared fact paths that rules, baselines, --group-by and `history trend` name)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..context import Env
from .rule_options import add_rule_options, rule_options

if TYPE_CHECKING:
    from ..judge.rules import RuleSet
    from ..models import Finding


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="list the rules, or check rule files (and try them on saved snapshots)")
    rsub = p.add_subparsers(dest="rules_command", metavar="{list,check,facts}")
    rsub.required = True
    lp = rsub.add_parser("list", help="list the rules that a scan would run")
    add_rule_options(lp)
    lp.add_argument("--json", action="store_true", help="print the list as JSON")
    lp.set_defaults(func=run_list)
    cp = rsub.add_parser("check", help="validate rule files (exit 2 naming file and line on the first error)")
    cp.add_argument("path", metavar="PATH", help="a rule file or a directory of *.yaml rule files")
    add_rule_options(cp)
    cp.add_argument("--waivers", action="append", default=[], metavar="FILE", help="also validate these waivers")
    cp.add_argument("--snapshot", action="append", default=[], metavar="FILE",
                    help="run PATH's rules on a saved snapshot JSON and print what they find; repeatable")
    cp.set_defaults(func=run_check)
    fp = rsub.add_parser("facts", help="list the fact paths that rules, baselines, --group-by and history trend name")
    fp.add_argument("prefix", nargs="?", default="", metavar="PREFIX",
                    help="only the paths that start with this, e.g. facts.systemd")
    fp.add_argument("--json", action="store_true", help="print the list as JSON")
    fp.set_defaults(func=run_facts)


def run_facts(args: argparse.Namespace, env: Env) -> int:
    """Declared fact paths (facts.yaml) with type and description; `volatile` ones never drift or group."""
    from ..collect.facthints import close_paths
    from ..collect.schema import fact_paths
    from ..errors import InputError

    specs = [spec for path, spec in fact_paths().items() if path.startswith(args.prefix)]
    rows = [{"path": s.path, "type": s.type, "volatile": s.volatile, "description": s.description} for s in specs]
    if not specs:
        near = close_paths(args.prefix)
        raise InputError(f"no fact path starts with {args.prefix!r}"
                         + (f" (did you mean {', '.join(near)}?)" if near else " (they start with facts. or host.)"))
    if args.json:
        env.out_json(rows)
        return 0
    width = min(max(len(s.path) for s in specs), 60)
    for spec in specs:
        kind = spec.type + (", volatile" if spec.volatile else "")
        env.out(f"{spec.path:<{width}}  {kind:<17}  {spec.description}")
    env.out(f"{len(specs)} fact paths" + (f" under {args.prefix}" if args.prefix else ""))
    return 0


def _rows(ruleset: RuleSet) -> list[dict]:
    return [{"id": r.id, "severity": r.severity, "pack": r.pack, "title": r.name, "tags": list(r.tags),
             "reads": sorted(f"facts.{a}" for a in r.areas), "source": f"{r.source}:{r.line}", "refs": list(r.refs)}
            for r in ruleset.rules]


def run_list(args: argparse.Namespace, env: Env) -> int:
    from ..judge.stage import load_ruleset  # YAML, JMESPath and jinja2 load only here

    ruleset = load_ruleset(rule_options(args))  # every pack validated: a malformed one exits 2 naming file and line
    rows = _rows(ruleset)
    if args.json:
        env.out_json(rows)
        return 0
    width = max((len(r["id"]) for r in rows), default=10)
    for r in rows:
        env.out(f"{r['id']:<{width}}  {r['severity']:<8}  {r['title']}")
        for ref in r["refs"]:  # its public sources, one a line under it
            env.out(f"{'':<{width}}  source    {ref}")
    env.out(f"{len(rows)} rules in {len(ruleset.packs)} packs")
    return 0


def run_check(args: argparse.Namespace, env: Env) -> int:
    from ..judge.rulefiles import rule_files
    from ..judge.rules import RuleSet
    from ..judge.stage import load_ruleset
    from ..judge.waivers import load_waivers

    own = {str(f) for f in rule_files([args.path], builtin=False)}
    builtin = {str(f.resolve()) for f in rule_files([], builtin=True)}
    opts = rule_options(args)
    if any(str(Path(f).resolve()) in builtin for f in own):
        opts = replace(opts, builtin=False)  # checking the built-in packs themselves
    opts = replace(opts, rule_paths=(*opts.rule_paths, args.path))
    ruleset = load_ruleset(opts)  # built-ins too (unless --no-builtin-rules): ids must not clash
    for path in args.waivers:
        load_waivers(path, ruleset.ids())
    mine = [r for r in ruleset.rules if r.source in own]
    env.out(f"{args.path}: OK — {len(mine)} rule(s) valid ({', '.join(r.id for r in mine)})")
    if args.snapshot:
        _try_on_snapshots(env, RuleSet(mine, ruleset.packs, ruleset.files), args.snapshot)
    return 0


def _try_on_snapshots(env: Env, ruleset: RuleSet, paths: list[str]) -> None:
    """The rules over saved snapshots through the run driver (as scan and analyze judge them, trend facts
    empty: no store), findings per snapshot, then the fleet rules' over all of them. No waiver applies."""
    from ..compare.sources import load_snapshot_file
    from ..compare.stage import ComparePlan
    from ..evaluate.core import EvalPlan
    from ..evaluate.files import as_result
    from ..judge.stage import JudgePlan
    from ..render.stage import RenderPlan
    from ..run.driver import HeldHosts, RunPlan, drive

    snaps = [(path, load_snapshot_file(path)) for path in paths]  # bad input: exit 2 before any is judged
    hosts = [as_result(snap, path) for path, snap in snaps]
    plan = RunPlan(EvalPlan(JudgePlan(ruleset), ComparePlan(), None), RenderPlan(("json",), None, quiet=True))
    report = drive(HeldHosts(hosts), plan, env).report
    fleet_rules = {r.id for r in ruleset.rules if r.fleet is not None}
    by_host: dict[str, list[Finding]] = {}
    for f in report.findings:
        if f.rule not in fleet_rules:
            by_host.setdefault(f.host, []).append(f)
    for (path, snap), host in zip(snaps, report.hosts):
        if host.status != "ok":
            env.out(f"{path} ({host.name}): {host.status}: {host.error}")
            continue
        findings = by_host.pop(host.name, [])
        env.out(f"{path} ({snap.get('name')}): {len(findings)} finding(s)")
        _show_findings(env, findings)
    if fleet_rules:  # fleet rules: over all the snapshots given
        findings = [f for f in report.findings if f.rule in fleet_rules]
        env.out(f"fleet rules over {len(snaps)} snapshot(s): {len(findings)} finding(s)")
        _show_findings(env, findings, host=True)


def _show_findings(env: Env, findings: list[Finding], host: bool = False) -> None:
    for f in findings:
        item = f" [{f.item}]" if f.item else ""
        who = f"{f.host}: " if host else ""
        env.out(f"  [{f.severity.upper():8}] {who}{f.rule}{item}: {f.title}")
