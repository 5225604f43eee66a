"""The typed snapshot (auditor/snapshotdoc.py) against what really defines the document: the fact schema
(collect/facts.yaml), the published JSON Schema (auditor/schemas/snapshot.schema.json) and snapshots
built by the real collector from recorded probe output. Adding a top-level key or an area to one side
only fails here; `test_the_check_fails_on_a_doctored_schema` shows the check can fail."""

from __future__ import annotations

import copy
import json
import os
import types
import typing
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import pytest

from auditor import facttypes, snapshotdoc
from auditor.collect.schema import FactSpec, derived_areas, fact_tree, snapshot_json_schema
from auditor.collect.snapshot import build_snapshot
from auditor.judge.paths import root_spec
from auditor.models import CommandResult, HostSpec
from auditor.snapshotdoc import SNAPSHOT_KEYS, Facts, HostInfo, ProbeInfo, Snapshot
from tests.framing_fixtures import FIXTURE_NONCE
from tests.paths import DATA, ROOT

PROBE = DATA / "probe"
FACTTYPES = ROOT / "auditor" / "facttypes.py"
UPDATE = os.environ.get("AMI_AUDITOR_UPDATE_GOLDEN") == "1"
_SCALAR = {"string": str, "integer": int, "number": float, "boolean": bool}
_HEADER = '''"""The facts of each area as TypedDicts, generated from collect/facts.yaml: do not edit by hand.

Regenerate with `AMI_AUDITOR_UPDATE_GOLDEN=1 pytest tests/unit/test_snapshot_types.py` after changing
facts.yaml; the test fails while this file and the schema disagree. Every key is optional and every
value may be null: a snapshot is host data, and a failed collector leaves nulls (snapshotdoc.py). Lists of
values and maps are read-only (Sequence, Mapping): a parser's `list[str]` is one, a reader must allow nulls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict
'''
_PY = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


def _class_name(path: str) -> str:
    return "".join(p.title().replace("_", "") for p in path.replace("[]", " row").replace(".", " ").split()[1:])


def generate_facttypes(tree: FactSpec) -> str:
    """auditor/facttypes.py's text: one TypedDict per object and per list row of facts.yaml's `facts`; a row
    declared exactly like an earlier one (cpu_stack's self and inclusive) is an alias of it."""
    classes: list[str] = []
    seen: dict[str, str] = {}

    def hint(spec: FactSpec) -> str:
        if spec.type in _PY:
            return f"{_PY[spec.type]} | None"
        if spec.type == "map":
            return f"Mapping[str, {_PY.get(spec.values or 'string', 'str')} | None] | None"
        if spec.type == "list" and not spec.children:
            return f"Sequence[{_PY.get(spec.items or 'string', 'str')} | None] | None"
        name = _class_name(spec.path + ("[]" if spec.type == "list" else ""))
        fields = "\n".join(f"    {k}: {hint(v)}" for k, v in spec.children.items())
        what = f"One row of `{spec.path}`" if spec.type == "list" else f"`{spec.path}`"
        if fields in seen:
            classes.append(f"{name} = {seen[fields]}  # {what}: declared alike\n")
        else:
            seen[fields] = name
            classes.append(f"class {name}(TypedDict, total=False):\n    \"\"\"{what}.\"\"\"\n\n{fields}\n")
        return f"list[{name}] | None" if spec.type == "list" else f"{name} | None"

    for spec in tree.children["facts"].children.values():
        hint(spec)
    return _HEADER + "".join(f"\n\n{c}" for c in classes)


def published() -> dict[str, Any]:
    return json.loads(resources.files("auditor.schemas").joinpath("snapshot.schema.json").read_text())


def _keys(td: Any) -> set[str]:
    return set(td.__required_keys__ | td.__optional_keys__)


def _members(hint: Any) -> set[Any]:
    """The types of a `X | None` hint, origins for generics (`dict[str, Any]` → dict)."""
    args = get_args(hint) if get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    return {get_origin(a) or a for a in args}


