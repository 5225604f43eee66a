"""Host vs baseline (and any two views): deepdiff over normalized views nested by row, so reorder is no drift."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deepdiff import DeepDiff

from ..factpath import area_of, parse, row
from ..models import DriftItem, severity_rank
from .baseline import Baseline
from .capture import select
from .index import FleetIndex
from .normalize import NormalView
from .severity import drift_severity


@dataclass(frozen=True)
class Difference:
    """One difference between an expected and an actual view (host-independent)."""

    path: str
    kind: str  # added | removed | changed | unknown
    expected: Any
    actual: Any
    severity: str


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """{path: v} → {plain path: v, collection: {row key: {field: v}}} (field "" = the row's own value)."""
    out: dict[str, Any] = {}
    for path, value in flat.items():
        fp = parse(path)
        if fp.collection is None:
            out[path] = value
        else:
            out.setdefault(fp.collection, {}).setdefault(fp.key, {})[fp.field] = value
    return out


def _plain(value: Any) -> Any:
    """A nested row or value as reported: {"": v} rows become v; tuples become lists."""
    if isinstance(value, dict):
        if set(value) == {""}:
            return _plain(value[""])
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return list(value)
    return value


def _flat_path(keys: list[Any]) -> str:
    if len(keys) == 1:
        return str(keys[0])
    return row(str(keys[0]), str(keys[1]), str(keys[2]) if len(keys) > 2 else "").format()


def _expand(keys: list[Any], value: Any) -> list[tuple[str, Any]]:
    """A whole collection added/removed at depth 1 becomes one entry per row."""
    if len(keys) == 1 and isinstance(value, dict) and parse(f"{keys[0]}[x]").is_row \
            and all(isinstance(v, dict) for v in value.values()):
        return [(row(str(keys[0]), str(k)).format(), v) for k, v in value.items()]
    return [(_flat_path(keys), value)]


def _same(a: Any, b: Any) -> bool:
    """True when deepdiff would find nothing between `a` and `b`: equal and of the same types all the way
    down (1, 1.0 and True are equal in Python but a type change to deepdiff); anything unsure is False."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return len(a) == len(b) and all(type(k) is str and k in b and _same(v, b[k]) for k, v in a.items())
    if kind is list or kind is tuple:
        return len(a) == len(b) and all(map(_same, a, b))
    if kind is str or kind is int or kind is float or kind is bool:
        return bool(a == b)
    return False


def _prune(t1: dict[str, Any], t2: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both nested views without what is the same on both sides, which deepdiff would walk to report nothing.

    A plain path or a whole collection the same on both sides goes from both; in a collection on both
    sides, rows the same on both sides go from both and the collection stays (possibly empty), so what
    is added, removed or changed is reported at the same depth as without pruning.
    """
    same = {key for key, v1 in t1.items() if key in t2 and _same(v1, t2[key])}
    return _pruned(t1, t2, same), _pruned(t2, t1, same)


def _pruned(mine: dict[str, Any], other: dict[str, Any], same: set[str]) -> dict[str, Any]:
    """`mine` in its own order without the keys in `same`, and in a collection on both sides without the
    rows the same on both sides."""
    out: dict[str, Any] = {}
    for key, value in mine.items():
        if key in same:
            continue
        there = other.get(key, _MISSING)
        if type(value) is dict and type(there) is dict:
            value = {k: v for k, v in value.items() if not (k in there and _same(v, there[k]))}
        out[key] = value
    return out


def diff_flat(expected: dict[str, Any], actual: dict[str, Any]) -> list[Difference]:
    """Every difference between two flat views, rows added/removed whole, via deepdiff."""
    t1, t2 = _prune(nest(expected), nest(actual))
    tree = DeepDiff(t1, t2, view="tree", verbose_level=2, threshold_to_diff_deeper=0)
    out: list[Difference] = []
    for report_type, items in tree.items():
        for item in items:
            keys = item.path(output_format="list")
            if report_type in ("dictionary_item_added", "dictionary_item_removed"):
                added = report_type == "dictionary_item_added"
                for path, value in _expand(keys, item.t2 if added else item.t1):
                    kind = "added" if added else "removed"
                    exp, act = (None, _plain(value)) if added else (_plain(value), None)
                    out.append(Difference(path, kind, exp, act, drift_severity(path, kind, exp, act)))
            else:  # values_changed, type_changes, and changes inside list values
                plain = str(keys[0])
                path = plain if plain in expected or plain in actual else _flat_path(keys[:3])
                exp, act = expected.get(path), actual.get(path)
                out.append(Difference(path, "changed", _plain(exp), _plain(act),
                                      drift_severity(path, "changed", exp, act)))
    return _sorted(_unique(out))


def _unique(items: list[Difference]) -> list[Difference]:
    seen: set[tuple[str, str]] = set()
    out = []
    for d in items:
        if (d.path, d.kind) not in seen:
            seen.add((d.path, d.kind))
            out.append(d)
    return out


def _sorted(items: list[Difference]) -> list[Difference]:
    return sorted(items, key=lambda d: (-severity_rank(d.severity), d.path))


def drift_view(baseline: Baseline, view: NormalView) -> list[Difference]:
    """What differs between a host's normalized view and the baseline.

    Only facts the baseline lists are checked (a deleted line is not checked); in `complete`
    collections, host rows the baseline does not list are `added`. An area whose collector failed on
    the host is one `unknown` item, never a pass; an area not applicable to it (an image's runtime
    facts) is not checked.
    """
    out = [Difference(f"facts.{area}", "unknown", f"{sum(area_of(p) == area for p in baseline.expect)} baseline facts",
                      None, "medium") for area in sorted(baseline.areas & view.unknown)]
    expected: dict[str, Any] = {}
    actual: dict[str, Any] = {}
    listed: dict[str, set[str]] = {}
    for path, exp in baseline.expect.items():
        if area_of(path) in view.unknown or area_of(path) in view.not_applicable or baseline.ignored(path):
            continue
        fp = parse(path)
        if fp.collection is not None and fp.key is not None:
            listed.setdefault(fp.collection, set()).add(fp.key)
        have = view.flat.get(path, _MISSING)
        if have is not _MISSING:
            actual[path] = have
        expected[path] = have if have is not _MISSING and exp.matches(have) else exp.shown()
    if baseline.complete:
        chosen = select(view.flat)
        for path, value in chosen.items():
            fp = parse(path)
            if fp.collection in baseline.complete and fp.key not in listed.get(fp.collection or "", ()) \
                    and area_of(path) not in view.unknown | view.not_applicable and not baseline.ignored(path):
                actual[path] = value
    out.extend(_as_expected(baseline, diff_flat(expected, actual)))
    return _sorted(out)


def _as_expected(baseline: Baseline, items: list[Difference]) -> list[Difference]:
    """Show the baseline's own spelling of a failed expectation (allowed list, pattern)."""
    out = []
    for d in items:
        exp = baseline.expect.get(d.path)
        if exp is not None and d.kind == "changed":
            d = Difference(d.path, d.kind, exp.shown(), d.actual,
                           drift_severity(d.path, d.kind, exp.shown(), d.actual))
        out.append(d)
    return out


_MISSING = object()


def diff_views(a: NormalView, b: NormalView) -> list[Difference]:
    """Everything that differs from view `a` to view `b`; an area unknown on either side is one item, an
    area not applicable to either side (an image's runtime facts) is left out: it is not a difference."""
    skip = a.not_applicable | b.not_applicable
    unknown = (a.unknown | b.unknown) - skip
    out = [Difference(f"facts.{area}", "unknown", "unknown" if area in a.unknown else "known",
                      "unknown" if area in b.unknown else "known", "medium") for area in sorted(unknown)]
    keep_a = {p: v for p, v in a.flat.items() if area_of(p) not in unknown | skip}
    keep_b = {p: v for p, v in b.flat.items() if area_of(p) not in unknown | skip}
    return _sorted(out + diff_flat(keep_a, keep_b))


def reverse(items: list[Difference]) -> list[Difference]:
    """The same differences seen from the other side (added ↔ removed, expected ↔ actual)."""
    flip = {"added": "removed", "removed": "added"}
    return _sorted([Difference(d.path, flip.get(d.kind, d.kind), d.actual, d.expected,
                               drift_severity(d.path, flip.get(d.kind, d.kind), d.actual, d.expected))
                    for d in items])


def fleet_drift(baseline: Baseline, index: FleetIndex) -> list[DriftItem]:
    """Drift of every host: one diff per distinct configuration, then fanned out to its hosts."""
    items: list[DriftItem] = []
    for config in index.configs:
        diffs = drift_view(baseline, config.view)
        for host in config.hosts:
            items.extend(DriftItem(host, d.path, d.kind, d.expected, d.actual, d.severity) for d in diffs)
    return items
