"""The notify stage of `scan`: `--notify` targets validated up front, sent after the scan is recorded.

Alerts (`sns:`, `webhook:`) carry the findings first seen in this scan. AWS targets (`securityhub`,
`ssm-compliance`) are kept in step with the report: what changed since the ledger beside the store
last recorded an accepted send (auditor/notify/ledger.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..context import Env
from ..errors import InputError
from ..options import NotifyOptions
from ..textsafe import one_line
from . import ledger, securityhub, ssm_compliance
from .message import new_findings, payload
from .send import Target, deliver, parse_target

# kind → sync(region, report document, ledger) → one line to report
Sync = Callable[[str, Mapping[str, Any], dict[str, dict[str, Any]]], str]


def _securityhub(region: str, doc: Mapping[str, Any], entries: dict[str, dict[str, Any]]) -> str:
    return securityhub.sync(region, doc, entries).text(f"securityhub:{region}")


SYNCS: dict[str, Sync] = {"securityhub": _securityhub, "ssm-compliance": ssm_compliance.sync}


@dataclass(frozen=True)
class NotifyPlan:
    targets: tuple[Target, ...]


def prepare(opts: NotifyOptions, store: bool) -> NotifyPlan:
    """Every target parsed and checked before any host is contacted; alerts need the store."""
    targets = tuple(parse_target(t) for t in opts.targets)
    if targets and not store:
        raise InputError("--notify needs the history store to know what is new: drop --no-store")
    return NotifyPlan(targets)


def _alerts(targets: list[Target], doc: Mapping[str, Any], env: Env) -> None:
    found = new_findings(doc)
    if not found:
        env.err("notify: no new findings, nothing sent")
        return
    body = payload(doc, found)
    for target in targets:
        problem = deliver(target, body)
        sent = f"{target.shown}: sent {len(found)} new findings"
        env.err(f"notify: {one_line(problem or sent)}")


def _syncs(targets: list[Target], doc: Mapping[str, Any], env: Env) -> None:
    path = ledger.path_for(str(doc["history"]["store"]))
    entries, note = ledger.load(path)
    if note:
        env.err(f"notify: {one_line(note)}")
    for target in targets:
        try:
            line = SYNCS[target.kind](target.address, doc, entries)
        except Exception as exc:  # noqa: BLE001 - a failed send is reported, never raised (exit code unchanged)
            line = f"{target.shown}: not sent: {type(exc).__name__}: {exc}"
        env.err(f"notify: {one_line(line)}")
    try:
        ledger.save(path, entries)
    except OSError as exc:
        env.err(f"notify: {one_line(path)}: not saved ({exc}); the next scan sends these again")


def apply(plan: NotifyPlan, doc: Mapping[str, Any], env: Env) -> None:
    """Alerts and AWS syncs; failures are reported, never raised (exit code unchanged)."""
    alerts = [t for t in plan.targets if t.kind not in SYNCS]
    syncs = [t for t in plan.targets if t.kind in SYNCS]
    if alerts:
        _alerts(alerts, doc, env)
    if syncs:
        _syncs(syncs, doc, env)
