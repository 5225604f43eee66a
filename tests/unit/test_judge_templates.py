"""Title templates cannot change or exhaust anything, and a name or path they get wrong is an error when loaded.

Hostile titles are tried two ways: through `rules check` (refused when loaded: exit 2, file and line)
and, bypassing the load-time check, straight in the sandbox on a real saved snapshot (refused or cut
when rendered, the snapshot unchanged). No timed asserts: a budget that stops a render shows as a cut title.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from auditor.judge.templates import CUT_MARK, ENV, TITLE_MAX, render_title
from tests.paths import DATA

SNAPSHOT = DATA / "snapshots" / "fleet-b1.json"

SELECT = """\
pack: mine
params:
  min_restarts: 1
rules:
  - id: mine.restarting
    title: "{title}"
    severity: high
    select: "facts.systemd.units[?restarts >= ${{min_restarts}}]"
    evidence: {{restarts: item.restarts}}
"""
HOST_LEVEL = """\
pack: mine
rules:
  - id: mine.kernel
    title: "{title}"
    severity: high
    when: "facts.kernel.release != `null`"
"""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def snapshot() -> dict:
    return json.loads(SNAPSHOT.read_text())


def context(snap: dict, item: object = None) -> dict:
    return {"item": item, "facts": snap["facts"], "host": snap["host"], "labels": snap.get("labels"),
            "name": snap.get("name"), "params": {"min_restarts": 1}, "evidence": {}}


@pytest.mark.parametrize(("title", "message"), [
    ("{{ item.update({'restarts': 0}) }}", "calls are not allowed"),
    ("{{ facts.systemd.units.append(1) }}", "calls are not allowed"),
    ("{{ facts.systemd.units.clear() }}", "calls are not allowed"),
    ("{{ params.clear() }}", "calls are not allowed"),
    ("{{ facts.__class__ }}", "names starting with _ are not allowed"),
    ("{{ item['__class__'] }}", "names starting with _ are not allowed"),
    ("{{ 7 ** 999999999 }}", "power over 4096 bits"),
    ("{{ 'x' * 500000000 }}", "repetition would build 500000000"),
    ("{{ item.name | center(99999999) }}", "filter 'center': argument 99999999 is over the limit"),
    ("{{ item.name | indent(99999999) }}", "filter 'indent': argument 99999999 is over the limit"),
    ("{{ item.name | truncate(99999999) }}", "filter 'truncate': argument 99999999 is over the limit"),
    ("{{ '%999999999d' | format(1) }}", "format width 999999999 is over the limit"),
    ("{{ '%*d' % (999999999, 1) }}", "a `*` width in a format string"),
    ("{% for i in range(999999999) %}x{% endfor %}", "calls are not allowed"),
    ("{% macro m() %}x{% endmacro %}{{ m() }}", "{% macro %}: not allowed"),
    ("{{ item | attr('__class__') }}", "filter 'attr' is not allowed"),
    ("{{ item.name | map('pprint') | list }}", "filter 'map': the test or filter it applies must be"),
    ("{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", "nested too deeply"),
    ("{{ 1" + " + 1" * 3000 + " }}", "nested too deeply"),
    ("x" * 20000, "20000 characters, over the limit 16384"),
    ("{{ bogus }}", "undefined name 'bogus'"),
    ("{{ self }}", "'self' is jinja's own name"),  # find_undeclared_variables never reports it
    ("{% set self = 1 %}{{ self }}", "'self' is jinja's own name"),
    ("{{ super }}", "'super' is jinja's own name"),
    ("{{ item.nme }}", "unknown fact path 'facts.systemd.units[].nme'"),
    ("{{ params.max_restarts }}", "unknown parameter params.max_restarts"),
    ("{{ evidence.restart }}", "unknown evidence name evidence.restart (did you mean restarts?)"),
])
def test_hostile_or_wrong_titles_are_refused_when_loaded(tmp_path: Path, title: str, message: str) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(SELECT.format(title=title.replace('"', '\\"')))
    code, out, err = run("rules", "check", str(path))
    assert code == 2, (out, err)
    assert f"{path}:6: title template: " in err and message in err


def test_item_in_a_host_level_rule_and_undefined_names_on_later_lines(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(HOST_LEVEL.format(title="kernel {{ item.name }}"))
    code, _, err = run("rules", "check", str(path))
    assert code == 2 and f"{path}:4: title template: undefined name 'item' (item is only defined" in err
    # a block title: the error names the template's own line inside the file
    path.write_text(HOST_LEVEL.replace('"{title}"', '"kernel {{ facts.kernel.release }}\\n\\n'
                                       '{% set n = 1 %}{{ n }} and {{ kernal }}"'))
    code, _, err = run("rules", "check", str(path))  # one physical line, though `\n` makes template lines
    assert code == 2 and f"{path}:4: title template: undefined name 'kernal'" in err
    path.write_text(HOST_LEVEL.replace('"{title}"', "|-\n      kernel {{ facts.kernel.release }}\n      {{ kernal }}"))
    code, _, err = run("rules", "check", str(path))  # a literal block starts on the line after `title: |-`
    assert code == 2 and f"{path}:6: title template: undefined name 'kernal'" in err
    path.write_text(HOST_LEVEL.format(title="kernel {{ facts.kernel.release }} on {{ name }}{{ labels.az }}"))
    assert run("rules", "check", str(path))[0] == 0


@pytest.mark.parametrize("title, line", [
    (">-\n      kernel\n      release\n      {{ kernal }}", 7),  # folded: its lines join into one
    ('"kernel\n      release\n      {{ kernal }}"', 6),  # double-quoted over three lines
    ("\n      'kernel {{ kernal }}'", 5),  # the value on the line after its key
    ("|\n\n      kernel\n      {{ kernal }}", 7),  # a literal block keeps its lines, blank ones too
    (">-\n      kernel {{ facts.kernel.release }}\n      {{ kernal }} and {{ kernal }}", 6),
])
def test_a_template_error_names_the_physical_line_whatever_the_yaml_style(tmp_path: Path, title: str,
                                                                          line: int) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(HOST_LEVEL.replace('"{title}"', title))
    code, _, err = run("rules", "check", str(path))
    assert code == 2 and f"{path}:{line}: title template: undefined name 'kernal'" in err, err


def test_titles_the_builtin_packs_use_still_load_and_render() -> None:
    snap = snapshot()
    findings = Judge(load_rules()).judge(snap)
    looping = [f for f in findings if f.rule == "systemd.unit-crash-looping"]
    assert looping and looping[0].title.startswith("ecs.service is crash-looping: ")
    assert not any("title template" in f.title or CUT_MARK in f.title for f in findings)


@pytest.mark.parametrize("source", [
    "{{ item.update({'restarts': 0}) }}", "{{ facts.systemd.units.append(item) }}", "{{ params.clear() }}",
    "{{ facts.systemd.units.pop() }}", "{{ facts.__class__.__mro__ }}", "{% set _ = host.setdefault('x', 1) %}",
])
def test_the_sandbox_itself_refuses_mutation_when_rendered(source: str) -> None:
    """Defence in depth: compiled without the load-time check, the sandbox still changes nothing."""
    snap = snapshot()
    item = snap["facts"]["systemd"]["units"][0]
    ctx = context(snap, item)
    before = copy.deepcopy(ctx)
    title = render_title(ENV.from_string(source), ctx, "mine.restarting")
    assert ctx == before
    assert title == "mine.restarting" or title.startswith("mine.restarting (title template")
    assert "class" not in title


def test_a_title_cannot_hide_other_findings(tmp_path: Path) -> None:
    """The old attack: a title that empties facts.systemd.units before other packs' rules run."""
    (tmp_path / "a.yaml").write_text(HOST_LEVEL.format(title="{{ facts.systemd.units.clear() }}"))
    code, _, err = run("rules", "check", str(tmp_path / "a.yaml"), "--snapshot", str(SNAPSHOT))
    assert code == 2 and "calls are not allowed" in err
    snap = snapshot()
    before = copy.deepcopy(snap)
    judge = Judge(load_rules())
    findings = judge.judge(snap)
    assert snap == before and any(f.rule == "systemd.unit-crash-looping" for f in findings)


