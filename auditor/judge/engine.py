"""The caching judge: the plain judge (judge/plain.py) behind caches, with the same findings.

Each rule's results are cached by a digest of the content it reads (the parts of the facts areas its
shape reads, and host/labels/name when it reads those) and fanned out to every host that shares it, so
a fleet pays per distinct configuration, not per host. Building keys must not grow with the rule count:
rules that read the same parts share one key per host; the keys made of areas that repeat across hosts
are remembered by the host's configuration (those areas' whole digests); an area that differs on every
host is digested field by field, so its repeating fields are still known by digest. Filters remember
their verdict per distinct row (judge/row_verdicts.py), and hosts lacking the same areas for the same
reason share one "could not be evaluated" finding. tests/unit/test_judge_equivalence.py holds it to the plain
judge.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from ..contentkey import content_digest
from ..models import Finding
from ..snapshotdoc import Snapshot
from . import fleet
from .functions import OPTIONS
from .plain import FleetRead, Found, PlainJudge, WholeScan, unknown
from .row_verdicts import RowVerdictInterpreter
from .rules import Rule, RuleSet
from .shapes import Shape, projector

_PROBATION = 512  # lookups before a rule (or an area's whole digest) that hardly ever hits stops being cached
_MAX_UNKNOWNS = 4096  # distinct "could not be evaluated" findings shared across hosts
_MAX_DERIVED = 1 << 16  # part digests remembered by their area's whole digest
_MAX_CONFIGS = 1 << 12  # host configurations remembered with their keys
_WHOLE = "*"

Part = tuple[str, str, Any]  # ("area", name, shape) or ("root", name, keys or None)


def _digest(value: Any) -> bytes:
    """Digest of parsed-JSON content (contentkey); what marshal cannot write digests as canonical JSON."""
    digest = content_digest(value)
    if digest is None:
        data = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
        digest = hashlib.blake2b(data, digest_size=16).digest()
    return digest


def _parts(rule: Rule) -> tuple[Part, ...]:
    """What a rule's cache key is made of: the parts of the snapshot it reads."""
    if _WHOLE in rule.roots:
        return (("root", _WHOLE, None),)
    areas = tuple(("area", a, shape) for a, shape in rule.shapes)
    return areas + tuple(("root", r, rule.root_keys.get(r)) for r in sorted(rule.roots))


class _Scope:
    """An area, or one field of an area: whether its whole value repeats across hosts, so that what a
    shape reads of it is worth remembering by the whole value's digest."""

    __slots__ = ("hits", "lookups", "path", "repeats")

    def __init__(self, path: tuple[str, ...]):
        self.path = path
        self.lookups = self.hits = 0
        self.repeats = True

    def note(self, hit: bool) -> bool:
        """Count a lookup; True when this one shows the scope differs on nearly every host."""
        self.lookups += 1
        self.hits += hit
        if self.lookups >= _PROBATION and self.hits * 8 < self.lookups:
            self.repeats = False  # its whole digest costs more than it saves
            return True
        return False


@dataclass(frozen=True, slots=True)
class _Cut:
    """What one shape reads of one scope; an object shape over an area is also cut field by field, so the
    fields that repeat are digested once per distinct value even when the area as a whole never repeats."""

    scope: int
    shape: Shape
    cut: Callable[[Any], Any]
    fields: tuple[int, ...] | None  # the cuts of each field read (an object shape over an area)


