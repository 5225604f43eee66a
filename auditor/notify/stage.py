"""The notify stage of `scan`: `--notify` targets validated up front, alerts sent after the scan is recorded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..context import Env
from ..errors import InputError
from ..options import NotifyOptions
from ..textsafe import one_line
from .message import new_findings, payload
from .send import Target, deliver, parse_target


@dataclass(frozen=True)
class NotifyPlan:
    targets: tuple[Target, ...]


def prepare(opts: NotifyOptions, store: bool) -> NotifyPlan:
    """Every target parsed and checked before any host is contacted; alerts need the store."""
    targets = tuple(parse_target(t) for t in opts.targets)
    if targets and not store:
        raise InputError("--notify needs the history store to know what is new: drop --no-store")
    return NotifyPlan(targets)


def apply(plan: NotifyPlan, doc: dict[str, Any], env: Env) -> None:
    """Send the new findings to every target; failures are reported, never raised (exit code unchanged)."""
    if not plan.targets:
        return
    found = new_findings(doc)
    if not found:
        env.err("notify: no new findings, nothing sent")
        return
    body = payload(doc, found)
    for target in plan.targets:
        problem = deliver(target, body)
        sent = f"{target.shown}: sent {len(found)} new findings"
        env.err(f"notify: {one_line(problem or sent)}")
