"""Shell completion generated from the parser (`ami-auditor completion bash|zsh|fish`), loaded by real
bash and zsh: the completion function is called as the shell would, and its candidates checked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT


def script(shell: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "auditor.cli", "completion", shell], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=60, check=True)
    return done.stdout


def complete(shell: str, words: list[str], tmp_path: Path) -> list[str]:
    """Candidates the loaded script offers for `words` (the last one being completed)."""
    path = tmp_path / f"ami-auditor.{shell}"
    path.write_text(script(shell))
    quoted = " ".join(f"'{w}'" for w in words)
    prelude = "autoload -U +X compinit && compinit -u; autoload -U +X bashcompinit && bashcompinit; " \
        if shell == "zsh" else ""
    body = (f"{prelude}source {path}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
            f"COMP_LINE='{' '.join(words)}'; _ami_auditor; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    done = subprocess.run([shell, "-c", body], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


SHELLS = [pytest.param(s, marks=pytest.mark.skipif(shutil.which(s) is None, reason=f"no {s}")) for s in ("bash", "zsh")]


@pytest.mark.parametrize("shell", SHELLS)
def test_commands_options_and_choices_complete(shell: str, tmp_path: Path) -> None:
    assert {"scan", "analyze", "history", "completion"} <= set(complete(shell, ["ami-auditor", ""], tmp_path))
    assert complete(shell, ["ami-auditor", "sc"], tmp_path) == ["scan"]
    options = complete(shell, ["ami-auditor", "scan", "--ssh-"], tmp_path)
    assert {"--ssh-identity", "--ssh-user", "--ssh-known-hosts", "--ssh-config"} <= set(options)
    assert complete(shell, ["ami-auditor", "scan", "--color", ""], tmp_path) == ["auto", "always", "never"]
    assert "critical" in complete(shell, ["ami-auditor", "scan", "--fail-on", ""], tmp_path)
    analyze = complete(shell, ["ami-auditor", "analyze", "--"], tmp_path)  # per command: scan's own stay out
    assert "--store" in analyze and "--parallel" not in analyze and "--notify" not in analyze


def test_fish_script_names_every_command_and_option() -> None:
    text = script("fish")
    assert "complete -c ami-auditor -n __fish_use_subcommand -a scan" in text
    assert "complete -c ami-auditor -n '__fish_seen_subcommand_from scan' -l ssh-identity" in text
    assert "-l color -l colour -r -a 'auto always never'" in text


def test_unknown_shell_is_bad_usage() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "auditor.cli", "completion", "tcsh"], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert done.returncode == 2