@pytest.mark.parametrize("source", [
    "{{ 'x' * item.restarts * 1000 }}",  # one value within the cap, output past TITLE_MAX
    "{% for a in facts.systemd.units %}{{ 'y' * 1000 }}{% endfor %}",
])
def test_output_past_the_size_cap_is_cut_and_marked(source: str) -> None:
    snap = snapshot()
    item = next(u for u in snap["facts"]["systemd"]["units"] if u["restarts"])
    title = render_title(ENV.from_string(source), context(snap, item), "r")
    assert title.endswith(CUT_MARK) and len(title) == TITLE_MAX + len(CUT_MARK)


@pytest.mark.parametrize(("source", "why"), [
    ("{{ 'x' * (item.restarts * 500000000) }}", "repetition would build"),
    ("{{ (item.restarts + 6) ** 999999999 }}", "power over 4096 bits"),
    ("{{ item.name | center(item.restarts * 99999999) }}", "center width"),
    ("{{ facts.systemd.units | join(item.name * 10000) }}", "join separators"),
    ("{{ (item.name * 1000) | replace('', item.name * 1000) }}", "replace would build"),
    ("{% set a = item.name * 60000 %}{% set b = a ~ a %}{% set c = b ~ b %}{% set d = c ~ c %}{% set e = d ~ d %}"
     "{% set f = e ~ e %}{% set g = f ~ f %}{{ g | length }}", "`~` would build"),
    ("{% set a = facts.systemd.units * 100 %}{% set b = a + a %}{% set c = b + b %}{% set d = c + c %}"
     "{% set e = d + d %}{% set f = e + e %}{% set g = f + f %}{% set h = g + g %}{% set i = h + h %}{{ i | length }}",
     "concatenation would build"),
    ("{{ ([[item.name] * 1000] * 1000) | sum(start=[]) | length }}", "sum: start must be a number"),
    ("{% for a in facts.systemd.units %}{% for b in facts.systemd.units %}{% for c in facts.systemd.units %}"
     "{% for d in facts.systemd.units %}{% for e in facts.systemd.units %}{% endfor %}{% endfor %}{% endfor %}"
     "{% endfor %}{% endfor %}done", "title template"),
])
def test_computations_past_the_limits_stop_the_render(source: str, why: str) -> None:
    snap = snapshot()
    assert len(snap["facts"]["systemd"]["units"]) >= 20  # the nested loops have > 20**5 steps to run
    item = next(u for u in snap["facts"]["systemd"]["units"] if u["restarts"])
    title = render_title(ENV.from_string(source), context(snap, item), "r")
    assert title.startswith("r (title template stopped: ") and title.endswith(CUT_MARK) and why in title


def test_reasonable_titles_are_unaffected() -> None:
    snap = snapshot()
    item = next(u for u in snap["facts"]["systemd"]["units"] if u["restarts"])
    source = ("{{ item.name | upper }} {{ '%.1f' | format(item.restarts) }} {{ facts.systemd.units | length }} "
              "{% for k, v in item.items() if k == 'name' %}{{ k }}={{ v }}{% endfor %} {{ item.get('nope', '-') }} "
              "{{ item.name ~ '!' }} {{ 2 ** 10 }}")
    title = render_title(ENV.from_string(source), context(snap, item), "r")
    assert title == (f"{item['name'].upper()} {item['restarts']:.1f} {len(snap['facts']['systemd']['units'])} "
                     f"name={item['name']} - {item['name']}! 1024")
