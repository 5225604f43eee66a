"""One type for a fact's address, parsed once, in the three dialects the auditor writes paths in.

- **row** paths name one fact of one host (normalized snapshots, drift, comparison, baselines):
  `facts.systemd.units[ecs.service].active_state`, `facts.kernel.sysctls[vm.swappiness]`,
  `facts.network.interfaces[eth0].stats[tx_timeout]`, `facts.kernel.release`. A row key is host data: it
  may hold dots and `[`, never `]`.
- **schema** paths name a declared fact (facts.yaml): `facts.systemd.units[].restarts`; `[]` is any row.
- **read** paths are what a rule's JMESPath reads (judge/paths.py): schema paths whose free map entries
  follow a dot, `facts.kernel.sysctls.vm.swappiness`, `labels.az`.

All three share one grammar — names joined by dots, a selector `[key]` after a name — so one `parse`
serves them; `format` writes a path back, `parse(p).format() == p`. A row path splits at its last
selector into (collection, key, field); a path without one is a plain fact. Judge and compare both
import this module; it imports nothing of the auditor, so the one-way rule holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# The last selector of a path and what follows it: a field without a further selector, or nothing.
_ROW = re.compile(r"^(?P<coll>.*?)\[(?P<key>[^\]]*)\](?:\.(?P<field>[^\[]+))?\Z")
# root and the name after it (the area of a `facts.` path), each ending at a dot or a selector
_HEAD = re.compile(r"(?P<root>[^.\[]*)[^.]*(?:\.(?P<area>[^.\[]*))?")
# the strict tokens of a hand-written path (baselines): `.name` or `[key]`, keys without brackets
_TOKEN = re.compile(r"\.([A-Za-z0-9_]+)|\[([^\]\[]+)\]")
# the lenient steps of a path a user names on the command line (history): `name`, `.name` or `[key]`
_STEP = re.compile(r"\.?([^.\[\]]+)|\[([^\]]*)\]")

Token = tuple[str | None, str | None]  # (field name, None) or (None, row key)
Step = tuple[str, bool]  # (name, rows): `units[]` → ("units", True)


@dataclass(frozen=True, slots=True)
class FactPath:
    """A parsed path: `collection[key].field` for a row path; for a plain fact, collection and key are
    None and `field` is the whole path. `key == ""` in a schema path is the schema's any row (`[]`)."""

    collection: str | None
    key: str | None
    field: str

    @property
    def head(self) -> str:
        """The path down to the row selector (the collection), or the whole path of a plain fact."""
        return self.field if self.collection is None else self.collection

    @property
    def root(self) -> str:
        """The snapshot's top-level key the path starts at: `facts`, `host`, `labels`…"""
        return _head(self.format())[0]

    @property
    def area(self) -> str:
        """The name after the root: the facts area of a `facts.` path (`systemd`), else the root's key."""
        return _head(self.format())[1]

    @property
    def is_row(self) -> bool:
        return self.collection is not None

    def format(self) -> str:
        """The path as text, in the dialect it was parsed from."""
        if self.collection is None:
            return self.field
        return f"{self.collection}[{self.key}].{self.field}" if self.field else f"{self.collection}[{self.key}]"

    __str__ = format

    def steps(self) -> tuple[Step, ...]:
        """The dotted steps of a schema or read path (`facts.binaries[].found` → facts, binaries rows,
        found). Such paths hold no row keys, so a dot always separates two steps; not for row paths."""
        return tuple((s.removesuffix("[]"), s.endswith("[]")) for s in self.format().split("."))

    def tokens(self) -> tuple[Token, ...] | None:
        """The strict tokens after the root of a hand-written row path (`facts.binaries[kubelet].sha256` →
        binaries, [kubelet], sha256), or None when it is not one: names are word characters, a key is
        non-empty and holds no bracket."""
        text = self.format()
        root = self.root
        if not text.startswith(root + "."):
            return None
        rest, pos, out = text[len(root):], 0, []
        while pos < len(rest):
            m = _TOKEN.match(rest, pos)
            if not m:
                return None
            out.append((m[1], m[2]))
            pos = m.end()
        return tuple(out)


def selector_steps(text: str) -> list[Step]:
    """(name or key, is_selector) for every step of a row path (`facts.systemd.units[ecs.service].restarts` →
    facts, systemd, units, [ecs.service], restarts); ValueError(position) where the text is no path."""
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(pos)
        steps.append((m[1], False) if m[1] is not None else (m[2], True))
        pos = m.end()
    return steps


@lru_cache(maxsize=65536)
def _head(text: str) -> tuple[str, str]:
    m = _HEAD.match(text)
    assert m is not None  # every part of the pattern is optional
    return m["root"], m["area"] or ""


@lru_cache(maxsize=65536)
def parse(text: str) -> FactPath:
    """A row, schema or read path → its FactPath; text that is no row path is a plain fact."""
    m = _ROW.match(text)
    if not m:
        return FactPath(None, None, text)
    return FactPath(m["coll"], m["key"], m["field"] or "")


def row(collection: str, key: str, field: str = "") -> FactPath:
    """The path of row `key` of `collection` (or of its `field`)."""
    return FactPath(collection, key, field)


@lru_cache(maxsize=65536)
def area_of(path: str) -> str:
    """`facts.systemd.units[x].name` → `systemd`: the facts area a path belongs to (memoized: drift asks it
    of every path of every distinct view)."""
    return _head(path)[1]
