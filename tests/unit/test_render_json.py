"""The JSON renderer writes with orjson; its output means the same document as json.dumps's (render_stdlib,
the renderer before orjson) on reports full of hostile host text and odd Python values, and stays inert on
a terminal (textsafe's guarantee)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.render import RENDERERS
from auditor.render.json_renderer import render, render_stdlib
from auditor.textsafe import UNSAFE, json_bytes, json_text
from tests.paths import DATA

DATA = DATA / "reports"
HOSTILE = ("\x00 nul \x07\x1b[2J\r\x08\x0b\x0c\x1f\x7f del \x85\x9b c1 \u061c\u200e\u200f\u2028\u2029"
           "\u202a\u202e rtl \u2066\u2069\ufeff\ufffe\uffff \"q\" \\b\\ </script> caf\u00e9 \u4e2d \U0001f600")


@dataclasses.dataclass
class Point:
    x: int


def parsed(text: str) -> str:
    """What a reader gets: the repr of the parsed document (key order, -0.0 and int/float kept)."""
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert not [c for c in UNSAFE.findall(text) if c != "\n"], "an unsafe character left raw"
    return repr(json.loads(text))


def hostile_report() -> dict[str, Any]:
    doc = json.loads((DATA / "fleet.json").read_text(encoding="utf-8"))
    doc["hosts"][0]["name"] = HOSTILE
    doc["hosts"][0]["labels"] = {HOSTILE: HOSTILE, "az": "a\u202eb"}
    doc["hosts"][0]["error"] = HOSTILE * 3
    doc["hosts"][0]["duration_s"] = math.nan
    doc["notes"] = [HOSTILE, math.inf, -math.inf, -0.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 2**63, -(2**63)]
    return doc


def test_hostile_text_same_document_as_json_dumps() -> None:
    doc = hostile_report()
    fast, slow = render(doc), render_stdlib(doc)
    assert parsed(fast) == parsed(slow)
    again = json.loads(fast)
    assert again["hosts"][0]["name"] == HOSTILE and again["hosts"][0]["duration_s"] is None
    assert again["notes"][1:3] == [None, None]
    assert "\\u202e" in fast and "\\u0000" in fast and "\\u009b" in fast and "caf\u00e9" in fast
    assert RENDERERS["json"][0](doc) == fast


def test_ascii_only_report_with_del_and_c0() -> None:
    doc = {"name": "a\x7fb\x1b[2J\x00c", "labels": {"\x7f": "\t"}}
    fast = render(doc)
    assert parsed(fast) == parsed(render_stdlib(doc)) and "\\u007f" in fast and "\\u001b" in fast


def test_python_values_as_json_dumps_saw_them() -> None:
    """Tuples as arrays, unknown types (datetimes and dataclasses too, which orjson would otherwise
    write its own way) as str()."""
    doc = {"t": (1, (2, 3)), "when": dt.datetime(2026, 1, 2, 3, 4, 5), "day": dt.date(2026, 1, 2),
           "p": Point(1), "s": {1}, "b": b"x", "nested": [{"deep": (math.nan,)}]}
    assert parsed(render(doc)) == parsed(render_stdlib(doc))


@pytest.mark.parametrize("odd", [{1: "int key"}, {None: "null key"}, {"big": 2**64}, {"neg": -(2**63) - 1},
                                 {"lone": "\ud800 surrogate"}, {"\udfff": "key"}, {"deep": [[[[[[]]]]]] * 2}],
                         ids=["int-key", "none-key", "big-int", "negative-big-int", "lone-surrogate",
                              "surrogate-key", "nested"])
def test_what_orjson_refuses_is_written_as_before(odd: dict[str, Any]) -> None:
    doc = {"schema": "x", **odd}
    assert render(doc) == render_stdlib(doc)


def test_cycle_raises_as_before() -> None:
    doc: dict[str, Any] = {"a": []}
    doc["a"].append(doc)
    with pytest.raises(RecursionError):
        render_stdlib(doc)
    with pytest.raises(RecursionError):
        render(doc)


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.name)
def test_saved_reports_same_document(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert parsed(render(doc)) == parsed(render_stdlib(doc)) == repr(doc)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
       | st.lists(st.sampled_from(list("\x00\n\x7f\x85\u061c\u200e\u2028\u202e\u2066\u2069\ufeff\ufffe\uffffa→é😀")),
                  max_size=40).map("".join))
def test_escaping_bytes_equals_escaping_text(text: str) -> None:
    """json_bytes escapes UTF-8 bytes exactly as json_text escapes the decoded text (no decode of a big report)."""
    assert json_bytes(text.encode("utf-8")) == json_text(text).encode("utf-8")


def _fleet_doc(hosts: int) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / "fleet.json").read_text())
    host, finding = doc["hosts"][0], doc["findings"][0]
    doc["hosts"] = [{**host, "name": f"h{i}"} for i in range(hosts)]
    doc["findings"] = [{**finding, "host": f"h{i}", "title": f"{HOSTILE} {i}"} for i in range(hosts)]
    return doc


def test_the_report_is_written_in_pieces_that_join_to_the_whole_text(tmp_path: Path) -> None:
    """render_chunks gives render_bytes' bytes without ever holding them: hosts and findings go out a slice
    at a time (a 100,000-host report is ~0.7 GiB of JSON), hostile text escaped in every piece."""
    from auditor.render.json_renderer import _SLICE, render_bytes, render_chunks
    from auditor.render.stage import write_formats

    for name in ("clean", "fleet", "fleet-scan", "incomplete"):
        doc = json.loads((DATA / f"{name}.json").read_text())
        assert b"".join(render_chunks(doc)) == render_bytes(doc), name
    big = _fleet_doc(3 * _SLICE + 7)
    whole = render_bytes(big)
    pieces = list(render_chunks(big))
    assert b"".join(pieces) == whole
    assert max(len(p) for p in pieces) < len(whole) / 3  # never the whole text at once
    assert not UNSAFE.search(whole.decode("utf-8").replace("\n", ""))
    big["drift"] = []  # an empty list stays `[]`, in place
    big["findings"][_SLICE + 1]["evidence"] = {"n": 2**70}  # one slice orjson will not write
    assert json.loads(b"".join(render_chunks(big))) == json.loads(render_stdlib(big))
    write_formats(big, ("json",), tmp_path)
    assert json.loads((tmp_path / "report.json").read_bytes())["findings"][_SLICE + 1]["evidence"] == {"n": 2**70}


def test_a_host_string_cannot_pass_for_the_place_of_a_list() -> None:
    """The rest of the document is cut where each list goes at marks holding a random nonce: a host that
    writes what a mark looks like only gets its text back, escaped, as data."""
    from auditor.render.json_renderer import render_bytes, render_chunks

    doc = _fleet_doc(3)
    doc["notes"] = ["streamed hosts 00000000000000000000000000000000", "\"hosts\": ["]
    assert b"".join(render_chunks(doc)) == render_bytes(doc)
    assert json.loads(b"".join(render_chunks(doc)))["notes"] == doc["notes"]


def test_the_render_step_checks_the_document_as_written(tmp_path: Path) -> None:
    """The render step validates the document as the JSON it writes, where a tuple is an array (so it is
    not walked for tuples), and still refuses a document the schema rejects, writing nothing."""
    from auditor.errors import InputError
    from auditor.render.stage import RenderPlan, write
    from auditor.reportdoc import load_report, validate_report

    doc = json.loads((DATA / "fleet.json").read_text())
    doc["notes"] = tuple(doc["notes"]) + ("a note in a tuple",)
    with pytest.raises(InputError):  # the strict check (tests, saved reports) still sees a tuple
        validate_report(doc)
    write(RenderPlan(("json",), tmp_path), doc)
    assert load_report(str(tmp_path / "report.json"))["notes"][-1] == "a note in a tuple"
    doc["hosts"][0]["status"] = "sleeping"
    with pytest.raises(InputError, match="/hosts/0/status"):
        write(RenderPlan(("json",), tmp_path / "bad"), doc)
    assert not (tmp_path / "bad").exists()
