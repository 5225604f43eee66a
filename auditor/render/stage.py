"""The render stage of a run: --format/--out, writing one file per format, and the terminal summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomicio import check_writable_dir, write_files
from ..context import Env, Styled
from ..errors import InputError
from ..models import SEVERITIES, Report
from ..options import RenderOptions
from ..reportdoc import validate_report
from ..reporttypes import ReportDoc
from ..textsafe import one_line
from . import BYTE_RENDERERS, RENDERERS, summary, view
from .view import since_text

REPORT_STEM = "report"


@dataclass(frozen=True)
class RenderPlan:
    formats: tuple[str, ...]
    out: Path | None
    stdout: bool = False  # the one format goes to stdout; the summary to stderr
    quiet: bool = False
    color: str = "auto"


def parse_formats(value: str) -> tuple[str, ...]:
    formats = tuple(f.strip() for f in value.split(",") if f.strip())
    unknown = [f for f in formats if f not in RENDERERS]
    if unknown:
        raise InputError(f"unknown format(s) {', '.join(unknown)}; choose from {', '.join(RENDERERS)}")
    return formats


def prepare(opts: RenderOptions) -> RenderPlan:
    """Known formats, and an --out directory that can be written (checked, nothing left behind)."""
    formats = parse_formats(opts.formats)
    if not formats:
        raise InputError(f"--format: give at least one of {', '.join(RENDERERS)}")
    if opts.stdout and len(formats) > 1:
        raise InputError(f"--format {opts.formats}: several formats need --out DIR (one format without --out "
                         "goes to stdout)")
    out = Path(opts.out) if opts.out else None
    if out is not None:
        if out.exists() and not out.is_dir():
            raise InputError(f"--out: {out} exists and is not a directory (--out names a directory)")
        for fmt in formats:
            target = out / f"{REPORT_STEM}.{RENDERERS[fmt][1]}"
            if target.is_dir():
                raise InputError(f"--out: {target} is a directory; cannot write the {fmt} report there")
        check_writable_dir(out, "--out")
    return RenderPlan(formats, out, stdout=opts.stdout and out is None, quiet=opts.quiet, color=opts.color)


def terminal(plan: RenderPlan, env: Env) -> Env:
    """Where the run's summary and progress go: stdout, stderr when the report owns stdout, nowhere (--quiet)."""
    return env.terminal(to_stderr=plan.stdout, quiet=plan.quiet, color=plan.color)


def write_formats(doc: ReportDoc, formats: tuple[str, ...], out: Path, stem: str = REPORT_STEM) -> list[Path]:
    """Render every format first, then replace out/stem.ext of every format as one set (write_files): a
    renderer failing writes nothing; a full or read-only disk is OutputError (exit 3), the previous set kept."""
    texts = [(out / f"{stem}.{RENDERERS[fmt][1]}", (BYTE_RENDERERS.get(fmt) or RENDERERS[fmt][0])(doc))
             for fmt in formats]  # all, then write
    write_files(texts)
    return [path for path, _ in texts]


def writes(plan: RenderPlan) -> bool:
    """Whether `write` writes anything (--out, or one format to stdout): else no document need be made."""
    return plan.out is not None or plan.stdout


def write(plan: RenderPlan, doc: ReportDoc, env: Env | None = None) -> list[Path]:
    """The report document (reportdoc.report_to_dict, made once for the files and the store), validated
    against its schema, written in every chosen format to --out (the files written returned), or its one
    format to `env`'s stdout (never coloured)."""
    if plan.out is None and not (plan.stdout and env is not None):
        return []
    validate_report(doc, as_json=True)  # checked as written: every writer writes a tuple as an array
    if plan.out is not None:
        return write_formats(doc, plan.formats, plan.out)
    if env is not None:
        text = RENDERERS[plan.formats[0]][0](doc)
        env.write(text if text.endswith("\n") else text + "\n")
    return []


SummaryLines = list[str | Styled]  # the summary's lines: plain, or in styled pieces (context.Styled)


