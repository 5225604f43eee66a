"""The declared input formats (auditor/schemas/{rule-pack,waivers,inventory,baseline}.schema.json).

They are valid draft 2020-12 (jsonschema's metaschema check and check-jsonschema's --check-metaschema), a real
editor-side consumer (check-jsonschema, the CLI of the same validator family editors' tooling uses) validates
the built-in packs with them through their yaml-language-server modelines and refuses a broken one, every
example we ship (README, docstrings, fuzz seeds, a captured baseline) validates, and they agree with the code
on the vocabularies both hold (severities, SSH options).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from auditor.compare import baseline as baseline_module
from auditor.compare.capture import capture, render
from auditor.errors import InputError
from auditor.inputschema import json_view, load_schema
from auditor.judge.waivers import load_waivers
from auditor.models import SEVERITIES, SSHOptions
from auditor.targets import inventory as inventory_module
from auditor.yamlload import load_yaml_text
from tests.paths import ROOT, SEEDS

SCHEMAS = ROOT / "auditor" / "schemas"
NAMES = ("rule-pack", "waivers", "inventory", "baseline")
PACKS = sorted((ROOT / "rules").glob("*.yaml"))
CHECK_JSONSCHEMA = shutil.which("check-jsonschema")
MODELINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")


def check_jsonschema(*argv: str) -> subprocess.CompletedProcess[str]:
    if CHECK_JSONSCHEMA is None:
        pytest.fail("check-jsonschema is not installed (it is in the test extras)")
    return subprocess.run([CHECK_JSONSCHEMA, *argv], capture_output=True, text=True, timeout=300, cwd=ROOT)


def errors(name: str, doc: Any) -> list[str]:
    return [e.message for e in Draft202012Validator(load_schema(name)).iter_errors(json_view(doc))]


@pytest.mark.parametrize("name", NAMES)
def test_each_schema_is_valid_draft_2020_12_and_describes_every_property(name: str) -> None:
    schema = load_schema(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    undescribed: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for key, sub in (node.get("properties") or {}).items():
                if not (isinstance(sub, dict) and ("description" in sub or "$ref" in sub)):
                    undescribed.append(f"{where}.{key}")
            for key, sub in node.items():
                walk(sub, f"{where}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{where}[{i}]")

    walk(schema, name)
    # the only ones left bare are the `not` markers and anyOf branches that restate a described property
    assert [u for u in undescribed if ".allOf" not in u and ".dependentSchemas" not in u] == []


def test_check_jsonschema_accepts_the_schemas_against_their_metaschema() -> None:
    done = check_jsonschema("--check-metaschema", *(str(SCHEMAS / f"{n}.schema.json") for n in NAMES))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_builtin_pack_names_its_schema_in_a_modeline_and_still_loads() -> None:
    from auditor.judge.rules import load_rules

    for pack in PACKS:
        first = pack.read_text().splitlines()[0]
        match = MODELINE.match(first)
        assert match, f"{pack.name}: first line {first!r} is not a yaml-language-server modeline"
        assert (pack.parent / match.group(1)).resolve() == SCHEMAS / "rule-pack.schema.json"
    assert {r.pack for r in load_rules().rules} == {p.stem for p in PACKS}


def test_check_jsonschema_validates_the_builtin_packs_and_refuses_a_broken_one(tmp_path: Path) -> None:
    schema = str(SCHEMAS / "rule-pack.schema.json")
    done = check_jsonschema("--schemafile", schema, *map(str, PACKS))
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text(re.sub(r"severity: \w+", "severity: hgh", PACKS[0].read_text(), count=1))
    assert "severity: hgh" in broken.read_text()
    done = check_jsonschema("--schemafile", schema, str(broken))
    assert done.returncode == 1 and "'hgh' is not one of" in done.stdout, done.stdout + done.stderr


def test_check_jsonschema_reads_waiver_dates_as_the_loader_does(tmp_path: Path) -> None:
    """YAML dates are text to JSON Schema tools (YAML 1.2); an impossible one fails the `date` format there and
    the loader's own check here."""
    schema = str(SCHEMAS / "waivers.schema.json")
    good = SEEDS / "waivers.yaml"
    assert check_jsonschema("--schemafile", schema, str(good)).returncode == 0
    bad = tmp_path / "w.yaml"
    bad.write_text("- {rule: x, hosts: ['*'], reason: r, expires: '2026-02-30'}\n")
    done = check_jsonschema("--schemafile", schema, str(bad))
    assert done.returncode == 1 and "is not a 'date'" in done.stdout, done.stdout


