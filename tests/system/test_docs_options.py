"""Every `--option` the README and the documentation give a command exists in that command's `--help`.

A command is documented wherever `ami-auditor COMMAND [SUBCOMMAND] …` appears in a code block or a code span
(table cells and alternatives such as `history list \\| trend FACT_PATH [--host H]` included: an option belongs
to the subcommand written before it). The `--help` text is the tool's own (`python -m auditor.cli … --help`,
this checkout), so an option that was removed or renamed, or never existed (`scan --history DIR`), fails here
with the file and line that documents it. The `scan` option list of docs/commands.md is checked too."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
WORD = re.compile(r"[a-z][a-z0-9-]*")


@functools.cache
def help_text(*command: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), COLUMNS="200")
    done = subprocess.run([sys.executable, "-m", "auditor.cli", *command, "--help"], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 0, f"ami-auditor {' '.join(command)} --help: {done.stderr}"
    return done.stdout


@functools.cache
def options(*command: str) -> frozenset[str]:
    """The options `command`'s --help defines (its option lines, not options its prose mentions)."""
    return frozenset(o for line in help_text(*command).splitlines() if re.match(r"\s+(-\w[ ,]|--)", line)
                     for o in OPTION.findall(line.split("  ", 2)[1] if line.startswith("  ") else line))


@functools.cache
def subcommands(*command: str) -> frozenset[str]:
    """The (sub)commands listed under "positional arguments" of `command`'s --help."""
    text = help_text(*command)
    listed = text.split("positional arguments:", 1)[1].split("\noptions:", 1)[0] if "positional arguments:" in text \
        else ""
    return frozenset(m[1] for m in re.finditer(r"^ {4}([a-z][a-z0-9-]*)(?: |$)", listed, re.M))


def spans(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each code block line (continuations joined) and each inline code span."""
    out: list[tuple[int, str]] = []
    fenced = False
    held, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            if not held:
                start = number
            held += line.rstrip("\\") + " "
            if not line.endswith("\\"):
                out.append((start, held))
                held = ""
            continue
        out += [(number, m[1]) for m in re.finditer(r"``?([^`]+)``?", line)]
    return out


def documented(text: str) -> list[tuple[int, tuple[str, ...], str]]:
    """(line, command path, option) for every option written after `ami-auditor COMMAND`."""
    found = []
    top = subcommands()
    for number, span in spans(text):
        for m in re.finditer(r"(?:^|[\s/(])ami-auditor\s+([a-z][a-z0-9-]*)", span):
            if m[1] not in top:
                continue
            rest = re.split(r"&&|;|(?<!\\)\|(?!\|)|#", span[m.end():])[0]  # one shell command; `\|` is an alternative
            command: tuple[str, ...] = (m[1],)
            for token in re.findall(r"--?[a-z][a-z0-9-]*|[a-z][a-z0-9-]*", rest):
                if not token.startswith("-") and token in subcommands(m[1]):
                    command = (m[1], token)
                elif OPTION.fullmatch(token):
                    found.append((number, command, token))
    return found


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def missing_options(text: str) -> list[str]:
    return [f"line {n}: ami-auditor {' '.join(cmd)} {opt}" for n, cmd, opt in documented(text)
            if opt not in options(*cmd)]


def test_every_documented_option_exists_in_its_commands_help() -> None:
    bad = {str(p.relative_to(ROOT)): miss for p in doc_files() if (miss := missing_options(p.read_text()))}
    assert bad == {}, bad
    checked = [d for p in doc_files() for d in documented(p.read_text())]
    commands = {cmd for _, cmd, _ in checked}
    assert len(checked) > 50 and {("scan",), ("analyze",), ("history", "report"), ("diff",)} <= commands


def test_every_option_of_the_scan_option_list_exists() -> None:
    text = (ROOT / "docs/commands.md").read_text()
    listed = text.split("`scan` options, by stage:", 1)[1].split("\n## ", 1)[0]
    listed_options = set(OPTION.findall(listed)) - {"--version"}  # `BINARY --version`: the host binary's own
    assert len(listed_options) > 30
    assert [o for o in sorted(listed_options) if o not in options("scan")] == []


@pytest.mark.parametrize("doc, wrong", [
    ("Import yesterday's folders: `ami-auditor scan local --history DIR`.", "ami-auditor scan --history"),
    ("| `ami-auditor history list \\| trend FACT_PATH [--host H \\| --since T]` | … |", "history trend --since"),
    ("```sh\nami-auditor analyze snaps/ --group-by az \\\n    --parallel 8 --out r/\n```", "analyze --parallel"),
])
def test_a_made_up_option_is_caught(doc: str, wrong: str) -> None:
    assert len(missing_options(doc)) == 1 and wrong.split()[-1] in missing_options(doc)[0]


def test_options_of_other_commands_on_the_line_are_not_taken() -> None:
    doc = ("`ami-auditor scan local --format json | jq --raw-output .summary` and "
           "`ami-auditor rules check r/ --snapshot s.json`")
    assert missing_options(doc) == []
    assert [(c, o) for _, c, o in documented(doc)] == [(("scan",), "--format"), (("rules", "check"), "--snapshot")]


# Options of other tools the docs show (pip, mkdocs, aws, node_exporter, zizmor, lint-imports, check-jsonschema,
# journalctl, systemctl). Any other `--option` in a code span must be ami-auditor's or a benchmark's.
FOREIGN = {"--no-deps", "--strict", "--offline", "--no-cache", "--collector", "--filters", "--resource-ids",
           "--resource-types", "--schemafile", "--now", "--query", "--config"}
GENERATED = {"rules.md", "facts.md"}  # rule remediations quote other tools' commands


def unknown_options(text: str) -> list[str]:
    """Options in code spans that no ami-auditor command defines (nor the benchmark the span runs)."""
    ours = set(options()) | {o for c in subcommands() for o in options(c)} | {
        o for c in subcommands() for s in subcommands(c) for o in options(c, s)}
    found = []
    for number, span in spans(text):
        bench = re.search(r"benchmarks[./](bench_\w+)", span)
        source = (ROOT / "benchmarks" / f"{bench[1].removesuffix('.py')}.py").read_text() if bench else ""
        for opt in OPTION.findall(span):
            if opt not in ours and opt not in FOREIGN and f'"{opt}"' not in source and opt != "--ssh-":
                found.append(f"line {number}: {opt}")
    return found


def test_no_option_is_documented_that_nothing_defines() -> None:
    bad = {p.name: miss for p in doc_files() if p.name not in GENERATED and (miss := unknown_options(p.read_text()))}
    assert bad == {}, bad
    assert unknown_options("import yesterday's `--history DIR` report folders") == ["line 1: --history"]
    assert unknown_options("`python3 -m benchmarks.bench_store --scans 3 --hosts 9 --quick`") == ["line 1: --quick"]
