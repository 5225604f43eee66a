"""A big report is checked against its schema in chunks (bounded memory) with the same verdict as whole:
a bad item in any chunk of any big array is found and named; a valid report passes."""

from __future__ import annotations

import copy
import json

import pytest

from auditor import reportdoc
from auditor.errors import InputError
from tests.paths import DATA

REPORT = DATA / "reports" / "fleet-scan.json"


def _big(n: int) -> dict:
    doc = json.loads(REPORT.read_text())
    finding, host = doc["findings"][0], doc["hosts"][0]
    doc["findings"] = [dict(finding, host=f"h{i}") for i in range(n)]
    doc["hosts"] = [dict(host, name=f"h{i}") for i in range(n)]
    return doc


def test_a_valid_big_report_passes_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reportdoc, "CHUNK", 7)
    doc = _big(40)
    assert len(list(reportdoc._pieces(doc))) == 1 + 2 * 6  # the base, then 6 chunks of each big array
    reportdoc.validate_report(doc)


@pytest.mark.parametrize("array, index", [("findings", 0), ("findings", 23), ("hosts", 39)])
def test_a_bad_item_in_any_chunk_is_found_and_named(monkeypatch: pytest.MonkeyPatch, array: str,
                                                    index: int) -> None:
    monkeypatch.setattr(reportdoc, "CHUNK", 7)
    doc = _big(40)
    bad = copy.deepcopy(doc)
    bad[array][index]["severity" if array == "findings" else "status"] = 12
    with pytest.raises(InputError) as err:
        reportdoc.validate_report(bad)
    assert f"/{array}/{index}/" in str(err.value)


def test_a_bad_top_level_field_is_found_when_arrays_are_chunked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reportdoc, "CHUNK", 7)
    doc = _big(20)
    doc["fail_on"] = ["not", "a", "severity"]
    with pytest.raises(InputError, match="fail_on"):
        reportdoc.validate_report(doc)
