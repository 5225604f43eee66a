"""The golden baseline: a readable, hand-editable YAML file of expected facts, loaded strictly.

```yaml
baseline: ami-auditor/baseline/1
source: {host: golden, target: ssh://root@10.0.1.10, captured_at: '2026-…Z', ami_id: ami-0…, tool_version: 0.1.0}
complete: [facts.systemd.unit_files, facts.binaries, facts.packages.items, facts.kernel.sysctls]
ignore: ['facts.packages.items[linux-image-*]']
expect:
  facts.systemd.unit_files[ecs.service].state: disabled
  facts.binaries[kubelet].sha256: 5f79ca1f…
  facts.binaries[kubelet].version: {pattern: 'Kubernetes v1\\.29\\.\\d+-eks-.*'}
  facts.kernel.thp_enabled: [madvise, never]
```
Every problem is an InputError naming the file and line (exit 2). The shape is declared in
schemas/baseline.schema.json (checked first); the code checks fact paths, volatility, value types, patterns.

Patterns are compiled with RE2 (google-re2), which matches in time linear in the input: a hostile pattern
such as `(a|aa)+` cannot backtrack exponentially on a host's value. RE2 lacks backreferences and
look-around; a pattern using them is refused at load (file:line). `\\d`, `\\w`, `\\s` are ASCII-only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]

from ..collect.facthints import unknown_fact_path
from ..errors import InputError
from ..factpath import area_of
from ..inputschema import Form, check, json_view
from ..yamlload import LineDict, LineList, as_text, load_yaml_file
from .normalize import leaf_spec

BASELINE_SCHEMA = "ami-auditor/baseline/1"
BASELINE_FORM = Form("baseline", "the baseline", {"expect": ("fact", None)})  # an expect entry: by its path


@dataclass(frozen=True)
class Expect:
    """What a host may have at one path: one value, any of several, or a full-match pattern."""

    path: str
    values: tuple[Any, ...] = ()
    pattern: Any = None  # a compiled RE2 pattern (linear-time matching)
    line: int | None = None

    def matches(self, actual: Any) -> bool:
        if self.pattern is not None:
            return isinstance(actual, (str, int, float)) and not isinstance(actual, bool) \
                and self.pattern.fullmatch(str(actual)) is not None
        return any(_same(actual, v) for v in self.values)

    def shown(self) -> Any:
        """The expectation as reported: the value, the list of allowed values, or {pattern: …}."""
        if self.pattern is not None:
            return {"pattern": self.pattern.pattern}
        return self.values[0] if len(self.values) == 1 else list(self.values)


@dataclass(frozen=True)
class Baseline:
    """A loaded baseline: where it came from, what is expected, which collections are listed in full."""

    path: str
    source: dict[str, Any]
    expect: dict[str, Expect]
    complete: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    areas: frozenset[str] = field(default=frozenset())

    def ignored(self, path: str) -> bool:
        """Whether an `ignore` glob matches: `*` and `?` are wildcards, brackets are literal (path syntax)."""
        return any(_glob(glob).fullmatch(path) for glob in self.ignore)

    def summary(self) -> dict[str, Any]:
        """The report's `baseline` section."""
        return {
            "path": self.path,
            "source_host": self.source.get("host"),
            "captured_at": self.source.get("captured_at"),
            "ami_id": self.source.get("ami_id"),
            "facts": len(self.expect),
            "complete": list(self.complete),
        }


@lru_cache(maxsize=256)
def _glob(glob: str) -> re.Pattern[str]:
    """A glob also covers everything below what it names (a row's fields)."""
    return re.compile(re.escape(glob).replace(r"\*", ".*").replace(r"\?", ".") + r"(?:[.\[].*)?")


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # the error is reported as InputError, not logged to stderr by RE2
    return options


_RE2_OPTIONS = _re2_options()