def mismatches(schema: dict[str, Any], tree: FactSpec) -> list[str]:
    """Every disagreement between the TypedDicts and a snapshot JSON Schema / fact tree."""
    out = []
    props, required = set(schema["properties"]), set(schema["required"])
    for name, have, want in (("top-level keys", _keys(Snapshot), props),
                             ("SNAPSHOT_KEYS", set(SNAPSHOT_KEYS), props),
                             ("required keys", set(snapshotdoc.REQUIRED_KEYS), required),
                             ("areas", _keys(Facts), set(schema["properties"]["facts"]["properties"])),
                             ("areas in facts.yaml", _keys(Facts), set(tree.children["facts"].children)),
                             ("host facts", _keys(HostInfo), set(schema["properties"]["host"]["properties"]))):
        if have != want:
            out.append(f"{name}: typed only {sorted(have - want)}, schema only {sorted(want - have)}")
    facts = get_type_hints(Facts)
    for area, spec in tree.children["facts"].children.items():
        want = list if spec.type == "list" else getattr(facttypes, _class_name(spec.path), None)
        if area in facts and _members(facts[area]) != {want, type(None)}:
            out.append(f"facts.{area}: typed {facts[area]}, declared {spec.type}")
    hints = get_type_hints(HostInfo)
    for name, spec in tree.children["host"].children.items():
        if name in hints and _members(hints[name]) != {_SCALAR[spec.type], type(None)}:
            out.append(f"host.{name}: typed {hints[name]}, declared {spec.type}")
    return out


def test_facttypes_is_generated_from_facts_yaml() -> None:
    text = generate_facttypes(fact_tree())
    if UPDATE:
        FACTTYPES.write_text(text)
    assert FACTTYPES.read_text() == text, "regenerate with AMI_AUDITOR_UPDATE_GOLDEN=1"


def test_typed_snapshot_matches_the_schema_and_facts_yaml() -> None:
    assert published() == snapshot_json_schema()  # the file is the generated one (test_fact_schema too)
    assert mismatches(published(), fact_tree()) == []


def test_the_check_fails_on_a_doctored_schema() -> None:
    extra_key = copy.deepcopy(published())
    extra_key["properties"]["region_hint"] = {"type": "string"}
    lost_area = copy.deepcopy(published())
    del lost_area["properties"]["facts"]["properties"]["ecs"]
    now_required = copy.deepcopy(published())
    now_required["required"].append("labels")
    for doc, word in ((extra_key, "region_hint"), (lost_area, "ecs"), (now_required, "labels")):
        found = mismatches(doc, fact_tree())
        assert found and word in " ".join(found)


def test_one_list_of_top_level_keys_feeds_schema_rules_and_history() -> None:
    assert list(snapshot_json_schema()["properties"]) == list(SNAPSHOT_KEYS)
    assert tuple(snapshot_json_schema()["required"]) == snapshotdoc.REQUIRED_KEYS
    assert set(snapshotdoc.FREE_KEYS) | set(snapshotdoc.DECLARED_KEYS) == set(SNAPSHOT_KEYS)
    assert set(snapshotdoc.PER_RUN_KEYS) <= set(SNAPSHOT_KEYS)
    roots = set(root_spec().children)
    assert roots == set(SNAPSHOT_KEYS) - {"not_applicable"}  # a rule never reads not_applicable: it is skipped


@pytest.mark.parametrize("name", sorted(p.name for p in PROBE.iterdir() if (p / "raw.txt").is_file()))
def test_built_snapshots_hold_exactly_the_typed_keys(name: str) -> None:
    raw = (PROBE / name / "raw.txt").read_text()
    snap = build_snapshot(HostSpec(name, "ssh://x"), CommandResult(stdout=raw, stderr="", exit_status=0), FIXTURE_NONCE)
    assert list(snap) == list(SNAPSHOT_KEYS)
    assert set(snap["probe"]) == _keys(ProbeInfo)
    assert set(snap["facts"]) == _keys(Facts) - derived_areas()  # trends: added by history
    assert set(snap["host"]) <= _keys(HostInfo)


