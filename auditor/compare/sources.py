"""Read saved snapshot files for comparison: JSON syntax errors name the line, schema errors the field."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, cast

from .. import SNAPSHOT_SCHEMA
from ..collect.schema import snapshot_json_schema
from ..errors import InputError
from ..jsonload import json_pointer, load_json_file
from ..schemacheck import FastCheck
from ..snapshotdoc import Snapshot

if TYPE_CHECKING:
    import jsonschema


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    import jsonschema  # when a snapshot file is read, not at start-up

    return jsonschema.Draft202012Validator(snapshot_json_schema())


@lru_cache(maxsize=1)
def _fast_check() -> FastCheck:
    return FastCheck(snapshot_json_schema())


def load_snapshot_file(path: str | Path) -> Snapshot:
    """A snapshot document from disk, validated against the snapshot schema."""
    p = str(path)
    doc = load_json_file(p)
    if isinstance(doc, dict) and str(doc.get("schema")).startswith("ami-auditor/report/"):
        raise InputError("this is a report, not a snapshot: a report holds no facts (snapshots come from "
                         "`ami-auditor collect -o DIR`)", p, 1)
    if not isinstance(doc, dict) or doc.get("schema") != SNAPSHOT_SCHEMA:
        raise InputError(f"not a snapshot: expected \"schema\": \"{SNAPSHOT_SCHEMA}\"", p, 1)
    if _fast_check().valid(doc, from_json=True):  # jsonschema-rs first; jsonschema names the error
        return cast(Snapshot, doc)  # valid by the schema made from the same declaration
    error = next(iter(_validator().iter_errors(doc)), None)
    if error is not None:
        where = json_pointer(error.absolute_path) or "the top level"
        raise InputError(f"not a valid snapshot at JSON pointer {where}: {_clipped(error.message)}", p)
    return cast(Snapshot, doc)


MAX_MESSAGE = 300  # characters of jsonschema's message, which quotes the value (a 20 MB name, say)


def _clipped(message: str) -> str:
    """The message bounded: it becomes the host's error, copied into every report and the store."""
    if len(message) <= MAX_MESSAGE:
        return message
    return f"{message[:MAX_MESSAGE]}… ({len(message):,} characters)"
