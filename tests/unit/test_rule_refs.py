"""A rule cites its public sources in `refs:`: required in the built-in packs, optional in a user's; checked as
http(s) URLs when the pack loads; shown by `rules list`, carried by the report's rules and shown, escaped, by
the HTML and Markdown reports and ASFF."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import jsonschema
import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.errors import InputError
from auditor.judge import rulefiles
from auditor.judge.rules import load_rules
from auditor.models import MAX_REF, REF_PATTERN, cited, is_ref
from auditor.notify import asff
from auditor.render import RENDERERS
from auditor.reportdoc import report_json_schema, validate_report
from tests.asff_schema import asff_schema
from tests.paths import ROOT

SCHEMAS = ROOT / "auditor" / "schemas"
REPORTS = ROOT / "tests" / "data" / "reports"
PACK = """\
pack: mine
rules:
  - id: mine.restarting
    title: "{{ item.name }} restarted {{ item.restarts }} times"
    severity: high
    select: "facts.systemd.units[?restarts > `3`]"
"""
CITED = PACK + "    refs:\n      - https://github.com/systemd/systemd/issues/7107\n      - http://example.org/a?b=c#d\n"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def pack_dir(tmp_path: Path, text: str, name: str = "mine") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "mine.yaml").write_text(text)
    return folder


def test_the_schemas_carry_the_one_ref_pattern() -> None:
    pack = json.loads((SCHEMAS / "rule-pack.schema.json").read_text())["$defs"]["rule"]["properties"]["refs"]
    report = report_json_schema()["properties"]["rules"]["items"]["properties"]["refs"]
    for schema in (pack, report):
        assert schema["items"]["pattern"] == REF_PATTERN and schema["items"]["maxLength"] == MAX_REF
    assert pack["minItems"] == 1 and pack["uniqueItems"] is True


@pytest.mark.parametrize(("url", "ok"), [
    ("https://github.com/moby/moby/issues/29638", True), ("http://example.org:8080/a_b~c?x=1&y=(2)#top", True),
    ("javascript:alert(1)", False), ("ftp://example.org/x", False), ("https://", False), ("//example.org/x", False),
    ("https://user@evil.example/", False), ('https://x.example/"onmouseover=alert(1)', False),
    ("https://x.example/<script>", False), ("https://x.example/a b", False), ("https://x.example/a\n", False),
    ("https://x.example/a|b", False), ("https://x.example/`a`", False), ("https://-x.example/", False),
    ("https://x.example/" + "a" * MAX_REF, False), (None, False), (3, False),
])
def test_is_ref_and_the_schema_pattern_agree(url: object, ok: bool) -> None:
    assert is_ref(url) is ok
    if isinstance(url, str) and len(url) <= MAX_REF:  # the ECMA pattern the schemas carry says the same
        assert (re.search(REF_PATTERN, url) is not None and not url.endswith("\n")) is ok


def test_a_user_pack_without_refs_loads_and_one_with_refs_carries_them(tmp_path: Path) -> None:
    [bare] = load_rules([pack_dir(tmp_path, PACK, "bare")], builtin=False).rules
    assert bare.refs == ()
    [cited] = load_rules([pack_dir(tmp_path, CITED, "cited")], builtin=False).rules
    assert cited.refs == ("https://github.com/systemd/systemd/issues/7107", "http://example.org/a?b=c#d")


@pytest.mark.parametrize(("refs", "message"), [
    ("    refs: []\n", "refs"),
    ("    refs:\n      - javascript:alert(1)\n", "must be an http:// or https:// URL"),
    ("    refs:\n      - 'https://x.example/\"><script>'\n", "must be an http:// or https:// URL"),
    ("    refs:\n      - https://a.example/x\n      - https://a.example/x\n", "refs"),
    ("    refs: https://a.example/x\n", "refs"),
])
def test_a_bad_refs_list_is_refused_naming_file_and_line(tmp_path: Path, refs: str, message: str) -> None:
    folder = pack_dir(tmp_path, PACK + refs)
    code, out, err = run("rules", "check", str(folder / "mine.yaml"), "--no-builtin-rules")
    assert code == 2 and out == ""
    assert re.search(rf"mine\.yaml:\d+(:\d+)?: .*{re.escape(message)}", err), err


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A built-in rules folder of our own (rulefiles.builtin_rules_dir is where every run finds the shipped packs)."""
    folder = tmp_path / "builtin"
    folder.mkdir()
    monkeypatch.setattr(rulefiles, "builtin_rules_dir", lambda: folder)
    return folder


def test_a_built_in_rule_without_refs_is_refused_at_load(shipped: Path) -> None:
    (shipped / "mine.yaml").write_text(PACK)
    with pytest.raises(InputError) as caught:
        load_rules()
    assert caught.value.path == str(shipped / "mine.yaml") and caught.value.line == 3  # the rule's `- id:` line
    assert "'mine.restarting': a built-in rule needs `refs:`" in caught.value.message
    (shipped / "mine.yaml").write_text(CITED)  # with its sources it loads
    assert [r.refs for r in load_rules().rules] == [("https://github.com/systemd/systemd/issues/7107",
                                                     "http://example.org/a?b=c#d")]


