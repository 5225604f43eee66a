"""Start-up stays light: `--help` and `rules list` do not import the libraries only some commands need
(boto3, deepdiff, jinja2, paramiko, …); a command imports only its own command module. Behaviour, not
timing: benchmarks/bench_startup.py prints the times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import auditor
from auditor.cli import COMMANDS, build_parser

ROOT = Path(auditor.__file__).resolve().parent.parent  # `python -c` imports from its working directory
HEAVY = ("boto3", "botocore", "deepdiff", "jinja2", "paramiko", "jsonschema", "yaml", "jmespath", "re2")

PROBE = """
import contextlib, io, json, sys
from auditor.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "loaded": sorted(sys.modules)}))
"""


def modules_loaded_by(*argv: str, code: int = 0) -> set[str]:
    """Every module a whole `ami-auditor ARGV` process has imported when it ends (its exit code checked)."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == code, proc.stderr
    return set(result["loaded"])


def loaded_by(*argv: str) -> set[str]:
    """The heavy libraries among them."""
    return {m.split(".")[0] for m in modules_loaded_by(*argv)} & set(HEAVY)


@pytest.mark.parametrize("argv", [("--help",), ("scan", "--help"), ("collect", "--help"), ("diff", "--help"),
                                  ("report", "--help"), ("history", "--help")])
def test_help_imports_none_of_the_heavy_libraries(argv: tuple[str, ...]) -> None:
    assert loaded_by(*argv) == set()


def test_rules_list_loads_only_what_rules_need() -> None:
    # YAML rule packs, JMESPath conditions and jinja2 title templates are the judge's own; no cloud,
    # SSH, deepdiff or jsonschema.
    assert loaded_by("rules", "list") == {"yaml", "jmespath", "jinja2"}
    assert loaded_by("rules", "list", "--json") == {"yaml", "jmespath", "jinja2"}


def test_a_command_imports_only_its_own_command_module() -> None:
    commands = {m for m in modules_loaded_by("rules", "list") if m.startswith("auditor.commands.")}
    assert commands == {"auditor.commands.rules", "auditor.commands.rule_options"}
    everything = modules_loaded_by("--help")
    assert {f"auditor.commands.{name}" for name in COMMANDS} <= everything


def test_every_command_module_registers_exactly_its_own_command() -> None:
    # cli.py imports the module named by the command word only: that module must be the one that adds it
    for name in COMMANDS:
        sub = build_parser([name])._subparsers._group_actions[0]  # type: ignore[union-attr]
        assert list(sub.choices) == [name]
    full = build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    assert list(full.choices) == list(COMMANDS)


@pytest.mark.parametrize("argv", [["rules", "list", "--set", "cgroups.dying_warn=5", "--json"],
                                  ["--debug", "rules", "check", "rules/cgroups.yaml"],
                                  ["scan", "local", "--fail-on", "high"], ["history", "list"], ["ssm", "document"]])
def test_parsing_with_one_command_registered_gives_the_same_options(argv: list[str]) -> None:
    assert vars(build_parser(argv).parse_args(argv)) == vars(build_parser().parse_args(argv))
