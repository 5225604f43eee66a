"""Rule files are validated when loaded: every mistake exits 2 naming the file and line, before anything runs."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from tests.paths import DATA

GOOD = """\
pack: mine
params:
  min_restarts: 2
rules:
  - id: mine.restarting
    title: "{{ item.name }} restarted {{ item.restarts }} times"
    severity: high
    description: A unit restarted.
    select: "facts.systemd.units[?restarts >= ${min_restarts}]"
"""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def check(tmp_path: Path, text: str, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return run("rules", "check", str(path), *extra)


def test_a_good_rule_file_checks_ok(tmp_path: Path) -> None:
    code, out, err = check(tmp_path, GOOD)
    assert (code, err) == (0, "")
    assert "1 rule(s) valid (mine.restarting)" in out


@pytest.mark.parametrize(("text", "line", "message"), [
    (GOOD.replace("    severity: high\n", "    severity: urgent\n"), 7, "severity 'urgent' is not one of"),
    (GOOD.replace("    description:", "    descripton:"), 8, "unknown key 'descripton'"),
    (GOOD.replace("restarts >= ${min_restarts}]", "restarts >= ${min_restarts}"), 9, "invalid JMESPath expression"),
    (GOOD.replace("?restarts >=", "?restartz >="), 9, "unknown fact path 'facts.systemd.units[].restartz'"
                                                        " (did you mean restarts"),
    (GOOD.replace("facts.systemd.units[?", "facts.systemd.unit[?"), 9, "unknown fact path 'facts.systemd.unit'"),
    (GOOD.replace("facts.systemd.units[?", "facts.systemd.units.name[?"), 9, "is a list"),
    (GOOD.replace("${min_restarts}", "${max_restarts}"), 9, "unknown parameter ${max_restarts}"),
    (GOOD.replace("select: \"", "select: \"lenght(facts.systemd.units) > `1` && "), 9, "unknown function lenght()"),
    (GOOD.replace("{{ item.name }}", "{{ item.nme }}"), 6, "unknown fact path 'facts.systemd.units[].nme'"),
    (GOOD.replace("{{ item.name }}", "{% if %}"), 6, "title template"),
    (GOOD.replace("    select:", "    where:"), 9, "unknown key 'where'"),
    (GOOD.replace("  min_restarts: 2\n", "  min_restarts: 2\n  min_restarts: 3\n"), 4, "duplicate key"),
    (GOOD.replace("rules:\n", "rules:\n  - [broken\n"), 6, "invalid YAML"),
    (GOOD + "  - id: mine.restarting\n    title: again\n    severity: low\n    when: facts.os.id\n", 10,
     "rule id 'mine.restarting' is already defined at"),
    (GOOD.replace("    title:", "    tilte:"), 6, "unknown key 'tilte'"),
    # `!host.container` is `(!host).container`: null whatever the host (a built-in rule once had it)
    (GOOD.replace("select: \"", "select: \"!host.container && "), 9, "write `!(a.b)`"),
])
def test_malformed_rule_file_exits_2_naming_file_and_line(tmp_path: Path, text: str, line: int,
                                                          message: str) -> None:
    code, out, err = check(tmp_path, text)
    assert code == 2, (out, err)
    assert re.search(rf"{re.escape(str(tmp_path / 'mine.yaml'))}:{line}:(\d+:)? ", err), err  # schema errors: :COL
    assert message in err


def test_a_rule_id_clashing_with_a_builtin_is_rejected(tmp_path: Path) -> None:
    code, _, err = check(tmp_path, GOOD.replace("mine.restarting", "systemd.unit-failed"))
    assert code == 2 and "already defined at" in err and "rules/systemd.yaml" in err
    code, _, _ = check(tmp_path, GOOD.replace("mine.restarting", "systemd.unit-failed"), "--no-builtin-rules")
    assert code == 0


def test_parameter_overrides_are_checked(tmp_path: Path) -> None:
    code, _, err = run("rules", "list", "--set", "cgroups.dying_wrn=5")
    assert code == 2 and "pack 'cgroups' has no parameter 'dying_wrn'" in err
    code, _, err = run("rules", "list", "--set", "cgroups.dying_warn=lots")
    assert code == 2 and "expected a int" in err
    config = tmp_path / "rules-config.yaml"
    config.write_text("cgroups:\n  dying_warn: 500\nnetwork:\n  allowance_min: [1]\n")
    code, _, err = run("rules", "list", "--rules-config", str(config))
    assert code == 2 and f"{config}:4: network.allowance_min: expected a int" in err


def test_malformed_rule_stops_scan_before_any_host_is_contacted(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "bad.yaml").write_text(GOOD.replace("severity: high", "severity: hihg"))
    out_dir = tmp_path / "out"
    # an unreachable ssh target: were it contacted, the error would be about the host, not the rule
    code, out, err = run("scan", "ssh://root@127.0.0.1:1", "--rules", str(tmp_path / "rules"),
                         "--format", "json", "--out", str(out_dir))
    assert code == 2
    assert f"{tmp_path / 'rules' / 'bad.yaml'}:7:5: rule 'mine.restarting': severity 'hihg'" in err
    assert out == "" and not out_dir.exists()


def test_rules_list_shows_builtins_and_user_rules(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(GOOD)
    code, out, _ = run("rules", "list", "--rules", str(tmp_path), "--json")
    assert code == 0
    rows = {r["id"]: r for r in json.loads(out)}
    assert rows["mine.restarting"]["reads"] == ["facts.systemd"]
    assert {"systemd.unit-crash-looping", "cgroups.dying-memcgs", "network.ena-health-counters",
            "cpu.hot-core-system-time", "provenance.source-not-allowlisted", "kernel.thp-mode"} <= set(rows)
    code, out, _ = run("rules", "list", "--no-builtin-rules", "--rules", str(tmp_path))
    assert code == 0 and out.splitlines() == ["mine.restarting  high      {{ item.name }} restarted "
                                              "{{ item.restarts }} times", "1 rules in 1 packs"]


def test_rules_check_tries_rules_on_a_saved_snapshot(tmp_path: Path) -> None:
    snap = DATA / "snapshots" / "fleet-b1.json"
    code, out, _ = check(tmp_path, GOOD, "--snapshot", str(snap))
    assert code == 0
    assert "[HIGH    ] mine.restarting [ecs.service]: ecs.service restarted" in out


def test_rules_check_on_the_builtin_packs_themselves() -> None:
    from auditor.judge.rules import load_rules
    from auditor.resources import builtin_rules_dir

    code, out, err = run("rules", "check", str(builtin_rules_dir()))
    assert (code, err) == (0, "")
    assert f"{len(load_rules().rules)} rule(s) valid" in out


def test_every_broken_rule_in_a_file_is_named_in_one_run(tmp_path: Path) -> None:
    """Independent mistakes in several rules are all reported (file order, a line each), not only the first;
    the good rules beside them and a duplicate id are judged too."""
    second = GOOD.split("rules:\n", 1)[1]
    text = GOOD.replace("    severity: high\n", "    severity: urgent\n") + "".join([
        second.replace("mine.restarting", "mine.typo").replace("?restarts >=", "?restartz >="),
        second.replace("mine.restarting", "mine.fine"),
        second.replace("mine.restarting", "mine.fine").replace("description:", "descripton:"),
        second.replace("mine.restarting", "mine.fine"),
    ])
    code, out, err = check(tmp_path, text)
    lines = err.splitlines()
    assert code == 2 and out == ""
    assert [re.sub(r"^ami-auditor: error: .*?mine\.yaml:(\d+)(:\d+)?: .*", r"\1", x) for x in lines] == \
        ["7", "14", "23", "25"], err
    assert "severity 'urgent'" in lines[0] and "restartz" in lines[1] and "descripton" in lines[2]
    assert "rule id 'mine.fine' is already defined at" in lines[3]


def test_a_broken_pack_header_still_stops_at_once(tmp_path: Path) -> None:
    """An error outside the rules (the pack's own keys) makes the rest meaningless: one error, as before."""
    code, _, err = check(tmp_path, GOOD.replace("params:", "parms:").replace("severity: high", "severity: x"))
    assert code == 2 and len(err.splitlines()) == 1 and "unknown key 'parms'" in err
