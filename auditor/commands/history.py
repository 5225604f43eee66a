"""`ami-auditor history list|show|trend|report|import`: the scans recorded in the SQLite history store."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..atomicio import check_writable_file, write_text_atomic
from ..context import Env
from ..errors import InputError
from ..history import charts, query, series, trends
from ..history.conn import Store
from ..history.db import DEFAULT_SHOWN, default_path, open_store
from ..history.importer import import_folder
from ..history.values import INT_MAX, integer
from ..snapshotdoc import Snapshot
from ..textsafe import json_text, one_line
from .checks import bounded_int

REPORT_FORMATS = ("html", "json")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=None, metavar="PATH", help=f"history store (default {DEFAULT_SHOWN})")
    p.add_argument("--json", action="store_true", help="print JSON")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="scans recorded in the history store: list, show, trend, report, import")
    hsub = p.add_subparsers(dest="history_command", metavar="ACTION", parser_class=type(p))
    hsub.required = True
    ls = hsub.add_parser("list", help="recorded scans, oldest first (by scan id)")
    _common(ls)
    ls.add_argument("--last", type=bounded_int(0, 10**6), default=0, metavar="N", help="only the last N scans")
    ls.set_defaults(func=run_list)
    show = hsub.add_parser("show", help="one scan: hosts, findings with the time each was first seen, drift")
    show.add_argument("scan", metavar="SCAN", help="scan id, or `latest`")
    _common(show)
    show.set_defaults(func=run_show)
    trend = hsub.add_parser("trend", help="one fact over the recorded scans, as a compact chart")
    trend.add_argument("fact", metavar="FACT_PATH", help="e.g. facts.cgroups.memory.dying, "
                                                         "facts.trends.units[ecs.service].restarts_delta")
    who = trend.add_mutually_exclusive_group()
    who.add_argument("--host", default=None, metavar="NAME", help="only this host")
    who.add_argument("--group-by", default=None, metavar="LABEL", help="one line per label value (mean)")
    trend.add_argument("--last", type=bounded_int(0, 10**6), default=0, metavar="N", help="only the last N scans")
    _common(trend)
    trend.set_defaults(func=run_trend)
    rep = hsub.add_parser("report", help="the fleet's trends over the recorded scans as one page (HTML: "
                                         "pictures and tables, no script needed) or JSON")
    rep.add_argument("--store", default=None, metavar="PATH", help=f"history store (default {DEFAULT_SHOWN})")
    rep.add_argument("--format", choices=REPORT_FORMATS, default="html", help="html (default) or json")
    rep.add_argument("--out", default=None, metavar="FILE|DIR",
                     help="write here (a directory gets history.<ext>); stdout without it")
    rep.add_argument("--last", type=bounded_int(1, 10**4), default=charts.DEFAULT_LAST, metavar="N",
                     help=f"the last N complete scans (default {charts.DEFAULT_LAST})")
    rep.add_argument("--top", type=bounded_int(1, 50), default=charts.DEFAULT_TOP, metavar="K",
                     help=f"lines per chart: the K hosts or units with the largest latest value, the rest "
                          f"summarized (default {charts.DEFAULT_TOP})")
    rep.set_defaults(func=run_report)
    imp = hsub.add_parser("import", help="record the scan-*.json reports of a history folder that older "
                                         "versions wrote (oldest first)")
    imp.add_argument("directory", metavar="DIR")
    _common(imp)
    imp.set_defaults(func=run_import)


def _path(args: argparse.Namespace) -> Path:
    return Path(args.store).expanduser() if args.store else default_path()


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else one_line(value)


def run_list(args: argparse.Namespace, env: Env) -> int:
    path = _path(args)
    conn = open_store(path, create=False, reader=True)
    try:
        scans = query.list_scans(conn, path, args.last)
    finally:
        conn.close()
    if args.json:
        env.out_json({"store": str(path), "scans": scans})
        return 0
    env.out(f"{len(scans)} scans in {path}")
    env.out(f"{'id':>6} {'started':<21} {'state':<12} {'exit':>4} {'hosts':>6} {'findings':>8} {'drift':>6}  source")
    for s in scans:
        env.out(f"{s['id']:>6} {one_line(s['started_at']):<21} {s['state']:<12} {_fmt(s['exit_code']):>4} "
                f"{s['hosts']:>6} {s['findings']:>8} {s['drift']:>6}  {one_line(s['source'] or '')}")
    return 0


def run_show(args: argparse.Namespace, env: Env) -> int:
    path = _path(args)
    conn = open_store(path, create=False, reader=True)
    try:
        if args.scan == "latest":
            row = conn.execute("SELECT max(id) FROM scans").fetchone()
            if row is None or row[0] is None:
                raise InputError("no scans recorded yet", str(path))
            scan_id = integer(row[0], path, "scans.id", low=1)
        else:
            try:
                scan_id = int(args.scan)
            except ValueError:
                scan_id = 0
            if not 1 <= scan_id <= INT_MAX:  # SQLite's integers: a larger id cannot exist, nor bind
                raise InputError(f"SCAN must be a scan id (1..{INT_MAX}) or `latest`, not {args.scan[:40]!r}")
        scan = query.get_scan(conn, scan_id, path)
    finally:
        conn.close()
    if args.json:
        env.out_json(scan)
        return 0
    env.out(f"scan {scan['id']}: {scan['state']}, started {one_line(scan['started_at'])}, "
            f"exit {_fmt(scan['exit_code'])}, "
            f"{scan['hosts']} hosts, {scan['findings']} findings, {scan['drift']} drift")
    for h in scan["hosts_detail"]:
        env.out(f"  host {one_line(h['name'])}: {h['status']}" + (f" ({one_line(h['error'])})" if h["error"] else ""))
    for f in scan["findings_detail"]:
        since = f" since {one_line(f['first_seen'])}" if f["first_seen"] else ""
        env.out(f"  [{f['severity'].upper():8}] {one_line(f['host'])}: {one_line(f['title'])}"
                f"{' (waived)' if f['waived'] else ''}{since}")
    for d in scan["drift_detail"]:
        env.out(f"  drift {one_line(d['host'])}: {one_line(d['path'])} {d['kind']}")
    return 0


def _points(conn: Store, path: Path, fact: str, host: str | None, last: int) -> list[tuple[int, str, str, Any, dict]]:
    """(scan id, time, host, value, labels) per stored snapshot; trend facts are derived again in order."""
    steps = series.parse_path(fact)
    rows = query.host_series(conn, path, host, last)
    previous: dict[str, tuple[int, Snapshot]] = {}
    seen: dict[str, int] = {}
    out = []
    for scan_id, at, name, snap in rows:
        if fact.startswith("facts.trends"):
            before = previous.get(name)
            seen[name] = seen.get(name, 0) + 1
            trends.attach(snap, trends.derive(snap, before[1] if before else None,
                                              before[0] if before else None, seen[name]))
        previous[name] = (scan_id, snap)
        out.append((scan_id, at, name, series.resolve(snap, fact, steps), dict(snap.get("labels") or {})))
    return out


def run_trend(args: argparse.Namespace, env: Env) -> int:
    series.parse_path(args.fact)  # a fact path that names a number, checked before the store is opened
    path = _path(args)
    conn = open_store(path, create=False, reader=True)
    try:
        points = _points(conn, path, args.fact, args.host, args.last)
    finally:
        conn.close()
    scan_ids = sorted({p[0] for p in points})
    lines: dict[str, dict[int, Any]] = {}
    if args.group_by:
        groups: dict[str, dict[int, list[float]]] = {}
        for scan_id, _, _, value, labels in points:
            num = series.number(value)
            if num is not None:
                groups.setdefault(str(labels.get(args.group_by, "(none)")), {}).setdefault(scan_id, []).append(num)
        lines = {g: {s: round(sum(v) / len(v), 4) for s, v in by.items()} for g, by in groups.items()}
    else:
        for scan_id, _, name, value, _ in points:
            lines.setdefault(name, {})[scan_id] = value
    if args.json:
        env.out_json({"fact": args.fact, "scans": scan_ids, "group_by": args.group_by,
                      "series": {k: [v.get(s) for s in scan_ids] for k, v in sorted(lines.items())}}, default=str)
        return 0
    env.out(f"{one_line(args.fact)} over {len(scan_ids)} scans"
            + (f" ({scan_ids[0]} … {scan_ids[-1]})" if scan_ids else "")
            + (f", mean per {one_line(args.group_by)}" if args.group_by else ""))
    for key, by in sorted(lines.items()):
        values = [by.get(s) for s in scan_ids]
        nums = [series.number(v) for v in values]
        known = [v for v in values if v is not None]
        last = _fmt(known[-1]) if known else "-"
        nums_known = [n for n in nums if n is not None]
        span = f"min {_fmt(min(nums_known))} max {_fmt(max(nums_known))} " if nums_known else ""
        env.out(f"  {one_line(key):<20} {series.sparkline(nums)}  {span}last {last}")
    return 0


def run_import(args: argparse.Namespace, env: Env) -> int:
    path = _path(args)
    directory = Path(args.directory)
    if not directory.is_dir():
        raise InputError("no such history directory", str(directory))
    added, skipped = import_folder(directory, path)
    if args.json:
        env.out_json({"store": str(path), "imported": added, "skipped": skipped})
    else:
        env.out(f"imported {len(added)} scans into {path}" + (f" ({len(skipped)} already there)" if skipped else ""))
    return 0


def _report_target(out: str | None, fmt: str) -> Path | None:
    """--out: a directory (existing, or named with a trailing /) gets history.<ext>; else the file itself."""
    if out is None:
        return None
    target = Path(out).expanduser()
    if target.is_dir() or out.endswith("/"):
        target = target / f"history.{fmt}"
    check_writable_file(target, "--out")
    return target


def run_report(args: argparse.Namespace, env: Env) -> int:
    path = _path(args)
    target = _report_target(args.out, args.format)  # bad --out is exit 2 before the store is read
    conn = open_store(path, create=False, reader=True)
    try:
        doc = charts.fleet_trends(conn, path, args.last, args.top)
    finally:
        conn.close()
    if args.format == "json":
        text = json_text(json.dumps({"schema": "ami-auditor/history-report/1", **doc}, indent=1, ensure_ascii=False))
    else:
        from ..render import history_html  # jinja2 and the templates only for this command

        text = history_html.render(doc)
    if target is None:
        env.write(text if text.endswith("\n") else text + "\n", escape=args.format != "json")  # json_text made it inert
    else:
        write_text_atomic(target, text if text.endswith("\n") else text + "\n")
        env.err(f"wrote {target}")
    return 0
