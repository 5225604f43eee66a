"""Static audit of the probe: no host-controlled string may ever become program text.

Every sed/awk program, printf format and tool format string (stat -c, dpkg-query -f, rpm --qf,
docker -f) must be a single-quoted literal; no eval, no `sh -c`, no sourcing; `echo` never prints a
variable (dash's echo interprets backslashes in data); grep patterns are literals or the two vetted
variables below; a binary's `--version` is run only through the --exec-versions gate. The checker is
shown to catch the constructs the probe used to have (the `sed "s|^|url=$f |"` injection among them).
"""

from __future__ import annotations

import re

import pytest

from auditor.collect.probe import probe_script

# grep patterns built by the probe from its own literals or from validated operator input, never from a host
VETTED_PATTERN_VARS = {"pat", "nre"}
_WORD = re.compile(r"""(?:'[^']*'|"(?:\\.|[^"\\])*"|[^\s'"|;&()])+""")
_OPTS_WITH_ARG = {"sed": {"-e", "-f"}, "awk": {"-v", "-F", "-f"}, "grep": {"-m", "-e", "-f"}}


def _masked(script: str) -> str:
    """The script with comments blanked and the inside of every single-quoted string replaced by `x`
    (quotes kept), so literal programs (awk's own printf, multi-line programs) are never mistaken for shell."""
    out: list[str] = []
    state = "code"  # code | single | double | comment
    prev = "\n"
    i = 0
    while i < len(script):
        c = script[i]
        if state == "comment":
            if c == "\n":
                state = "code"
                out.append(c)
        elif state == "single":
            if c == "'":
                state = "code"
                out.append(c)
            else:
                out.append("\n" if c == "\n" else "x")
        elif state == "double":
            if c == "\\" and i + 1 < len(script):
                out.append(script[i:i + 2])
                i += 2
                continue
            if c == '"':
                state = "code"
            out.append(c)
        else:
            if c == "\\" and i + 1 < len(script):
                out.append(script[i:i + 2])
                i += 2
                prev = "x"
                continue
            if c == "#" and prev in " \t\n;":
                state = "comment"
            elif c == "'":
                state = "single"
                out.append(c)
            else:
                if c == '"':
                    state = "double"
                out.append(c)
        prev = c
        i += 1
    return "".join(out)


def _code_lines(script: str) -> list[tuple[int, str]]:
    """(line number, masked code) of every line."""
    return list(enumerate(_masked(script).split("\n"), 1))


def _program_arg(rest: str, tool: str) -> str | None:
    """The first non-option argument after a sed/awk/grep word (its program or pattern), as written."""
    pos = 0
    while True:
        if rest[pos:].lstrip().startswith("'"):
            return "'"
        m = _WORD.search(rest, pos)
        if not m:
            return None
        word = m.group(0)
        if word.startswith("-") and word != "-":
            pos = m.end()
            if word in _OPTS_WITH_ARG.get(tool, set()):
                arg = _WORD.search(rest, pos)
                pos = arg.end() if arg else pos
            continue
        return word


def risky_constructs(script: str) -> list[str]:
    """Every place where data could turn into program text, as `line N: why: code`."""
    found = []
    for number, code in _code_lines(script):
        def flag(why: str, number: int = number, code: str = code) -> None:
            found.append(f"line {number}: {why}: {code.strip()}")

        if re.search(r"\beval\b", code):
            flag("eval")
        if re.search(r"\b(sh|bash|dash)\s+-c\b", code) or re.match(r"\s*(\.|source)\s+\S", code):
            flag("runs or sources text as code")
        for m in re.finditer(r"\bprintf\s+(\S)", code):
            if m.group(1) != "'":
                flag("printf format is not a single-quoted literal")
        if re.search(r"\becho\b[^|;&]*[$`]", code):
            flag("echo of a variable (dash's echo interprets backslashes)")
        for m in re.finditer(r"(?:^|[\s|;(])(sed|awk|grep)\b", code):
            tool = m.group(1)
            arg = _program_arg(code[m.end():], tool)
            if arg is None or arg.startswith("'"):
                continue
            names = set(re.findall(r"\$\{?(\w+)", arg))
            if tool == "grep" and (not arg.startswith("$") or arg.startswith('"')) and names <= VETTED_PATTERN_VARS:
                continue
            if tool == "grep" and not names and not arg.startswith('"'):
                continue  # a bare literal word such as `grep -v :`
            flag(f"{tool} program/pattern is not a literal")
        for m in re.finditer(r"(--qf\s+|-f=|\binspect\s+-f\s+|\bstat\s+-L?c\s+|\bdate\s+)(\S)", code):
            if m.group(2) not in ("'", "+"):
                flag("format string is not a single-quoted literal")
        for m in re.finditer(r'"\$(\w+)"\s+--version', code):
            if m.group(1) != "rp":
                flag("runs a binary other than through the --exec-versions gate")
    return found


def test_the_probe_has_no_risky_construct() -> None:
    assert risky_constructs(probe_script()) == []


def test_version_flags_run_only_behind_the_exec_versions_gate() -> None:
    script = probe_script()
    body = script[script.index("s_binaries() {"):script.index("s_eks() {")]
    gate = body.index('if [ "$EXEC" = 1 ]; then')
    runs = [m.start() for m in re.finditer(r'"\$\w+" --version', body)]
    assert runs and all(pos > gate for pos in runs)
    assert body.index('why=$(exec_refusal "$rp")') < min(runs)
    assert body.index('if [ -z "$why" ]; then') < min(runs)
    assert len(re.findall(r'"\$\w+"\s+--version', script)) == len(runs)  # nowhere else


@pytest.mark.parametrize("line", [
    '        head -n 5 | sed "s|^|url=$f |"',  # the old injection: GNU sed's e/w flags ran commands as root
    '    grep \'Agent exited with code\' "$f" | tail -n 1 | sed "s/^/$x/"',
    "    awk \"/$name/ {print}\" /proc/meminfo",
    '    printf "log=$f "',
    '    echo "realpath=$rp"',
    '    echo "@ $b"',
    '    eval "$cmd"',
    '    sh -c "$line"',
    '    . "$R/etc/os-release"',
    '    grep -E "$host_value" /etc/hosts',
    '    grep $needle /etc/hosts',
    "    stat -c \"$fmt\" /x",
    '    rpm -qf --qf "$q" "$p"',
    '        kubelet) v=$(T 3 "$p" --version 2>&1 | head -n 1) ;;',  # old: ran /tmp/kubelet as root
])
def test_the_checker_catches_what_the_probe_used_to_do(line: str) -> None:
    assert risky_constructs(line + "\n"), line


@pytest.mark.parametrize("line", [
    "    grep -ohE \"(https?|s3)://[^ \\\"'<>]*/$nre([.][A-Za-z0-9]+)?\" \"$R$f\"",
    "    awk -v t0=\"$CPU_T0\" '{ print $1 - t0 }' /proc/uptime",
    "    awk -F'\\t' '$1 ~ /^ii/ {print $2}'",
    "    printf '%s\\n' \"$v\"",
    "    grep -v : | sort -V",
    '    echo "found=1"',
])
def test_the_checker_accepts_literal_programs(line: str) -> None:
    assert risky_constructs(line + "\n") == []
