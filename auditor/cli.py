"""Command-line entry point: parse arguments, call one function per command, map errors to exit codes.

Exit codes (exitcodes.decide, README): 0 clean, 1 findings, 2 bad input, 3 incomplete, 4 internal error.
An unexpected exception is reported in one line (the traceback only with `ami-auditor --debug …`),
never as exit 1, so a CI gate can tell a crash from a failed audit.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import traceback
from typing import Protocol, cast

from . import __version__, interrupt, textsafe
from .context import Env, tolerant_streams
from .errors import AuditorError, InputError, OutputError
from .exitcodes import Outcome, decide


class CommandModule(Protocol):
    """A module under auditor/commands/ that adds its subcommand(s) to the parser."""

    def register(self, sub: argparse._SubParsersAction) -> None: ...


# Each auditor/commands/NAME.py registers the one command NAME. A run imports only its command's module (the
# others load libraries it does not need: `rules list` need not import the SSM, EC2 and history code);
# `--help`, no command or an unknown one import them all. A missing module is still a ModuleNotFoundError at
# start-up (below), never a silently absent command; tests/unit/test_startup.py checks each module adds its NAME.
COMMANDS: tuple[str, ...] = ("collect", "scan", "analyze", "baseline", "diff", "report", "rules", "ssm", "history",
                             "ami", "completion")
for _name in COMMANDS:  # finding a module's file does not run it
    if importlib.util.find_spec(f"{__package__}.commands.{_name}") is None:
        raise ModuleNotFoundError(f"No module named '{__package__}.commands.{_name}'",
                                  name=f"{__package__}.commands.{_name}")

_MAX_INTERNAL_MESSAGE = 300


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # argparse's exit 2 is our "bad usage" too
        raise InputError(message)


def _command_word(argv: list[str]) -> str | None:
    """The command named in `argv` (its first word after the global options), if it is one of COMMANDS."""
    for arg in argv:
        if arg == "--debug":
            continue
        return arg if arg in COMMANDS else None
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given `argv` naming a command, with only that command registered (same parse, less import)."""
    word = _command_word(argv) if argv is not None else None
    parser = _Parser(prog="ami-auditor", description="Audit Linux cloud hosts and AMIs for drift.")
    parser.add_argument("--version", action="version", version=f"ami-auditor {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on an internal error (exit 4), print the traceback (give before COMMAND)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in (word,) if word else COMMANDS:
        module = cast(CommandModule, importlib.import_module(f"{__package__}.commands.{name}"))
        module.register(sub)
    return parser


def _wants_debug(argv: list[str]) -> bool:
    """`--debug` among the global options (before the command), known even if parsing fails."""
    for arg in argv:
        if arg == "--debug":
            return True
        if not arg.startswith("-"):
            return False
    return False


def clean(text: str) -> str:
    """A message safe for the terminal: URL passwords redacted, control characters escaped."""
    from .targets.inventory import redact_urls  # only when there is a message: `--help` does not load YAML

    return textsafe.block(redact_urls(text))


def internal_error_line(exc: BaseException) -> str:
    """`ami-auditor: internal error: TypeError: … (run with --debug for the traceback)` — one line."""
    message = " ".join(clean(str(exc)).split())
    if len(message) > _MAX_INTERNAL_MESSAGE:
        message = message[:_MAX_INTERNAL_MESSAGE] + "…"
    detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return f"ami-auditor: internal error: {detail} (run with --debug for the traceback)"


def main(argv: list[str] | None = None, env: Env | None = None) -> int:
    if env is None:
        tolerant_streams()
        env = Env()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _wants_debug(argv)
    try:
        for i, arg in enumerate(argv, 1):  # only reachable through main(argv): a shell cannot pass NUL
            if "\0" in arg:
                raise InputError(f"argument {i} contains a NUL character")
        args = build_parser(argv).parse_args(argv)
        with interrupt.handlers():  # SIGINT/SIGTERM unwind through every `finally` (ami:// deletes its volume)
            return int(args.func(args, env))
    except InputError as exc:
        for error in getattr(exc, "errors", [exc]):  # InputErrors: every independent one, a line each
            env.err(f"ami-auditor: error: {clean(str(error))}")
        return decide(Outcome(bad_input=True))
    except AuditorError as exc:  # the cloud API or a host could not be reached, or the results not saved (OutputError)
        env.err(f"ami-auditor: error: {clean(str(exc))}")
        return decide(Outcome(not_saved=isinstance(exc, OutputError), incomplete=True))
    except KeyboardInterrupt as exc:
        env.err(f"ami-auditor: {'terminated' if isinstance(exc, interrupt.Terminated) else 'interrupted'}")
        return int(getattr(exc, "exit_code", 130))
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: exit 4, never 1 ("findings")
        if debug:
            env.err(clean("".join(traceback.format_exception(exc))).rstrip("\n"))
        env.err(internal_error_line(exc))
        return decide(Outcome(crashed=True))


if __name__ == "__main__":
    sys.exit(main())
