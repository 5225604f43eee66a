"""Incident chains: rules declare what they lead to (`leads_to`); per host, the findings that form a chain.

The declared graph (validated acyclic when the rules load) says e.g. crash loop → dying memcgs → hot
core → ENA resets. On one host, two findings are linked when the first's rule leads to the second's,
directly or through rules that did not fire there: then the link is a gap, the chain is *partial* and
the missing rules are named — a middle link is never invented. A chain is told in one line from each
finding's `link` text (its title when the rule has none), upstream first.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..chaingraph import Graph, positions
from ..contentkey import Shared
from ..models import Finding, severity_rank

ARROW = " → "
LINK_TEXTS = 3  # findings of one rule told per link; the rest counted


def not_evaluated(finding: Finding) -> bool:
    """A "could not be evaluated" placeholder (an area not collected, an error), not a real finding."""
    return (finding.evidence.get("status") in ("unknown", "error")
            and finding.title.startswith(f"{finding.rule} could not be evaluated"))


def _reach(graph: Graph, start: str, fired: set[str]) -> dict[str, list[str]]:
    """Fired rules reachable from `start` along `leads_to` without passing another fired rule, each with the
    unfired rules on the shortest way there (empty: a direct link)."""
    found: dict[str, list[str]] = {}
    queue: deque[tuple[str, list[str]]] = deque((n, []) for n in graph.get(start, ()))
    seen: set[str] = set()
    while queue:
        rule, via = queue.popleft()
        if rule in seen:
            continue
        seen.add(rule)
        if rule in fired:
            found.setdefault(rule, via)
            continue
        queue.extend((n, [*via, rule]) for n in graph.get(rule, ()))
    return found


def _reduce(edges: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """Drop a link a → c when c is also reached through another finding b (a → b → … → c): the chain
    then reads through b instead of skipping it."""
    nxt: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        nxt[a].add(b)

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            r = todo.pop()
            for n in nxt[r] - seen:
                seen.add(n)
                todo.append(n)
        return seen

    return {(a, c): via for (a, c), via in edges.items()
            if not any(c in reachable(b) for b in nxt[a] if b != c)}


def _link_text(findings: list[Finding]) -> str:
    if len(findings) == 1:
        return findings[0].link or findings[0].title
    texts = list(dict.fromkeys(f.link or f.title for f in findings))
    more = len(texts) - LINK_TEXTS
    return ", ".join(texts[:LINK_TEXTS]) + (f" (+{more} more)" if more > 0 else "")


@dataclass(frozen=True)
class _Shape:
    """How one set of fired rules forms a chain: its rules upstream first, the steps of its line (each a
    `[missing: …]` marker or the rules told side by side) and its gaps. Depends only on which rules fired,
    so hosts that fired the same rules share it; only the texts differ."""

    rules: tuple[str, ...]
    steps: tuple[str | tuple[str, ...], ...]
    gaps: tuple[tuple[str, str, tuple[str, ...]], ...]


def host_chains(findings: Iterable[Finding], graph: Graph) -> list[dict[str, Any]]:
    """Per host, each group of findings linked by `leads_to` (two or more rules), upstream first."""
    pos = positions(graph)
    order = {rule: i for i, rule in enumerate(graph)}
    by_host: dict[str, dict[str, list[Finding]]] = defaultdict(lambda: defaultdict(list))
    for f in findings:
        if f.rule in pos and not f.waived and not not_evaluated(f):
            by_host[f.host][f.rule].append(f)
    shapes: dict[frozenset[str], tuple[_Shape, ...]] = {}
    shared = Shared()  # hosts whose chains read the same share their text, links and gaps
    out: list[dict[str, Any]] = []
    for host in sorted(by_host):
        fired = by_host[host]
        key = frozenset(fired)
        if key not in shapes:
            shapes[key] = _shapes(key, graph, pos, order)
        for shape in shapes[key]:
            chain = _tell(host, shape, fired, pos)
            shared.fields(chain, ("text", "links", "gaps"))
            out.append(chain)
    return out


def _shapes(fired: frozenset[str], graph: Graph, pos: dict[str, int], order: dict[str, int]) -> tuple[_Shape, ...]:
    edges = _reduce({(a, b): via for a in sorted(fired) for b, via in _reach(graph, a, set(fired)).items()})
    neighbours: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        neighbours[a].add(b)
        neighbours[b].add(a)
    shapes, done = [], set()
    for start in sorted(neighbours, key=lambda r: (pos[r], order.get(r, 0), r)):
        if start in done:
            continue
        component, todo = set(), [start]
        while todo:
            r = todo.pop()
            if r not in component:
                component.add(r)
                todo.extend(neighbours[r] - component)
        done |= component
        shapes.append(_shape(component, edges, pos, order))
    return tuple(shapes)


def _shape(rules: set[str], edges: dict[tuple[str, str], list[str]], pos: dict[str, int],
           order: dict[str, int]) -> _Shape:
    mine = {e: via for e, via in edges.items() if e[0] in rules}
    layer: dict[str, int] = {}
    for rule in sorted(rules, key=lambda r: pos[r]):  # longest path inside the host's chain (edges go downstream)
        layer[rule] = max((layer[a] + 1 for (a, b) in mine if b == rule and a in layer), default=0)
    ranked = tuple(sorted(rules, key=lambda r: (layer[r], pos[r], order.get(r, 0), r)))
    steps: list[str | tuple[str, ...]] = []
    for depth in range(max(layer.values()) + 1):
        incoming = [via for (a, b), via in mine.items() if layer[b] == depth]
        if incoming and all(incoming):  # every way into this step skips a link that did not fire
            missing = sorted({m for via in incoming for m in via}, key=lambda r: (pos[r], r))
            steps.append(f"[missing: {', '.join(missing)}]")
        steps.append(tuple(r for r in ranked if layer[r] == depth))
    gaps = tuple((a, b, tuple(via)) for (a, b), via in sorted(mine.items()) if via)
    return _Shape(ranked, tuple(steps), gaps)


def _worst(findings: list[Finding]) -> str:
    return findings[0].severity if len(findings) == 1 else max((f.severity for f in findings), key=severity_rank)


def _tell(host: str, shape: _Shape, fired: dict[str, list[Finding]], pos: dict[str, int]) -> dict[str, Any]:
    texts = {r: _link_text(fired[r]) for r in shape.rules}
    links = [{"rule": r, "severity": _worst(fired[r]),
              "items": sorted({f.item for f in fired[r] if f.item is not None}), "position": pos[r],
              "text": texts[r]} for r in shape.rules]
    line = ARROW.join(step if isinstance(step, str) else " + ".join(texts[r] for r in step) for step in shape.steps)
    return {"host": host, "text": line, "partial": bool(shape.gaps), "links": links,
            "gaps": [{"from": a, "to": b, "missing": list(via)} for a, b, via in shape.gaps]}
