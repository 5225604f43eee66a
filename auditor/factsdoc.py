"""docs/facts.md, the facts reference, written from the fact schema (auditor/collect/facts.yaml, as loaded).

One section per area (`host`, then each `facts.*` area in declaration order), one table row per declared
path: its type (a list's row key, a map's value type), whether it is volatile (left out of baselines, drift
and comparison), how much a drift there matters, and its description. tests/unit/test_facts_doc.py fails when
the file is out of date. Regenerate it with:

    python -m auditor.factsdoc            # writes docs/facts.md of this checkout
"""

from __future__ import annotations

import re
from pathlib import Path

from .collect.schema import FactSpec, fact_tree
from .docwrite import write_reference

DOC = Path(__file__).resolve().parent.parent / "docs" / "facts.md"
COMMAND = "python -m auditor.factsdoc"


def _cell(text: str) -> str:
    """A description as one table cell: one line, `|` escaped, Markdown syntax escaped outside `code` spans."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    escaped = "".join(p if p.startswith("`") else re.sub(r"([\\*_<>\[\]#~])", r"\\\1", p) for p in parts)
    return escaped.replace("|", "\\|")


def _type(spec: FactSpec) -> str:
    if spec.type == "list":
        if spec.children:
            return f"list of rows (key `{spec.key}`)" if spec.key else "list of rows"
        return f"list of {spec.items}"
    if spec.type == "map":
        return f"map of {spec.values}" if spec.values else "map"
    return spec.type


def _judged(spec: FactSpec) -> str:
    if spec.derived:
        return "derived (history)"
    if spec.volatile:
        return "volatile"
    return f"drift: {spec.drift}" if spec.drift else ""


def _rows(spec: FactSpec) -> list[str]:
    row = f"| `{spec.path}` | {_type(spec)} | {_judged(spec)} | {_cell(spec.description)} |"
    out = [row] if spec.type != "object" or spec.description else []
    for child in spec.children.values():
        out += _rows(child)
    return out


def _section(title: str, spec: FactSpec) -> list[str]:
    lines = [f"## `{title}`", ""]
    if spec.description:
        lines += [_cell(spec.description), ""]
    rows = [r for child in spec.children.values() for r in _rows(child)] if spec.type == "object" else _rows(spec)
    return [*lines, "| path | type | judged as | description |", "| --- | --- | --- | --- |", *rows, ""]


def render(tree: FactSpec) -> str:
    """The reference as Markdown: `host`, then each facts area in the order facts.yaml declares them."""
    areas = tree.children["facts"].children
    count = sum(len(_rows(spec)) for spec in (tree.children["host"], *areas.values()))
    out = ["# Facts", "",
           f"Generated from `auditor/collect/facts.yaml` by `{COMMAND}`; do not edit by hand. {count} declared "
           f"paths: `host` and {len(areas)} areas under `facts`. This is the vocabulary of snapshots, rules "
           "(JMESPath over the snapshot), baselines (`expect:` keys) and `--group-by`/`--symptom`.", "",
           "- A path names list rows with `[]`; in a baseline or a drift item the row's key goes between the "
           "brackets: `facts.systemd.units[ecs.service].restarts`.",
           "- **volatile**: changes on its own (counters, times, identities); never in a baseline, drift or "
           "group comparison. Everything under a volatile path is volatile.",
           "- **drift: LEVEL**: the severity of a baseline difference there (on a list or map: of a whole row "
           "or entry); `enablement`: newly enabled is high, other changes medium. Undeclared: low.",
           "- **derived (history)**: published from the history store before the judge runs; absent on a "
           "host's first scan (no trend, not an unknown).", ""]
    out += _section("host", tree.children["host"])
    for name, spec in areas.items():
        out += _section(f"facts.{name}", spec)
    return "\n".join(out).rstrip("\n") + "\n"


def reference() -> str:
    return render(fact_tree())


def main(argv: list[str] | None = None) -> int:
    """Write the reference (to DOC, or the path given)."""
    return write_reference(reference, DOC, argv)


if __name__ == "__main__":
    raise SystemExit(main())