def test_every_command_refuses_the_uncited_built_in_rule_with_exit_2(shipped: Path, tmp_path: Path) -> None:
    (shipped / "mine.yaml").write_text(PACK)
    where = f"{shipped / 'mine.yaml'}:3: rule 'mine.restarting': a built-in rule needs `refs:`"
    for argv in (("rules", "list"), ("rules", "check", str(shipped)), ("rules", "list", "--json")):
        code, out, err = run(*argv)
        assert (code, out) == (2, ""), argv
        assert where in err, (argv, err)
    # the same text as a user pack, beside the built-ins, is not built-in: it loads
    (shipped / "mine.yaml").write_text(CITED.replace("mine", "shipped"))
    code, out, _ = run("rules", "list", "--rules", str(pack_dir(tmp_path, PACK, "user")))
    assert code == 0 and "mine.restarting" in out


def test_every_built_in_rule_cites_at_least_one_source() -> None:
    rules = load_rules().rules
    assert len(rules) >= 32
    assert all(r.refs and all(is_ref(u) for u in r.refs) for r in rules), [r.id for r in rules if not r.refs]


def test_rules_list_shows_the_sources(tmp_path: Path) -> None:
    folder = pack_dir(tmp_path, CITED)
    code, out, _ = run("rules", "list", "--no-builtin-rules", "--rules", str(folder))
    assert code == 0
    assert out.splitlines()[:3] == [
        "mine.restarting  high      {{ item.name }} restarted {{ item.restarts }} times",
        "                 source    https://github.com/systemd/systemd/issues/7107",
        "                 source    http://example.org/a?b=c#d"]
    code, out, _ = run("rules", "list", "--no-builtin-rules", "--rules", str(folder), "--json")
    assert json.loads(out)[0]["refs"] == ["https://github.com/systemd/systemd/issues/7107",
                                          "http://example.org/a?b=c#d"]


def test_a_scan_report_carries_each_rule_s_sources_and_validates(tmp_path: Path) -> None:
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    (snapshots / "b1.json").write_text((ROOT / "tests" / "data" / "snapshots" / "fleet-b1.json").read_text())
    code, _, err = run("analyze", str(snapshots), "--no-store", "--format", "json", "--out", str(tmp_path / "r"))
    assert code in (0, 1), err
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    validate_report(report)
    expected = {r.id: list(r.refs) for r in load_rules().rules}
    assert {r["id"]: r["refs"] for r in report["rules"]} == expected
    hostile = copy.deepcopy(report)
    hostile["rules"][0]["refs"] = ["javascript:alert(1)"]
    with pytest.raises(InputError, match=r"/rules/0/refs/0"):  # a saved report with a bad source is refused
        validate_report(hostile)


def hostile_doc() -> dict:
    """A report whose rules' sources the schema would refuse: renderers still show only is_ref URLs as links."""
    doc = json.loads((REPORTS / "fleet.json").read_text())
    doc["rules"][0]["refs"] = ['https://x.example/"><img src=x onerror=alert(1)>', "javascript:alert(1)",
                               "https://ok.example/a?b=1&c=2"]
    return doc


def test_html_links_only_http_sources_escaped() -> None:
    html = RENDERERS["html"][0](hostile_doc())
    assert '<a href="https://ok.example/a?b=1&amp;c=2" rel="noopener noreferrer">' in html
    assert "javascript:" not in html and "onerror=alert(1)>" not in html and "x.example/&#34;" not in html
    assert cited(hostile_doc()["rules"])["systemd.unit-crash-looping"] == ["https://ok.example/a?b=1&c=2"]
    assert cited([{"id": "a", "refs": "https://x.example/"}, "b", {"id": "c"}]) == {} == cited(None)


def test_markdown_lists_the_shown_rules_sources_as_autolinks() -> None:
    md = RENDERERS["md"][0](hostile_doc())
    sources = md[md.index("### Sources"):]
    assert "- `systemd.unit-crash-looping`: <https://ok.example/a?b=1&c=2>\n" in sources
    assert "javascript" not in md and "x.example" not in md  # a source is_ref refuses is left out


def test_asff_recommends_the_first_source_and_lists_them_all_within_bounds() -> None:
    doc = json.loads((REPORTS / "fleet-scan.json").read_text())
    out = asff.documents(doc)
    jsonschema.validate(out, asff_schema())
    refs = {r["id"]: r["refs"] for r in doc["rules"]}
    for finding, document in zip(doc["findings"], out, strict=True):
        cited = refs[finding["rule"]]
        assert document["Remediation"]["Recommendation"]["Url"] == cited[0]
        assert document["ProductFields"]["ami-auditor/refs"] == " ".join(cited)
    many = [f"https://example.org/{i:04d}/" + "x" * 200 for i in range(20)]
    field = asff.refs_field(many)
    assert field is not None and len(field) <= asff.MAX_FIELD_VALUE and field.split() == many[:len(field.split())]
    bad = asff.document(doc["findings"][0], None, doc["generated_at"], "us-east-1", "000000000000",
                        ["javascript:alert(1)"])
    assert "Url" not in bad.get("Remediation", {}).get("Recommendation", {})
    assert "ami-auditor/refs" not in bad["ProductFields"]
