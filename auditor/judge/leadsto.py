"""Incident chains between rules: every `leads_to` names a loaded rule and no chain comes back on itself."""

from __future__ import annotations

from difflib import get_close_matches
from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:
    from .rules import Rule


def check_chains(rules: list[Rule]) -> None:
    """Every `leads_to` names a loaded rule, and following them never comes back (no cycle, no self-loop)."""
    by_id = {r.id: r for r in rules}
    for rule in rules:
        for rid, line in zip(rule.leads_to, rule.leads_to_lines, strict=True):
            if rid not in by_id:
                near = get_close_matches(rid, sorted(by_id), n=3)
                hint = f" (did you mean {', '.join(near)}?)" if near else ""
                raise InputError(f"leads_to: unknown rule {rid!r}{hint}", rule.source, line)
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(rule: Rule, path: list[str]) -> None:
        state[rule.id] = 1
        for rid, line in zip(rule.leads_to, rule.leads_to_lines, strict=True):
            if state.get(rid) == 1:
                cycle = " → ".join([*path[path.index(rid):], rule.id, rid]) if rid in path else f"{rule.id} → {rid}"
                raise InputError(f"leads_to: {rid!r} closes a cycle ({cycle})", rule.source, line)
            if rid not in state:
                visit(by_id[rid], [*path, rule.id])
        state[rule.id] = 2

    for rule in rules:
        if rule.id not in state:
            visit(rule, [])