def test_every_parser_returns_its_areas_generated_type() -> None:
    """Each collector's parse function is annotated with the area's type in facttypes.py (what mypy then checks
    the parser's dicts against), never an untyped dict."""
    from auditor.collect.collectors import COLLECTORS

    facts = get_type_hints(Facts)
    wrong = {area: get_type_hints(c.parse).get("return") for area, c in COLLECTORS.items()
             if typing.Optional[get_type_hints(c.parse).get("return")] != facts[area]}  # noqa: UP045 - a hint object
    assert wrong == {}


def nonconforming(value: Any, hint: Any, path: str) -> list[str]:
    """Where `value` is not what `hint` (a facttypes hint) allows: an undeclared key, a wrong scalar type."""
    if value is None:
        return []
    args = [a for a in get_args(hint) if a is not type(None)] if _members(hint) & {type(None)} else [hint]
    hint = args[0]
    origin = get_origin(hint)
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not an object"]
        hints = get_type_hints(hint)
        return ([f"{path}.{k}: not declared" for k in value if k not in hints]
                + [p for k, v in value.items() if k in hints for p in nonconforming(v, hints[k], f"{path}.{k}")])
    if origin in (list, Sequence):
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        return [p for i, v in enumerate(value) for p in nonconforming(v, get_args(hint)[0], f"{path}[{i}]")]
    if origin is Mapping:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a map"]
        return [p for k, v in value.items() for p in nonconforming(v, get_args(hint)[1], f"{path}.{k}")]
    ok = isinstance(value, hint) and not (hint is int and isinstance(value, bool))
    ok = ok or (hint is float and type(value) is int)
    return [] if ok else [f"{path}: {value!r} is not {hint.__name__}"]


def test_nonconforming_finds_an_undeclared_key_and_a_wrong_type() -> None:
    hint = get_type_hints(Facts)["cgroups"]
    assert nonconforming({"mode": "v2", "v2": [{"path": "/", "nr_descendants": 3}]}, hint, "cgroups") == []
    assert nonconforming({"mode": 2, "v2": [{"path": "/", "nr_subsys_cpu": 1}], "memory": {"live": "7"}},
                         hint, "cgroups") == ["cgroups.mode: 2 is not str", "cgroups.v2[0].nr_subsys_cpu: not declared",
                                              "cgroups.memory.live: '7' is not int"]


@pytest.mark.parametrize("name", sorted(p.name for p in PROBE.iterdir() if (p / "raw.txt").is_file()))
def test_parsed_facts_hold_what_their_types_declare(name: str) -> None:
    """The parsers' output on recorded probe runs, checked at run time against facttypes.py: the places mypy
    cannot see (a row built from computed keys) hold only declared keys of declared types too."""
    raw = (PROBE / name / "raw.txt").read_text()
    snap = build_snapshot(HostSpec(name, "ssh://x"), CommandResult(stdout=raw, stderr="", exit_status=0), FIXTURE_NONCE)
    facts = get_type_hints(Facts)
    assert [p for area, value in snap["facts"].items() for p in nonconforming(value, facts[area], area)] == []
    assert nonconforming(snap["host"], HostInfo, "host") == []


@pytest.mark.parametrize("path", sorted((PROBE.parent / "snapshots").glob("*.json")), ids=lambda p: p.name)
def test_saved_fleet_snapshots_hold_what_their_types_declare(path: Path) -> None:
    snap = json.loads(path.read_text())
    facts = get_type_hints(Facts)
    assert [p for area, value in snap["facts"].items() for p in nonconforming(value, facts[area], area)] == []
    assert nonconforming(snap["host"], HostInfo, "host") == []
