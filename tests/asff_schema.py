"""A JSON Schema for ASFF findings, built from botocore's own Security Hub model (the shapes AWS
publishes for BatchImportFindings: required members, types, enums, list bounds) plus the size limits the
ASFF documentation gives that the model leaves out (Title 256, Description 1024, Id 512 …)."""

from __future__ import annotations

from typing import Any

import botocore.session

ISO = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$"
DOCUMENTED_MAX = {("Title",): 256, ("Description",): 1024, ("Id",): 512, ("GeneratorId",): 512,
                  ("Remediation", "Recommendation", "Text"): 512, ("Resources", "Id"): 512}
TIMESTAMPS = ("CreatedAt", "UpdatedAt", "FirstObservedAt", "LastObservedAt")


def _shape(shape: Any, depth: int = 0) -> dict[str, Any]:
    if depth > 6:  # deep Details shapes: their top levels are what we fill
        return {}
    kind = shape.type_name
    meta = shape.metadata
    if kind == "structure":
        return {"type": "object", "additionalProperties": False, "required": list(shape.required_members),
                "properties": {n: _shape(m, depth + 1) for n, m in shape.members.items()}}
    if kind == "list":
        out: dict[str, Any] = {"type": "array", "items": _shape(shape.member, depth + 1)}
        if "min" in meta:
            out["minItems"] = meta["min"]
        if "max" in meta:
            out["maxItems"] = meta["max"]
        return out
    if kind == "map":
        return {"type": "object", "additionalProperties": _shape(shape.value, depth + 1)}
    if kind == "string":
        out = {"type": "string"}
        if shape.enum:
            out["enum"] = list(shape.enum)
        if "pattern" in meta:
            out["pattern"] = meta["pattern"]
        return out
    if kind in ("integer", "long"):
        return {"type": "integer"}
    if kind in ("double", "float"):
        return {"type": "number"}
    if kind == "boolean":
        return {"type": "boolean"}
    return {}


def asff_schema() -> dict[str, Any]:
    model = botocore.session.get_session().get_service_model("securityhub")
    findings = model.operation_model("BatchImportFindings").input_shape.members["Findings"]
    schema = _shape(findings.member)
    for path, limit in DOCUMENTED_MAX.items():
        node = schema
        for part in path:
            node = node["properties"][part]
            if node.get("type") == "array":
                node = node["items"]
        node["maxLength"] = limit
    for name in TIMESTAMPS:
        schema["properties"][name]["pattern"] = ISO
    return {"type": "array", "items": schema}
