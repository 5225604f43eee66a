"""`scan` from typed options: typed options in, no argparse or stage lookup by name past the CLI layer,
a missing module is an error, and bad input in the options stops the scan before any host is contacted."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.cli import build_parser
from auditor.commands.scan import scan_options
from auditor.context import Env
from auditor.errors import InputError
from auditor.options import CompareOptions, RenderOptions, ScanOptions, TargetOptions
from auditor.run import scan as scan_run

PACKAGE = Path(scan_run.__file__).parents[1]
CLI_LAYER = {PACKAGE / "cli.py", *(PACKAGE / "commands").glob("*.py")}


def test_the_cli_builds_frozen_typed_options() -> None:
    opts = scan_options(build_parser().parse_args(
        ["scan", "local", "--binary", "sh", "--group-by", "az", "--format", "json,md", "--ec2", "tag:a=b",
         "--set", "cgroups.dying_warn=5"]))
    assert opts.targets.targets == ("local",) and opts.targets.binaries == ("sh",)
    assert opts.compare.group_by == "az" and opts.render.formats == "json,md"
    assert opts.judge.rules.settings == ("cgroups.dying_warn=5",)
    assert [f.name for f in opts.targets.aws.ec2] == ["tag:a"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.fail_on = "low"  # type: ignore[misc]
    assert scan_options(build_parser().parse_args(["scan", "local"])) == ScanOptions(TargetOptions(("local",)))


def test_no_argparse_and_no_import_by_name_past_the_cli_layer() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in CLI_LAYER:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Attribute) and node.attr == "import_module":
                names = ["importlib.import_module"]
            offenders += [f"{path.relative_to(PACKAGE)}: {n}" for n in names
                          if n == "argparse" or n == "importlib.import_module"]
    assert offenders == []


@pytest.mark.parametrize("module", ["auditor.render.markdown_renderer", "auditor.commands.history"])
def test_a_missing_module_is_an_error_not_a_missing_format_or_command(module: str) -> None:
    # as if the file were absent; cli.py imports only the command run (all of them for --help) but checks at
    # import that every command module exists
    code = f"import sys; sys.modules[{module!r}] = None; from auditor.cli import main; sys.exit(main(['--help']))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "ModuleNotFoundError" in proc.stderr and module in proc.stderr


def test_scan_runs_from_typed_options_without_a_command_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    opts = ScanOptions(TargetOptions(("local",), binaries=("sh",)), fail_on="critical",
                       render=RenderOptions("json,md", str(out)))
    stdout = io.StringIO()
    code = scan_run.scan(opts, Env(stdout, io.StringIO()))
    report = json.loads((out / "report.json").read_text())
    assert code == report["summary"]["exit_code"] == 0
    assert [(h["name"], h["status"]) for h in report["hosts"]] == [("local", "ok")]
    assert (out / "report.md").is_file() and "exit code 0" in stdout.getvalue()


def test_bad_input_in_the_options_stops_before_any_host_is_contacted(tmp_path: Path) -> None:
    with socket.socket() as listener:  # a real listener: a contacted host would show as a pending connection
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        target = f"ssh://root@127.0.0.1:{listener.getsockname()[1]}"
        bad = tmp_path / "golden.yaml"
        bad.write_text("expect: [1\n")
        opts = ScanOptions(TargetOptions((target,)), compare=CompareOptions(baseline=str(bad)),
                           render=RenderOptions("json", str(tmp_path / "out")))
        with pytest.raises(InputError, match="golden.yaml"):
            scan_run.scan(opts, Env(io.StringIO(), io.StringIO()))
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert not (tmp_path / "out").exists()
