"""`ami-auditor completion bash|zsh|fish`: print a completion script generated from the parser."""

from __future__ import annotations

import argparse

from .. import exitcodes
from ..context import Env
from .completion_scripts import SHELLS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh, fish)",
                       description="Install with one command, e.g. bash: `ami-auditor completion bash > "
                                   "~/.local/share/bash-completion/completions/ami-auditor`; zsh: "
                                   "`ami-auditor completion zsh > ~/.zfunc/ami-auditor.zsh` and source it from "
                                   "~/.zshrc; fish: `ami-auditor completion fish > "
                                   "~/.config/fish/completions/ami-auditor.fish`.")
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from ..cli import build_parser  # the whole parser, every command registered
    from .completion_scripts import script

    env.write(script(args.shell, build_parser()))
    return exitcodes.OK
