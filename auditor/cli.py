"""Command-line entry point: parse arguments, call one function per command, map errors to exit codes."""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__, exitcodes
from .context import Env
from .errors import AuditorError, InputError

# Command modules under auditor/commands/, in help order. Each has register(subparsers).
COMMANDS = ("collect", "scan", "baseline", "diff", "report", "rules", "ssm", "history")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's exit 2 is our "bad usage" too
        raise InputError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ami-auditor", description="Audit Linux cloud hosts and AMIs for drift.")
    parser.add_argument("--version", action="version", version=f"ami-auditor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f".commands.{name}", __package__)
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.commands.{name}":
                continue  # command not built yet
            raise
        try:
            module.register(sub)
        except ModuleNotFoundError as exc:  # a stage the command needs is not built yet
            if not (exc.name or "").startswith(f"{__package__}."):
                raise
    return parser


def main(argv: list[str] | None = None, env: Env | None = None) -> int:
    env = env or Env()
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args, env))
    except InputError as exc:
        env.err(f"ami-auditor: error: {exc}")
        return exitcodes.BAD_INPUT
    except AuditorError as exc:  # the cloud API or a host could not be reached: nothing was audited
        env.err(f"ami-auditor: error: {exc}")
        return exitcodes.INCOMPLETE
    except KeyboardInterrupt:
        env.err("ami-auditor: interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
