"""The incident-chain graph rules declare with `leads_to`: rule id → the rule ids it leads to.

Shared by the judge (chains per host, chain positions) and compare (facts upstream of a symptom); the
graph is checked acyclic when the rules load (judge/rules.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

Graph = Mapping[str, Sequence[str]]  # rule id → rule ids it leads to, in declaration order


def _parents(graph: Graph) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = defaultdict(list)
    for rule, nxt in graph.items():
        for n in nxt:
            parents[n].append(rule)
    return parents


def positions(graph: Graph) -> dict[str, int]:
    """Chain position of every rule with a `leads_to` edge in or out: the longest path from a chain start
    (0 = a cause nothing declared leads to). Rules in no chain are absent."""
    members = {r for r, nxt in graph.items() if nxt} | {n for nxt in graph.values() for n in nxt}
    parents = _parents(graph)
    depth: dict[str, int] = {}
    for rule in sorted(members):
        stack = [rule]
        while stack:  # iterative longest-path over an acyclic graph
            top = stack[-1]
            pending = [p for p in parents[top] if p not in depth]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            depth[top] = max((depth[p] + 1 for p in parents[top]), default=0)
    return depth


def upstream(graph: Graph, rule: str) -> set[str]:
    """Every rule from which `leads_to` edges reach `rule` (not `rule` itself)."""
    parents = _parents(graph)
    seen: set[str] = set()
    todo = list(parents[rule])
    while todo:
        r = todo.pop()
        if r not in seen:
            seen.add(r)
            todo.extend(parents[r])
    return seen - {rule}
