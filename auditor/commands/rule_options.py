"""Command-line options that choose and configure rules (shared by `scan` and `rules`)."""

from __future__ import annotations

import argparse

from ..options import RuleOptions


def add_rule_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rules", action="append", default=[], metavar="DIR",
                        help="extra rule packs (a directory of *.yaml, or a file); repeatable; adds to the built-ins")
    parser.add_argument("--no-builtin-rules", action="store_true", help="do not load the built-in rule packs")
    parser.add_argument("--set", action="append", default=[], metavar="PACK.PARAM=VALUE", dest="rule_set",
                        help="override a rule-pack parameter, e.g. cgroups.dying_warn=500 (VALUE is YAML)")
    parser.add_argument("--rules-config", default=None, metavar="FILE",
                        help="YAML file of rule-pack parameters: {pack: {param: value}}")


def rule_options(args: argparse.Namespace) -> RuleOptions:
    return RuleOptions(rule_paths=tuple(args.rules), builtin=not args.no_builtin_rules,
                       settings=tuple(args.rule_set), config=args.rules_config)