def compile_pattern(pattern: str, where: str, file: str, line: int | None) -> Any:
    """An RE2 pattern for {pattern: REGEX}; syntax errors and syntax RE2 lacks are InputError(file, line)."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        hint = ""
        if "invalid escape sequence: \\" in reason and reason.rstrip()[-1:].isdigit() or "perl operator" in reason:
            hint = " (RE2 syntax: backreferences and look-around are not supported)"
        raise InputError(f"{where}: bad pattern {pattern!r}: {reason}{hint}", file, line) from None


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same kind: 1 == 1.0 for numbers, but "1" != 1 and True != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _coerce(value: Any, kind: str, where: str, file: str, line: int | None) -> Any:
    """Match YAML's scalar typing to the fact's declared type (unquoted 60 for a string fact is "60")."""
    if value is None:
        raise InputError(f"{where}: null is not an expected value (delete the line instead)", file, line)
    if kind == "string":
        if isinstance(value, bool):
            raise InputError(f"{where}: {value!r} is a YAML boolean but this fact is a string; quote it", file, line)
        return value if isinstance(value, str) else str(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise InputError(f"{where}: expected true or false, got {value!r}", file, line)
        return value
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{where}: expected a number, got {value!r}", file, line)
        return int(value) if kind == "integer" and float(value).is_integer() else value
    raise InputError(f"{where}: facts of type {kind} cannot be baselined", file, line)


def _expect(path: str, expect: LineDict, file: str, line: int | None) -> Expect:
    """One `expect` entry (its shape checked by the schema): a known, stable fact; values of its type."""
    raw = expect[path]
    resolved = leaf_spec(path)
    if resolved is None:
        raise InputError(unknown_fact_path(path), file, line)
    spec, kind = resolved
    if spec.volatile:
        raise InputError(f"{path} is volatile (it changes on its own) and cannot be baselined", file, line)
    if isinstance(raw, LineDict):
        return Expect(path, pattern=compile_pattern(raw["pattern"], path, file, line), line=line)
    if isinstance(raw, LineList):
        return Expect(path, tuple(_coerce(_text(raw, i, kind, path, file), kind, path, file, raw.line_of(i))
                                  for i in range(len(raw))), line=line)
    return Expect(path, (_coerce(_text(expect, path, kind, path, file), kind, path, file, line),), line=line)


def _text(node: Any, key: Any, kind: str, path: str, file: str) -> Any:
    """node[key]; for a string fact, a number only as it was written (`0.270` is not "0.27": quote it)."""
    value = node[key]
    if kind != "string" or isinstance(value, bool) or value is None:
        return value
    return as_text(node, key, file, path)


def _complete(doc: LineDict, file: str) -> tuple[str, ...]:
    from .normalize import collection_spec

    raw = doc.get("complete") or LineList()
    for i, item in enumerate(raw):
        if collection_spec(item) is None:
            raise InputError(f"`complete`: {item!r} is not a keyed list, set or map of the fact schema", file,
                             raw.line_of(i))
    return tuple(raw)


def parse_baseline(doc: Any, file: str) -> Baseline:
    """Validate a parsed baseline document (from load_yaml_*)."""
    if doc is None:
        raise InputError("empty baseline file", file, 1)
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if isinstance(schema, str) and schema.startswith(("ami-auditor/report/", "ami-auditor/snapshot/")):
        what = "report" if schema.startswith("ami-auditor/report/") else "snapshot"
        raise InputError(f"this is a {what} ({schema}), not a baseline: make one with `ami-auditor baseline capture "
                         f"TARGET -o baseline.yaml` (or `--snapshot SNAPSHOT.json`)", file, 1)
    check(doc, BASELINE_FORM, file)  # the declared format first: keys, version, value shapes
    expect = {}
    for path in doc["expect"]:
        line = doc["expect"].line_of(path)
        if not isinstance(path, str):
            raise InputError(f"fact path must be a string, got {path!r}", file, line)
        expect[path] = _expect(path, doc["expect"], file, line)
    ignore = tuple(doc.get("ignore") or ())
    complete = _complete(doc, file)
    areas = frozenset(area_of(p) for p in [*expect, *complete])
    source = {k: json_view(v) for k, v in (doc.get("source") or {}).items() if v is not None}
    return Baseline(file, source, expect, complete, ignore, areas)


def load_baseline(path: str) -> Baseline:
    """Read and validate a baseline file; InputError(file, line) on any problem."""
    return parse_baseline(load_yaml_file(path), str(path))