@pytest.mark.parametrize(("expires", "valid"), [
    ("2026-09-30", True), ("'2026-09-30'", True),
    ("2026-09-30T12:00:00+14:00", False), ("'2026-09-30T12:00:00Z'", False), ("2026-09-30 12:00:00", False),
    ("'2026-9-3'", False), ("'2026-02-30'", False), ("2026-02-30", False),
])
def test_check_jsonschema_and_the_loader_agree_on_waiver_expires(tmp_path: Path, expires: str, valid: bool) -> None:
    """`expires` is a date only, quoted or not: a time of day is refused by both, not by one of them."""
    path = tmp_path / "w.yaml"
    path.write_text(f"- {{rule: x, hosts: ['*'], reason: r, expires: {expires}}}\n")
    done = check_jsonschema("--schemafile", str(SCHEMAS / "waivers.schema.json"), str(path))
    assert done.returncode == (0 if valid else 1), done.stdout + done.stderr
    try:
        load_waivers(str(path))
        loaded = True
    except InputError as exc:
        assert (exc.path, exc.line) == (str(path), 1)
        loaded = False
    assert loaded is valid


def readme_blocks() -> list[Any]:
    """The YAML examples of README and the documentation site (docs/*.md)."""
    text = "\n".join(p.read_text() for p in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))))
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def kind(doc: Any) -> str | None:
    if isinstance(doc, dict) and "rules" in doc:
        return "rule-pack"
    if isinstance(doc, dict) and "waivers" in doc or isinstance(doc, list) and doc and "reason" in doc[0]:
        return "waivers"
    if isinstance(doc, dict) and "hosts" in doc:
        return "inventory"
    if isinstance(doc, dict) and "baseline" in doc:
        return "baseline"
    return None


def test_the_readme_examples_validate() -> None:
    found: dict[str, int] = {}
    for doc in readme_blocks():
        if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "id" in doc[0]:
            doc = {"rules": doc}  # a fragment: rules of a pack
        name = kind(doc)
        if name is None:
            continue
        found[name] = found.get(name, 0) + 1
        assert errors(name, doc) == [], doc
    assert {"rule-pack", "waivers", "inventory", "baseline"} <= set(found), found


@pytest.mark.parametrize(("name", "text"), [
    ("inventory", inventory_module.__doc__.split("```yaml\n")[1].split("```")[0]),
    ("baseline", baseline_module.__doc__.split("```yaml\n")[1].split("```")[0]),
    *((n, (SEEDS / f"{n}.yaml").read_text()) for n in ("waivers", "inventory", "baseline")),
])
def test_the_docstring_examples_and_fuzz_seeds_validate(name: str, text: str) -> None:
    assert errors(name, load_yaml_text(text)) == []


def test_a_captured_baseline_validates() -> None:
    snapshot = json.loads((ROOT / "tests" / "data" / "compare" / "fleet" / "golden.json").read_text())
    text = render(*capture(snapshot))
    assert errors("baseline", load_yaml_text(text)) == []
    assert len(load_yaml_text(text)["expect"]) > 50


def test_the_schemas_hold_the_vocabularies_the_code_holds() -> None:
    rule = load_schema("rule-pack")["$defs"]["rule"]
    assert tuple(rule["properties"]["severity"]["enum"]) == SEVERITIES
    ssh = load_schema("inventory")["$defs"]["ssh"]
    assert set(ssh["properties"]) == {f.name for f in fields(SSHOptions)}
    assert load_schema("baseline")["properties"]["baseline"]["const"] == baseline_module.BASELINE_SCHEMA


@pytest.mark.parametrize(("name", "doc", "words"), [
    ("rule-pack", {"rules": [{"id": "a.b", "title": "t", "severity": "hgh", "when": "x"}]}, "is not one of"),
    ("rule-pack", {"rules": [{"id": "a.b", "title": "t", "severity": "low"}]}, "is not valid under any"),
    ("waivers", [{"rule": "a", "reason": "r", "expires": "2030-01-01"}], "is not valid under any"),
    ("inventory", {"hosts": [{"name": "a", "target": "local", "ssh": {"port": 70000}}]}, "maximum"),
    ("baseline", {"baseline": "ami-auditor/baseline/1", "expect": {"facts.os.id": None}}, "is not of type"),
])
def test_the_schemas_refuse_what_the_loaders_refuse(name: str, doc: Any, words: str) -> None:
    found = errors(name, doc)
    assert found and any(words in e for e in found), found
