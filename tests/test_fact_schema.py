"""The fact schema (facts.yaml) is consistent, and the published snapshot JSON Schema matches it."""

from __future__ import annotations

import json
from importlib import resources

import yaml

from auditor.collect.schema import fact_paths, is_volatile, lookup, snapshot_json_schema

ALLOWED = {"type", "description", "volatile", "key", "items", "fields", "values"}
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