def summarize(report: Report) -> SummaryLines:
    """A concise terminal summary: counts, the headline chains, splits and symptom, then grouped findings
    and notes (host text escaped when shown). Made before the run lets go of the report's findings (the
    document holds them), printed at its end (`print_summary`)."""
    lines: SummaryLines = []
    active = [f for f in report.findings if not f.waived]
    counts = ", ".join(f"{sum(f.severity == s for f in active)} {s}" for s in SEVERITIES)
    reached = sum(h.status == "ok" for h in report.hosts)
    lines.append(f"\n{reached}/{len(report.hosts)} hosts reached; findings: {counts}; "
                f"waived: {sum(f.waived for f in report.findings)}; drift: {len(report.drift)}")
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for chain in report.chains:  # one line per distinct chain (same rules), shown with its first host's numbers
        groups.setdefault(tuple(link["rule"] for link in chain["links"]), []).append(chain)
    for same in groups.values():
        first, others = same[0], [c["host"] for c in same[1:]]
        partial = " (partial)" if first["partial"] else ""
        more = f" (same chain on {len(others)} more host{'s' if len(others) != 1 else ''})" if others else ""
        lines.append(f"  chain on {one_line(first['host'])}{partial}: {one_line(first['text'])}{more}")
    for split in ((report.comparison or {}).get("splits") or [])[:5]:
        lines.append(f"  split by {one_line(split['group_by'])}: {one_line(split['path'])} "
                    f"(score {split['score']:.2f})")
    lines.extend(_outliers(report.comparison or {}))
    ranked = (report.symptom or {}).get("ranked") or []
    if ranked and report.symptom:
        top = ranked[0]
        why = {"subject": ", the symptom's own subject",
               "upstream": ", upstream in its chain"}.get(top.get("relation") or "", "")
        lines.append(f"  symptom {one_line(report.symptom['symptom'])} goes with {one_line(top['path'])} = "
                    f"{one_line(top.get('value', ''))} (score {view.score(top['score'])}, "
                    f"p={view.p_value(top.get('p_value'))}{why})")
    lines.extend(_findings(report))
    lines.extend(f"  note: {one_line(note)}" for note in report.notes)
    return lines


def _outliers(comparison: Mapping[str, Any], limit: int = 5) -> SummaryLines:
    """Hosts unlike their group, one line each (count and main kinds), most first: one odd host is one line."""
    lines: SummaryLines = []
    for host in (comparison.get("outlier_hosts") or [])[:limit]:
        group = f" ({one_line(host['group'])})" if host.get("group") else ""
        kinds = ", ".join(f"{one_line(k)} ×{n}" for k, n in host["kinds"].items())
        facts = f"{host['outliers']} fact{'s' if host['outliers'] != 1 else ''}"
        lines.append(f"  {one_line(host['host'])}{group} is unlike its group in {facts}: {kinds}")
    if (more := int(comparison.get("outlier_hosts_total") or 0) - len(lines)) > 0:
        lines.append(f"  … {more} more host{'s' if more != 1 else ''} unlike their group in the report")
    return lines


def print_summary(lines: SummaryLines, exit_code: int, env: Env) -> None:
    """Print what `summarize` made, then the exit code."""
    for line in lines:
        if isinstance(line, str):
            env.out(line)
        else:
            env.out_styled(line)
    env.out(f"exit code {exit_code}")


def _findings(report: Report, limit: int = 15) -> SummaryLines:
    """Grouped findings (render/summary.py): worst first, at most `limit` lines; then one line per area whose
    rules could not be evaluated."""
    lines: SummaryLines = []
    shown = summary.groups(report)
    for group in shown[:limit]:
        since = min((f.first_seen for f in group.findings if f.first_seen), default=None)
        when = f" ({since_text(since, report.generated_at)})" if since else ""
        lines.append([("  ", None), (f"[{group.severity.upper():8}]", group.severity),
                     (f" {group.who()}: {group.title()}{when}", None)])
    if len(shown) > limit:
        rest = sum(len(g.findings) for g in shown[limit:])
        lines.append(f"  … {len(shown) - limit} more ({rest} findings) in the report")
    lines.extend(f"  {fold.line()}" for fold in summary.unevaluated(report))
    return lines
