"""jsonschema-rs as the first check of reports and snapshots (auditor/schemacheck.py): it agrees with the
pure-Python jsonschema on our two schemas, never accepts what jsonschema refuses, and every error message
is still jsonschema's."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from auditor.collect.schema import snapshot_json_schema
from auditor.compare.sources import load_snapshot_file
from auditor.errors import InputError
from auditor.reportdoc import report_json_schema, validate_report
from auditor.schemacheck import FastCheck
from tests.paths import DATA

REPORTS = sorted((DATA / "reports").glob("*.json"))
SNAPSHOTS = sorted((DATA / "snapshots").glob("*.json")) + sorted((DATA / "compare").rglob("*.json"))
SCHEMAS = {"report": report_json_schema(), "snapshot": snapshot_json_schema()}
SEEDS = {"report": [json.loads(p.read_text()) for p in REPORTS],
         "snapshot": [json.loads(p.read_text()) for p in SNAPSHOTS]}


def python_valid(kind: str, doc: Any) -> bool:
    return jsonschema.Draft202012Validator(SCHEMAS[kind]).is_valid(doc)


def rs_verdict(kind: str, doc: Any) -> bool | None:
    """jsonschema-rs's own verdict (None: it cannot read the document)."""
    import jsonschema_rs

    try:
        return bool(jsonschema_rs.Draft202012Validator(SCHEMAS[kind]).is_valid(doc))
    except ValueError:  # e.g. a lone surrogate in a key (the JSON loader refuses those)
        return None


def finite(doc: Any) -> bool:
    if isinstance(doc, float):
        return math.isfinite(doc)
    if isinstance(doc, dict):
        return all(map(finite, doc.values()))
    if isinstance(doc, list):
        return all(map(finite, doc))
    return True


@pytest.mark.parametrize("kind", list(SCHEMAS))
def test_every_test_document_valid_for_both(kind: str) -> None:
    assert SEEDS[kind]
    for doc in SEEDS[kind]:
        assert python_valid(kind, doc) and rs_verdict(kind, doc) is True
        assert FastCheck(SCHEMAS[kind]).valid(doc) and FastCheck(SCHEMAS[kind]).valid(doc, from_json=True)


INVALID = {
    "report": [lambda d: d["hosts"][0].update(status=7), lambda d: d.pop("findings"),
               lambda d: d["summary"].update(hosts="3"), lambda d: d.update(schema="ami-auditor/report/2"),
               lambda d: d["hosts"][0].update(duration_s=True), lambda d: d.update(notes="one"),
               lambda d: d["findings"].append({"host": "h"}), lambda d: d["hosts"][0].update(labels={"az": 1})],
    "snapshot": [lambda d: d["host"].update(uptime_s="long"), lambda d: d.pop("facts"),
                 lambda d: d["labels"].update(az=None), lambda d: d.update(errors=[]),
                 lambda d: d["facts"]["systemd"].update(units="x"), lambda d: d.update(collected_at=5)],
}


@pytest.mark.parametrize("kind", list(SCHEMAS))
def test_invalid_documents_invalid_for_both(kind: str) -> None:
    for edit in INVALID[kind]:
        doc = copy.deepcopy(SEEDS[kind][0])
        edit(doc)
        assert not python_valid(kind, doc)
        assert rs_verdict(kind, doc) is False
        assert not FastCheck(SCHEMAS[kind]).valid(doc)


def test_format_is_an_annotation_for_both() -> None:
    doc = copy.deepcopy(SEEDS["snapshot"][0])
    doc["collected_at"] = "not a date-time"
    assert python_valid("snapshot", doc) and rs_verdict("snapshot", doc) is True


def test_tuple_where_an_array_belongs_is_still_refused() -> None:
    """jsonschema-rs reads a tuple as an array (jsonschema does not): the walk catches it."""
    doc = copy.deepcopy(SEEDS["report"][0])
    doc["notes"] = ("a", "b")
    assert rs_verdict("report", doc) is True and not python_valid("report", doc)
    assert not FastCheck(SCHEMAS["report"]).valid(doc)
    with pytest.raises(InputError, match="at JSON pointer /notes: .* is not of type 'array'"):
        validate_report(doc)


def test_messages_are_jsonschemas(tmp_path: Path) -> None:
    doc = copy.deepcopy(SEEDS["report"][0])
    doc["hosts"][0]["status"] = 7
    with pytest.raises(InputError) as exc:
        validate_report(doc, "r.json")
    assert str(exc.value) == ("r.json: not a valid ami-auditor/report/1 document at JSON pointer /hosts/0/status: "
                              + jsonschema.exceptions.best_match(
                                  jsonschema.Draft202012Validator(SCHEMAS["report"]).iter_errors(doc)).message)
    snap = copy.deepcopy(SEEDS["snapshot"][0])
    snap["host"]["uptime_s"] = "long"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(snap))
    with pytest.raises(InputError, match="at JSON pointer /host/uptime_s: 'long' is not of type"):
        load_snapshot_file(path)
