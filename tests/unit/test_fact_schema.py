"""The fact schema (facts.yaml) is consistent, and the published snapshot JSON Schema matches it."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import yaml

from auditor.collect import schema
from auditor.collect.schema import (
    SchemaError,
    drift_level,
    fact_paths,
    is_volatile,
    lookup,
    parse_schema,
    snapshot_json_schema,
)
from auditor.compare.severity import drift_severity, path_severity

ALLOWED = {"type", "description", "volatile", "derived", "key", "items", "fields", "values", "drift"}
TYPES = {"string", "integer", "number", "boolean", "object", "list", "map"}


def test_published_snapshot_schema_is_generated_from_facts_yaml() -> None:
    published = json.loads(resources.files("auditor.schemas").joinpath("snapshot.schema.json").read_text())
    assert published == snapshot_json_schema(), "regenerate auditor/schemas/snapshot.schema.json"


def test_every_declared_fact_is_well_formed() -> None:
    raw = yaml.safe_load(resources.files("auditor.collect").joinpath("facts.yaml").read_text())

    def walk(node: dict, path: str) -> None:
        if isinstance(node.get("type"), str):
            assert set(node) <= ALLOWED, (path, set(node) - ALLOWED)
            assert node["type"] in TYPES, path
            assert node.get("description"), f"{path} has no description"
            for name, child in (node.get("fields") or {}).items():
                walk(child, f"{path}.{name}")
            if isinstance(node.get("items"), dict):
                for name, child in node["items"].items():
                    walk(child, f"{path}[].{name}")
                if node.get("key"):
                    assert node["key"] in node["items"], f"{path}: key {node['key']} is not a field"
        else:
            for name, child in node.items():
                walk(child, f"{path}.{name}" if path else name)

    walk(raw, "")


def test_lookup_understands_row_selectors_and_volatility() -> None:
    assert lookup("facts.systemd.units[ecs.service].unit_file_state").type == "string"
    assert is_volatile("facts.systemd.units[ecs.service].restarts")
    assert not is_volatile("facts.binaries[kubelet].sha256")
    assert is_volatile("facts.cpu.cores[3].system_pct")  # inherited from the volatile list
    assert lookup("facts.no.such.fact") is None
    assert len(fact_paths()) > 150


@pytest.mark.parametrize(("path", "severity"), [
    ("facts.binaries[kubelet].sha256", "high"),
    ("facts.binaries[kubelet].source_host", "high"),
    ("facts.binaries[kubelet]", "high"),  # a whole row: the list's own level
    ("facts.binaries[kubelet].version", "medium"),
    ("facts.binaries[kubelet].size", "low"),  # undeclared
    ("facts.binaries[kubelet].evidence[0].url", "low"),
    ("facts.systemd.enabled_units[ecs.service]", "high"),  # enablement
    ("facts.systemd.units[ecs.service].health", "medium"),
    ("facts.kernel.sysctls[vm.swappiness]", "medium"),
    ("facts.kernel.sysctls", "low"),  # a map's level is its entries', not the whole map's
    ("facts.packages.items[bash].version", "medium"),
    ("facts.cgroups.mode", "high"),
    ("facts.cpu.model", "low"),
    ("facts.no.such.fact", "low"),
])
def test_drift_severity_is_read_from_facts_yaml(path: str, severity: str) -> None:
    assert path_severity(path) == severity


def test_enablement_direction_decides_the_severity() -> None:
    path = "facts.systemd.unit_files[ecs.service].state"
    assert drift_level(path) == "enablement"
    assert drift_severity(path, "changed", "disabled", "enabled") == "high"
    assert drift_severity(path, "changed", "enabled", "disabled") == "medium"
    assert drift_severity("facts.systemd.enabled_units[x]", "removed", True, None) == "medium"
    assert drift_severity("facts.systemd.enabled_units[x]", "added", None, True) == "high"


def test_changing_the_data_changes_the_severity(monkeypatch: pytest.MonkeyPatch) -> None:
    text = resources.files("auditor.collect").joinpath("facts.yaml").read_text()
    text = text.replace("id: {type: string, drift: medium, description: os-release ID}",
                        "id: {type: string, drift: critical, description: os-release ID}")
    tree = parse_schema(text)
    paths: dict = {}

    def walk(spec: schema.FactSpec) -> None:
        paths[spec.path] = spec
        for child in spec.children.values():
            walk(child)

    walk(tree)
    monkeypatch.setattr(schema, "fact_paths", lambda: paths)
    drift_level.cache_clear()
    try:
        assert path_severity("facts.os.id") == "critical"
    finally:
        drift_level.cache_clear()


@pytest.mark.parametrize(("decl", "words"), [
    ("facts:\n  os:\n    id: {type: string, drift: urgent, description: x}\n", "facts.os.id: drift 'urgent'"),
    ("facts:\n  os:\n    up: {type: number, volatile: true, drift: high, description: x}\n",
     "facts.os.up: a volatile fact never drifts"),
    ("facts:\n  os:\n    id: {type: string, severity: high, description: x}\n", "unknown key(s) severity"),
    ("facts:\n  os:\n    id: {type: strin, description: x}\n", "unknown type 'strin'"),
    ("facts:\n  l:\n    type: list\n    volatile: true\n    items:\n      n: {type: string, drift: low}\n",
     "facts.l[].n: a volatile fact never drifts"),
    ("facts:\n  os:\n    id: {type: string, description: [a, b]}\n", "facts.os.id: description must be text"),
    ("facts:\n  os:\n    type: object\n    fields: [id]\n", "facts.os: an object needs fields"),
    ("facts:\n  os: [id]\n", "facts.os: expected a mapping, not list"),
])
def test_a_malformed_schema_is_refused_at_load_naming_the_path(decl: str, words: str) -> None:
    with pytest.raises(SchemaError) as info:
        parse_schema(decl)
    assert words in str(info.value)
