"""Hostile and malformed input files, table-driven, through the real CLI (`auditor.cli.main`).

Every case: exit 2, the file named with its line (or a JSON pointer), no traceback, nothing written to
--out, and no host contacted (the scan target is a loopback listener that must see no connection).
Covers rule packs, waivers, baselines, inventories, --rules-config and --set (via `scan`), saved reports
(`report`) and snapshots (`rules check --snapshot`, `diff`).
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from tests import reliability
from tests.paths import DATA, ROOT

REPORT = json.loads((DATA / "reports" / "clean.json").read_text())
SNAPSHOT = json.loads((DATA / "snapshots" / "fleet-a1.json").read_text())
BIG_INT = "9" * 5000  # past Python's int/str conversion digit limit (4300)
DEEP = 100_000


def bomb(indent: str = "") -> str:
    """A billion-laughs alias bomb (9**9 strings when expanded): 9 lines starting at the line it is put."""
    lines = [f'{indent}a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"{indent}{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    return "\n".join(lines) + "\n"


RULE = "rules:\n  - id: t.x\n    title: x\n    severity: low\n    when: \"facts.os.id == `x`\"\n"
WAIVER = "waivers:\n  - rule: systemd.unit-crash-looping\n    hosts: ['*']\n    reason: r\n"
BASE = "baseline: ami-auditor/baseline/1\nsource: {host: golden}\n"
INV = "hosts:\n  - name: h1\n    target: ssh://root@127.0.0.1:{port}\n"


def report_with(mutate: Callable[[dict], object]) -> str:
    doc = json.loads(json.dumps(REPORT))
    mutate(doc)
    return json.dumps(doc, indent=1)


def snapshot_with(mutate: Callable[[dict], object]) -> str:
    doc = json.loads(json.dumps(SNAPSHOT))
    mutate(doc)
    return json.dumps(doc, indent=1)


def raw_json(text: str, key: str, literal: str) -> str:
    """Replace the value of the first `"key": …,` in pretty-printed JSON by a raw literal."""
    start = text.index(f'"{key}": ') + len(key) + 4
    end = text.index("\n", start)
    comma = "," if text[end - 1] == "," else ""
    return text[:start] + literal + comma + text[end:]


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


@dataclass(frozen=True)
class Case:
    """`kind` picks the command; `where` is ':LINE' after the file name, or a JSON pointer '/…'."""

    id: str
    kind: str
    content: str | bytes | None  # file content (None: a FIFO, or no file for `set`)
    where: str
    words: str = ""
    arg: str = ""  # the --set value


R_DATE = "pack: t\ndescription: made 2026-02-30\nparams:\n  since: 2026-02-30\n" + RULE
REP_TEXT = report_with(lambda d: None)
SNAP_TEXT = snapshot_with(lambda d: None)

_CASES = [
    # rule packs (scan --rules FILE)
    Case("rules-alias-bomb", "rules", "pack: t\nparams:\n" + bomb("  ") + RULE, ":8", "alias"),
    Case("rules-invalid-date", "rules", R_DATE, ":4", "2026-02-30"),
    Case("rules-invalid-month", "rules", "pack: t\nparams:\n  since: 2026-13-45\n" + RULE, ":3", "2026-13-45"),
    Case("rules-invalid-hour", "rules", "pack: t\nparams:\n  at: 2026-01-01T25:00:00\n" + RULE, ":3", "T25"),
    Case("rules-mixed-key-types", "rules", "pack: t\n1: x\nzzz: y\n" + RULE, ":2", "unknown key"),
    Case("rules-copies-doubling", "rules", "pack: t\n" + RULE.replace(
        "facts.os.id == `x`", "length(to_string(facts.os" + " | [@, @]" * 22 + ")) > `0`"), ":6", "4,194,304 copies"),
    Case("rules-copies-in-projection", "rules", "pack: t\n" + RULE.replace(
        "facts.os.id == `x`", "length(facts.systemd.units[].[@, @, @, @][].[@, @, @, @][].[@, @, @, @][].[@, @, @, @]"
        "[].[@, @]) > `0`"), ":6", "512 copies"),
    Case("rules-expression-too-long", "rules", "pack: t\n" + RULE.replace(
        "facts.os.id == `x`", " || ".join(["facts.os.id"] * 2000)), ":6", "at most 16,384"),
    Case("rules-mixed-keys-in-rule", "rules", "pack: t\n" + RULE + "    1: x\n    zzz: y\n", ":7", "unknown key"),
    Case("rules-huge-int", "rules", f"pack: t\nparams:\n  n: {BIG_INT}\n" + RULE, ":3", "digits"),
    Case("rules-deep-nesting", "rules", "pack: t\nparams:\n  n: " + "[" * DEEP + "]" * DEEP + "\n" + RULE, ":3",
         "nest"),
    Case("rules-invalid-utf8", "rules", b"pack: t\n" + RULE.encode() + b"# caf\xe9\n", ":7", "UTF-8"),
    Case("rules-lone-surrogate", "rules", 'pack: t\ndescription: "\\ud800"\n' + RULE, ":2", "surrogate"),
    Case("rules-oversize", "rules", "pack: t\n" + RULE + "#" + "x" * (9 << 20) + "\n", "", "MiB"),
    Case("rules-fifo", "rules", None, "", "regular file"),
    Case("rules-dir-symlink-loop", "rules-dir-loop", "", "", "symlink loop"),
    Case("rules-dir-fifo", "rules-dir-fifo", None, "", "regular file"),
    Case("rules-check-dir-symlink-loop", "rules-check-dir-loop", "", "", "symlink loop"),
    # waivers (scan --waivers FILE)
    Case("waivers-invalid-date", "waivers", WAIVER + "    expires: 2026-02-30\n", ":5", "2026-02-30"),
    Case("waivers-invalid-hour", "waivers", WAIVER + "    expires: 2026-09-30T25:00:00\n", ":5", "T25"),
    Case("waivers-mixed-key-types", "waivers", WAIVER + "    expires: 2030-01-01\n    1: x\n    zzz: y\n", ":6",
         "unknown key"),
    Case("waivers-mixed-top-keys", "waivers", "1: x\nzzz: y\n" + WAIVER + "    expires: 2030-01-01\n", ":1",
         "unknown key"),
    Case("waivers-alias-bomb", "waivers", "x:\n" + bomb("  ") + WAIVER, ":7", "alias"),
    Case("waivers-lone-surrogate", "waivers",
         WAIVER.replace("reason: r", 'reason: "\\udfff"') + "    expires: 2030-01-01\n", ":4", "surrogate"),
    Case("waivers-oversize", "waivers", WAIVER + "    expires: 2030-01-01\n" + ("# pad\n" * (2 << 20)), "", "MiB"),
    # baselines (scan --baseline FILE)
    Case("baseline-backreference-pattern", "baseline",
         BASE + "expect:\n  facts.binaries[kubelet].version: {pattern: '(a)\\1'}\n", ":4", "pattern"),
    Case("baseline-lookahead-pattern", "baseline",
         BASE + "expect:\n  facts.os.id: debian\n  facts.binaries[kubelet].version: {pattern: '(?=v)v.*'}\n",
         ":5", "pattern"),
    Case("baseline-invalid-date", "baseline", BASE.replace("{host: golden}", "{host: g, captured_at: 2026-02-30}")
         + "expect:\n  facts.os.id: debian\n", ":2", "2026-02-30"),
    Case("baseline-huge-int", "baseline", BASE + f"expect:\n  facts.kernel.hugepages_total: {BIG_INT}\n", ":4",
         "digits"),
    Case("baseline-deep-nesting", "baseline", BASE + "expect:\n  facts.os.id: " + "{a: " * DEEP + "1" + "}" * DEEP
         + "\n", ":4", "nest"),
    Case("baseline-invalid-utf8", "baseline", (BASE + "expect:\n  facts.os.id: deb").encode() + b"\xff\xfe\n", ":4",
         "UTF-8"),
    Case("baseline-in-diff-invalid-date", "baseline-diff",
         BASE + "expect:\n  facts.os.id: debian\n  facts.os.version_id: 2026-13-45\n", ":5", "2026-13-45"),
    # inventories (scan -i FILE)
    Case("inventory-invalid-date", "inventory", INV + "    labels: {built: 2026-02-30}\n", ":4", "2026-02-30"),
    Case("inventory-alias-bomb", "inventory", "defaults:\n  labels:\n" + bomb("    ") + INV, ":8", "alias"),
    Case("inventory-deep-nesting", "inventory", INV + "    labels: " + "[" * DEEP + "]" * DEEP + "\n", ":4", "nest"),
    Case("inventory-lone-surrogate", "inventory", INV.replace("name: h1", 'name: "h\\ud83d"'), ":2", "surrogate"),
    Case("inventory-fifo", "inventory", None, "", "regular file"),
    Case("inventory-oversize", "inventory", INV + " " * (9 << 20) + "\n", "", "MiB"),
    # --rules-config FILE and --set
    Case("rules-config-invalid-date", "rules-config", "cgroups:\n  dying_warn: 2026-02-30\n", ":2", "2026-02-30"),
    Case("rules-config-lone-surrogate", "rules-config", 'kernel:\n  thp_allowed: ["\\ud800"]\n', ":2", "surrogate"),
    Case("rules-config-huge-int", "rules-config", f"cgroups:\n  dying_warn: {BIG_INT}\n", ":2", "digits"),
    Case("set-invalid-date", "set", None, "", "2026-02-30", "cgroups.dying_warn=2026-02-30"),
    Case("set-huge-int", "set", None, "", "digits", "cgroups.dying_warn=" + BIG_INT),
    Case("set-alias-bomb", "set", None, "", "alias", "cgroups.dying_warn={" + bomb().replace("\n", ", ") + "}"),
    Case("set-deep-nesting", "set", None, "", "nest", "cgroups.dying_warn=" + "[" * DEEP + "]" * DEEP),
    # an unquoted date where text is wanted (YAML reads it as a date; the loaders want a str)
    Case("rules-date-title", "rules", "pack: t\n" + RULE.replace("title: x", "title: 2026-01-01"), ":4", "is a date"),
    Case("rules-date-tag", "rules", "pack: t\n" + RULE + "    tags: [2026-01-01]\n", ":7", "quote it"),
    Case("waivers-date-reason", "waivers", WAIVER.replace("reason: r", "reason: 2026-10-01")
         + "    expires: 2026-09-30\n", ":4", "is a date"),
    Case("waivers-date-hosts", "waivers", WAIVER.replace("['*']", "2026-01-01") + "    expires: 2030-01-01\n", ":3",
         "date"),
    Case("waivers-date-item", "waivers", WAIVER + "    item: 2026-01-01\n    expires: 2030-01-01\n", ":5",
         "is a date"),
    Case("baseline-date-pattern", "baseline",
         BASE + "expect:\n  facts.binaries[kubelet].version: {pattern: 2026-01-01}\n", ":4", "is a date"),
    Case("inventory-date-name", "inventory", INV.replace("name: h1", "name: 2026-01-01"), ":2", "is a date"),
    Case("inventory-date-identity-file", "inventory", INV + "    ssh: {identity_file: 2026-01-01T10:00:00}\n", ":4",
         "is a date"),
    # NaN and infinities: NaN equals nothing (always drifts, never fires) and JSON output cannot hold them
    Case("baseline-nan", "baseline", BASE + "expect:\n  facts.kernel.hugepages_total: .nan\n", ":4", "finite"),
    Case("baseline-float-overflow", "baseline", BASE + "expect:\n  facts.kernel.hugepages_total: [1, 1.0e+999]\n",
         ":4", "finite"),
    Case("inventory-nan-timeout", "inventory", INV + "    ssh: {connect_timeout: .NaN}\n", ":4", "finite"),
    Case("rules-param-inf", "rules", "pack: t\nparams:\n  n: .inf\n" + RULE, ":3", "finite"),
    Case("rules-config-minus-inf", "rules-config", "cgroups:\n  dying_warn: -.Inf\n", ":2", "finite"),
    Case("waivers-nan-label", "waivers", WAIVER + "    labels: {az: .nan}\n    expires: 2030-01-01\n", ":5", "finite"),
    Case("set-nan", "set", None, "", "finite", "cgroups.dying_warn=.nan"),
    # YAML 1.1 reads these as numbers whose str() is other text: refused, "quote it" (never silently changed)
    Case("baseline-number-text", "baseline", BASE + "expect:\n  facts.os.version_id: 0.270\n", ":4", "quote it"),
    Case("baseline-number-text-in-list", "baseline", BASE + "expect:\n  facts.os.version_id: ['12',\n    1.10]\n",
         ":5", "'1.10'"),
    Case("inventory-octal-label", "inventory", INV + "    labels: {rack: 010}\n", ":4", "the number 8"),
    Case("inventory-long-name", "inventory", INV.replace("name: h1", "name: " + "h" * 4097), ":2",
         "name is 4,097 characters long (at most 4,096)"),
    Case("inventory-long-target", "inventory", INV.replace("127.0.0.1", "h" * 8200), ":3", "at most 8,192"),
    Case("inventory-many-labels", "inventory",
         INV + "    labels: {" + ", ".join(f"k{i}: v" for i in range(1025)) + "}\n", ":4", "1,025 entries"),
    Case("inventory-long-label-key", "inventory", INV + "    labels: {" + "k" * 257 + ": v}\n", ":4",
         "labels key is 257 characters long"),
    Case("inventory-long-label-value", "inventory", INV + "    labels: {k: " + "v" * 4097 + "}\n", ":4",
         "labels.k is 4,097 characters long"),
    Case("inventory-long-default-label", "inventory", "defaults:\n  labels: {k: " + "v" * 4097 + "}\n" + INV, ":2",
         "at most 4,096"),
    Case("inventory-sexagesimal-label", "inventory", INV.replace("name: h1", "name: h1\n    labels:\n      win: 10:30"),
         ":4", "the number 630"),
    Case("inventory-hex-default-label", "inventory", "defaults:\n  labels: {hex: 0x1F}\n" + INV, ":2", "quote it"),
    Case("waivers-number-label", "waivers", WAIVER + "    labels: {az: 010}\n    expires: 2030-01-01\n", ":5",
         "quote it"),
    # saved reports (report FILE --out DIR)
    Case("report-nan", "report", raw_json(REP_TEXT, "duration_s", "NaN"), "/hosts/0/duration_s", "NaN"),
    Case("report-infinity", "report", raw_json(REP_TEXT, "duration_s", "Infinity"), "/hosts/0/duration_s",
         "Infinity"),
    Case("report-minus-infinity", "report", raw_json(REP_TEXT, "duration_s", "-Infinity"), "/hosts/0/duration_s",
         "Infinity"),
    Case("report-float-overflow", "report", raw_json(REP_TEXT, "duration_s", "1e999"), "/hosts/0/duration_s",
         "out of range"),
    Case("report-lone-surrogate", "report", raw_json(REP_TEXT, "hostname", '"\\ud800"'),
         "/hosts/0/facts_summary/hostname", "surrogate"),
    Case("report-deep-nesting", "report", raw_json(REP_TEXT, "notes", "[" * DEEP + "]" * DEEP), "", "nest"),
    Case("report-huge-int", "report", raw_json(REP_TEXT, "dying_memcgs", BIG_INT),
         "/hosts/0/facts_summary/dying_memcgs", "digits"),
    Case("report-schema-error-pointer", "report", report_with(lambda d: d["hosts"][1].update(status=7)),
         "/hosts/1/status", "not a valid"),
    Case("report-invalid-utf8", "report", REP_TEXT.encode().replace(b'"golden"', b'"gold\xc3"', 1),
         ":" + str(line_of(REP_TEXT, '"golden"')), "UTF-8"),
    Case("report-oversize", "report", REP_TEXT + " " * (65 << 20), "", "MiB"),
    Case("report-fifo", "report", None, "", "regular file"),
    # saved snapshots (rules check R --snapshot FILE; diff FILE GOOD)
    Case("snapshot-check-nan", "snapshot-check", raw_json(SNAP_TEXT, "duration_s", "NaN"), "/probe/duration_s",
         "NaN"),
    Case("snapshot-check-fifo", "snapshot-check", None, "", "regular file"),
    Case("snapshot-check-huge-int", "snapshot-check", raw_json(SNAP_TEXT, "uptime_s", BIG_INT), "/host/uptime_s",
         "digits"),
    Case("snapshot-check-lone-surrogate", "snapshot-check", raw_json(SNAP_TEXT, "hostname", '"\\udc80x"'),
         "/host/hostname", "surrogate"),
    Case("snapshot-diff-infinity", "snapshot-diff", raw_json(SNAP_TEXT, "uptime_s", "Infinity"), "/host/uptime_s",
         "Infinity"),
    Case("snapshot-diff-deep-nesting", "snapshot-diff", raw_json(SNAP_TEXT, "collected_at", "[" * DEEP + "]" * DEEP),
         "", "nest"),
    Case("snapshot-diff-schema-error-pointer", "snapshot-diff",
         snapshot_with(lambda d: d["host"].update(uptime_s="long")), "/host/uptime_s", "not a valid"),
    Case("snapshot-diff-lone-surrogate-key", "snapshot-diff",
         snapshot_with(lambda d: d["labels"].update({"\ud800": "x"})), "/labels", "surrogate"),
]
CASES = [c.id for c in _CASES]  # counted by the suite's reliability summary
BY_ID = {c.id: c for c in _CASES}


def unblock_fifo_later(fifo: Path, stop: threading.Event, hung: list[bool]) -> None:
    """If the CLI is still blocked reading the FIFO after a while, open it for writing to free it (and record
    that it hung, which fails the case)."""
    if stop.wait(30):
        return
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return  # no reader waiting
    hung.append(True)
    os.close(fd)


def materialize(case: Case, tmp_path: Path, port: int) -> tuple[list[str], Path | None, Path]:
    """Write the case's file(s); return argv, the file the message must name, and the --out dir."""
    out = tmp_path / "out"
    target = f"ssh://root@127.0.0.1:{port}"
    content = case.content.replace("{port}", str(port)) if isinstance(case.content, str) else case.content
    ext = "json" if case.kind.startswith(("report", "snapshot")) else "yaml"
    path = tmp_path / f"input.{ext}"
    if case.kind in ("rules-dir-loop", "rules-check-dir-loop"):
        rules = tmp_path / "rules"
        rules.mkdir()
        (rules / "ok.yaml").write_text("pack: t\n" + RULE)
        (rules / "a.yaml").symlink_to("b.yaml")
        (rules / "b.yaml").symlink_to("a.yaml")
        if case.kind == "rules-check-dir-loop":
            return ["rules", "check", str(rules)], rules / "a.yaml", out
        return ["scan", target, "--rules", str(rules), "--out", str(out)], rules / "a.yaml", out
    if content is None and case.kind != "set":
        os.mkfifo(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8", errors="surrogatepass")
    if case.kind == "rules-dir-fifo":
        rules = tmp_path / "rules"
        rules.mkdir()
        (rules / "ok.yaml").write_text("pack: t\n" + RULE)
        path.rename(rules / "z.yaml")
        return ["scan", target, "--rules", str(rules), "--out", str(out)], rules / "z.yaml", out
    good_snapshot = tmp_path / "good.json"
    good_snapshot.write_text(SNAP_TEXT)
    rules_file = tmp_path / "r.yaml"
    rules_file.write_text("pack: t\n" + RULE)
    argv = {
        "rules": ["scan", target, "--rules", str(path)],
        "waivers": ["scan", target, "--waivers", str(path)],
        "baseline": ["scan", target, "--baseline", str(path)],
        "baseline-diff": ["diff", str(path), str(good_snapshot)],
        "inventory": ["scan", "-i", str(path)],
        "rules-config": ["scan", target, "--rules-config", str(path)],
        "set": ["scan", target, "--set", case.arg],
        "report": ["report", str(path), "--format", "md,json"],
        "snapshot-check": ["rules", "check", str(rules_file), "--snapshot", str(path)],
        "snapshot-diff": ["diff", str(path), str(good_snapshot)],
    }[case.kind]
    if argv[0] in ("scan", "report"):
        argv += ["--out", str(out)]
    return argv, None if case.kind == "set" else path, out


@pytest.mark.parametrize("case_id", CASES)
def test_bad_input_file_exits_2_naming_file_and_place(case_id: str, tmp_path: Path,
                                                       listener: socket.socket) -> None:
    case = BY_ID[case_id]
    argv, named, out = materialize(case, tmp_path, listener.getsockname()[1])
    stop, hung = threading.Event(), []
    if named is not None and named.is_fifo():
        threading.Thread(target=unblock_fifo_later, args=(named, stop, hung), daemon=True).start()
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        code = main(argv, Env(stdout, stderr))
    except BaseException:
        reliability.record("bad input", f"file/{case_id}", crashed=True)
        raise
    finally:
        stop.set()
    text = stdout.getvalue() + stderr.getvalue()
    reliability.record("bad input", f"file/{case_id}", crashed=code == 4 or "Traceback" in text)
    assert not hung, "the CLI blocked reading a FIFO"
    assert code == 2, text[-2000:]
    assert "Traceback" not in text
    if case.arg:
        assert "--set" in text
    else:
        assert str(named) in text, text[-2000:]
    if case.where.startswith(":"):
        assert f"{named}{case.where}:" in text, text[-2000:]
    elif case.where:
        assert case.where in text, text[-2000:]
    assert case.words.lower() in text.lower(), text[-2000:]
    assert not out.exists() or not any(out.iterdir())
    with pytest.raises(BlockingIOError):  # no host was contacted
        listener.accept()


def test_at_least_35_kinds() -> None:
    assert len(CASES) == len(set(CASES)) >= 35


def test_a_backtracking_baseline_pattern_is_matched_in_linear_time(tmp_path: Path) -> None:
    """`(a|aa)+` against 64 a's and a '!' takes ~fib(64) steps with backtracking (never finishes); RE2 answers at
    once. Run in a child process so a regression shows as a stuck child that the guard kills, not a hung suite."""
    baseline = tmp_path / "b.yaml"
    baseline.write_text(BASE + "expect:\n  facts.os.id: {pattern: '(a|aa)+'}\n")
    snapshot = tmp_path / "s.json"
    snapshot.write_text(snapshot_with(lambda d: d["facts"]["os"].update(id="a" * 64 + "!")))
    proc = subprocess.run([sys.executable, "-m", "auditor.cli", "diff", str(baseline), str(snapshot)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    assert "facts.os.id" in proc.stdout and "1 difference" in proc.stdout


@pytest.mark.parametrize("command", ["report", "rules-check", "diff"])
def test_a_nul_in_a_file_name_is_bad_input_not_a_crash(command: str, tmp_path: Path) -> None:
    bad = str(tmp_path / "a\0b.json")
    argv = {"report": ["report", bad, "--format", "md"],
            "rules-check": ["rules", "check", bad],
            "diff": ["diff", bad, bad]}[command]
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(argv, Env(stdout, stderr))
    text = stdout.getvalue() + stderr.getvalue()
    reliability.record("bad input", f"file/nul-in-name-{command}", crashed=code == 4 or "Traceback" in text)
    assert code == 2, text[-2000:]
    assert "NUL" in text and "Traceback" not in text


@pytest.mark.parametrize("first_by", ["inventory", "target", "diff"])
def test_a_host_name_repeated_across_inputs_names_both_places(first_by: str, tmp_path: Path,
                                                               listener: socket.socket) -> None:
    target = f"ssh://root@127.0.0.1:{listener.getsockname()[1]}"
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    port = listener.getsockname()[1]
    name = f"127.0.0.1:{port}" if first_by == "target" else "h1"  # as a command-line target is named
    one.write_text(f"hosts:\n  - name: a\n    target: {target}\n  - name: h1\n    target: {target}\n")
    two.write_text(f"defaults:\n  labels: {{az: x}}\nhosts:\n  - target: {target}\n    name: {name}\n")
    argv = {"inventory": ["scan", "-i", str(one), "-i", str(two), "--out", str(tmp_path / "out")],
            "target": ["scan", target, "-i", str(two), "--out", str(tmp_path / "out")],
            "diff": ["diff", "a", "h1", "-i", str(one), "-i", str(two)]}[first_by]
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(argv, Env(stdout, stderr))
    text = stdout.getvalue() + stderr.getvalue()
    assert code == 2, text
    assert f"{two}:5: host name '{name}' given twice" in text, text
    assert (f"first: {one}:4" if first_by != "target" else "first: a command-line target") in text, text
    assert not (tmp_path / "out").exists()
    with pytest.raises(BlockingIOError):  # no host was contacted
        listener.accept()
