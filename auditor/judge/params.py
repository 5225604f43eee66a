"""Rule-pack parameters (thresholds, allowlists): `${name}` in expressions, overrides from --set or a config file."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..yamlload import LineDict, load_yaml_file, load_yaml_text

PARAM_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Override:
    """`pack.name = value`, and where it was given (for error messages)."""

    pack: str
    name: str
    value: Any
    source: str
    line: int | None = None


def parse_set(text: str) -> Override:
    """`--set PACK.NAME=VALUE`; VALUE is YAML (`500`, `[a, b]`, `{vm.swappiness: "10"}`)."""
    key, sep, raw = text.partition("=")
    pack, dot, name = key.strip().partition(".")
    if not sep or not dot or not pack or not name:
        raise InputError(f"--set {text!r}: expected PACK.PARAM=VALUE (e.g. cgroups.dying_warn=500)")
    try:
        value = load_yaml_text(raw) if raw.strip() else ""
    except InputError as exc:  # bounded like files: no alias bombs, bad dates, huge ints, deep nesting
        shown = text if len(text) <= 80 else text[:60] + f"… ({len(text)} characters)"
        raise InputError(f"--set {shown!r}: value is not valid YAML: {exc.message}") from None
    return Override(pack, name, plain(value), "--set")


def load_config(path: str) -> list[Override]:
    """A rules config file: `{pack: {param: value}}`."""
    doc = load_yaml_file(path)
    if doc is None:
        return []
    if not isinstance(doc, LineDict):
        raise InputError("rules config must be a mapping of pack → {param: value}", path, getattr(doc, "line", 1))
    out: list[Override] = []
    for pack, params in doc.items():
        if not isinstance(params, LineDict):
            raise InputError(f"{pack}: expected a mapping of param: value", path, doc.line_of(pack))
        out.extend(Override(str(pack), str(k), v, path, params.line_of(k)) for k, v in params.items())
    return out


def coerce(default: Any, value: Any, what: str, source: str, line: int | None) -> Any:
    """Check an override has the default's type (ints are fine for numbers; scalars for strings)."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(default, str):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        ok = isinstance(value, str)
    elif isinstance(default, list):
        ok = isinstance(value, list)
    elif isinstance(default, dict):
        ok = isinstance(value, dict)
        if ok:
            value = {str(k): v if isinstance(v, str) else json.dumps(v, default=str) for k, v in value.items()}
    else:
        ok = True
    if not ok:
        raise InputError(f"{what}: expected a {type(default).__name__} like the default {default!r}, "
                         f"got {value!r}", source if source != "--set" else None, line)
    return value


def literal(value: Any) -> str:
    """A JMESPath literal for a parameter value (JSON in backticks; backticks escaped)."""
    return "`" + json.dumps(value, default=str).replace("`", "\\`") + "`"  # a YAML date is its ISO text


def substitute(expr: str, params: dict[str, Any]) -> str:
    """Replace `${name}` with the parameter's literal; an unknown name raises KeyError(name)."""
    return PARAM_REF.sub(lambda m: literal(params[m.group(1)]), expr)


def plain(value: Any) -> Any:
    """LineDict/LineList → dict/list (parameters end up in JSON literals and templates)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
