"""Start-up stays light: `--help` and `rules list` do not import the libraries only some commands need
(boto3, deepdiff, jinja2, paramiko, …). Behaviour, not timing: benchmarks/bench_startup.py prints the times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import auditor

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
print(json.dumps({"code": code, "loaded": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def loaded_by(*argv: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr
    return set(result["loaded"]) & set(HEAVY)


@pytest.mark.parametrize("argv", [("--help",), ("scan", "--help"), ("collect", "--help"), ("diff", "--help"),
                                  ("report", "--help"), ("history", "--help")])
def test_help_imports_none_of_the_heavy_libraries(argv: tuple[str, ...]) -> None:
    assert loaded_by(*argv) == set()


def test_rules_list_loads_only_what_rules_need() -> None:
    # YAML rule packs, JMESPath conditions and jinja2 title templates are the judge's own; no cloud,
    # SSH, deepdiff or jsonschema
    assert loaded_by("rules", "list") <= {"yaml", "jmespath", "jinja2"}