class _Keys:
    """Cache keys for one judge: each distinct part and each distinct key numbered once, worked out per
    host only for what that host's rules ask."""

    def __init__(self, rules: list[Rule]):
        part_ids: dict[Part, int] = {}
        key_ids: dict[tuple[int, ...], int] = {}
        self.of_rule: list[int] = []  # rule index → key number
        for rule in rules:
            numbers = tuple(part_ids.setdefault(p, len(part_ids)) for p in _parts(rule))
            self.of_rule.append(key_ids.setdefault(numbers, len(key_ids)))
        self.parts = list(part_ids)
        self.keys = list(key_ids)  # key number → its part numbers
        self.scopes: list[_Scope] = []
        self.cuts: list[_Cut] = []
        self._scope_ids: dict[tuple[str, ...], int] = {}
        self._cut_ids: dict[tuple[int, Shape], int] = {}
        self.part_cut = [self._cut((p[1],), p[2]) if p[0] == "area" else -1 for p in self.parts]
        self.derived: dict[tuple[bytes, int], Hashable] = {}  # (scope's whole digest, cut) → the cut's digest
        # a host's configuration (the whole digests of the areas that repeat) → the keys made of those areas
        self.configs: dict[tuple[bytes, ...], list[tuple[Hashable, ...] | None]] = {}
        self._plan: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def plan(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The area scopes that repeat across hosts, and the keys made only of parts of them."""
        if self._plan is None:
            scopes = tuple(i for i, sc in enumerate(self.scopes) if len(sc.path) == 1 and sc.repeats)
            inside = set(scopes)
            stable = tuple(n for n, parts in enumerate(self.keys) if all(
                self.parts[p][0] == "area" and self.cuts[self.part_cut[p]].scope in inside for p in parts))
            self._plan = (scopes, stable)
        return self._plan

    def replan(self) -> None:
        """A scope stopped repeating: configurations are made of fewer areas from now on."""
        self._plan = None
        self.configs.clear()

    def _cut(self, path: tuple[str, ...], shape: Shape) -> int:
        scope = self._scope_ids.setdefault(path, len(self._scope_ids))
        if scope == len(self.scopes):
            self.scopes.append(_Scope(path))
        got = self._cut_ids.get((scope, shape))
        if got is None:
            fields = None
            if len(path) == 1 and shape is not None and shape[0] == "obj":
                fields = tuple(self._cut((*path, name), sub) for name, sub in shape[1])
            got = self._cut_ids[(scope, shape)] = len(self.cuts)
            self.cuts.append(_Cut(scope, shape, projector(shape), fields))
        return got

    def for_host(self, snapshot: Snapshot) -> _HostKeys:
        return _HostKeys(self, snapshot)


class _HostKeys:
    """One host's keys, each made once however many rules share it."""

    def __init__(self, keys: _Keys, snapshot: Snapshot):
        self.keys = keys
        self.snapshot = snapshot
        self.facts: Mapping[str, Any] = snapshot.get("facts") or {}
        self.made: list[tuple[Hashable, ...] | None] | None = None  # by key number, once configured
        self.parts: list[Hashable] = [None] * len(keys.parts)
        self.cuts: list[Hashable] = [None] * len(keys.cuts)
        self.wholes: dict[int, bytes] = {}

    def key(self, index: int) -> tuple[Hashable, ...]:
        """The cache key of rule `index` on this host."""
        made = self.made if self.made is not None else self._configure()
        number = self.keys.of_rule[index]
        got = made[number]
        if got is None:
            got = made[number] = self._make(number)
        return got

    def _make(self, number: int) -> tuple[Hashable, ...]:
        parts = self.parts
        return tuple(parts[p] or self._part(p) for p in self.keys.keys[number])

    def _configure(self) -> list[tuple[Hashable, ...] | None]:
        """The keys made of repeating areas, known from an earlier host of the same configuration (one
        lookup for most of a host's keys) or made now and remembered."""
        keys = self.keys
        plan = keys.plan()
        scopes, stable = plan
        config = tuple(self._whole(s, self._value(s)) for s in scopes)
        known = keys.configs.get(config)
        if known is not None:
            self.made = list(known)
            return self.made
        made: list[tuple[Hashable, ...] | None] = [None] * len(keys.keys)
        self.made = made
        for number in stable:
            made[number] = self._make(number)
        if keys.plan() is plan:  # no scope stopped repeating meanwhile
            if len(keys.configs) >= _MAX_CONFIGS:
                keys.configs.clear()
            keys.configs[config] = list(made)
        return made

    def _part(self, number: int) -> Hashable:
        kind, name, sub = self.keys.parts[number]
        if kind == "area":
            got = self._cut(self.keys.part_cut[number])
        else:
            value: Any = self.snapshot if name == _WHOLE else self.snapshot.get(name)
            if sub and isinstance(value, dict):
                value = {k: value.get(k) for k in sub}
            got = _digest(value)
        self.parts[number] = got
        return got

    def _cut(self, number: int) -> Hashable:
        """The digest of what cut `number` reads: remembered by the digest of its whole scope while that
        repeats across hosts (configuration does), else made from the value (field by field for an object)."""
        got = self.cuts[number]
        if got is not None:
            return got
        keys = self.keys
        cut = keys.cuts[number]
        value = self._value(cut.scope)
        if cut.shape is None:
            got = self._whole(cut.scope, value)
        elif keys.scopes[cut.scope].repeats:
            memo = (self._whole(cut.scope, value), number)
            got = keys.derived.get(memo)
            if keys.scopes[cut.scope].note(got is not None):
                keys.replan()
            if got is None:
                if len(keys.derived) >= _MAX_DERIVED:
                    keys.derived.clear()
                got = keys.derived[memo] = self._fresh(cut, value)
        else:
            got = self._fresh(cut, value)
        self.cuts[number] = got
        return got

    def _fresh(self, cut: _Cut, value: Any) -> Hashable:
        if cut.fields is not None and type(value) is dict:  # as projector's object cut, a digest per field
            return ("obj", bool(value), *(self._cut(f) for f in cut.fields))
        return _digest(cut.cut(value))

    def _value(self, scope: int) -> Any:
        path = self.keys.scopes[scope].path
        value = self.facts.get(path[0])
        if len(path) == 2:
            value = value.get(path[1]) if type(value) is dict else None
        return value

    def _whole(self, scope: int, value: Any) -> bytes:
        got = self.wholes.get(scope)
        if got is None:
            got = self.wholes[scope] = _digest(value)
        return got


class Judge(WholeScan):
    """The judge every run uses: a PlainJudge whose per-host results come from caches (the module
    docstring). A rule whose key misses on nearly every host (it reads per-host counters: restarts) is
    just run once its probation shows it: its cache would grow with the fleet."""

    def __init__(self, ruleset: RuleSet):
        self.plain = PlainJudge(ruleset, RowVerdictInterpreter(OPTIONS))
        self.rules = self.plain.rules
        self._keys = _Keys(self.rules)
        self._caches: list[dict[tuple[Hashable, ...], Found]] = [{} for _ in self.rules]
        self._lookups = [0] * len(self.rules)
        self._hits = [0] * len(self.rules)
        self._cached = [True] * len(self.rules)
        self._unknowns: dict[tuple[Any, ...], Finding | None] = {}

    @property
    def evaluations(self) -> int:
        """Rule runs actually performed (cache misses)."""
        return self.plain.evaluations

    def uncached(self) -> list[str]:
        """The rules that came out of probation as per-host readers: run on every host, nothing cached."""
        return [r.id for r, cached in zip(self.rules, self._cached) if not cached]

    def judge(self, snapshot: Snapshot) -> list[Finding]:
        """All findings (including not-evaluated ones) for one snapshot: the plain judge's."""
        keys = self._keys.for_host(snapshot)

        def results(index: int, rule: Rule, snap: Snapshot) -> Found:
            return self._found(index, rule, snap, keys)

        return self.plain.judge_with(snapshot, results, self._shared_unknown)

    def _found(self, index: int, rule: Rule, snapshot: Snapshot, keys: _HostKeys) -> Found:
        """The rule's results on this snapshot: from its cache by the digest of what it reads, or run."""
        if not self._cached[index]:
            return self.plain.results(index, rule, snapshot)
        cache = self._caches[index]
        key = keys.key(index)
        found = cache.get(key)
        self._lookups[index] += 1
        if found is not None:
            self._hits[index] += 1
            return found
        found = cache[key] = self.plain.results(index, rule, snapshot)
        if self._lookups[index] == _PROBATION and self._hits[index] * 8 < _PROBATION:
            self._cached[index] = False  # a per-host reader: run it from now on, its cache let go
            cache.clear()
        return found

    def _shared_unknown(self, index: int, rule: Rule, snapshot: Snapshot, absent: set[str]) -> Finding | None:
        """The plain judge's not-evaluated finding, one per distinct reason: hosts lacking the same areas with
        the same collector errors share its title and evidence (each host's finding is a copy naming it)."""
        missing = rule.areas & absent
        if not missing:
            return None
        errors = snapshot.get("errors") or {}
        failed = missing.intersection((snapshot.get("probe") or {}).get("failed_areas") or ())
        key = (index, frozenset(missing), frozenset(failed),
               tuple((a, errors[a]) for a in sorted(missing) if a in errors))
        try:
            got = self._unknowns.get(key)
        except TypeError:  # an error that is no string (unhashable): not shared
            return unknown(rule, snapshot, absent)
        if got is None:
            if len(self._unknowns) >= _MAX_UNKNOWNS:  # per-host error texts: a bound, not a fleet-sized memo
                self._unknowns.clear()
            got = self._unknowns[key] = unknown(rule, snapshot, absent)
        return got

    def fleet_reads(self, snapshot: Snapshot) -> tuple[FleetRead, ...]:
        """What the host gives each fleet rule (PlainJudge.fleet_reads), not-evaluated findings shared."""
        return self.plain.fleet_reads_with(snapshot, self._shared_unknown)

    def fleet_findings(self, hosts: list[tuple[fleet.FleetSlice, tuple[FleetRead, ...]]]) -> list[Finding]:
        """The fleet rules' findings from each host's reads: nothing to cache, the plain judge's."""
        return self.plain.fleet_findings(hosts)
