"""docs/rules.md, the rules reference, written from the built-in packs (every pack under rules/, as loaded).

Per pack, per rule: id, severity, name, what it checks, whether it can judge an unbooted image, its public
sources and its fix. A rule can judge an image when no fact area it reads is runtime state (an area fed by a
`runtime` section of collect/section_list.py is "not applicable" on an image, and the engine skips a rule
that reads one). tests/unit/test_rules_doc.py fails when the file is out of date. Regenerate it with:

    python -m auditor.rulesdoc            # writes docs/rules.md of this checkout
"""

from __future__ import annotations

import re
from pathlib import Path

from .collect.section_list import SECTIONS
from .docwrite import write_reference
from .judge.rules import Rule, RuleSet, load_rules

DOC = Path(__file__).resolve().parent.parent / "docs" / "rules.md"
COMMAND = "python -m auditor.rulesdoc"


def runtime_areas() -> frozenset[str]:
    """Fact areas an unbooted image cannot have: those a runtime section is required for."""
    return frozenset(area for spec in SECTIONS if spec.runtime for area in spec.required_by)


def _paragraph(text: str) -> str:
    """A rule's text on one line (YAML folded and literal blocks alike), Markdown syntax escaped outside its
    `code` spans (`ssh_host_*_key*` stays text, not emphasis)."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(p if p.startswith("`") else re.sub(r"([\\*_<>\[\]#|~])", r"\\\1", p) for p in parts)


def _reads(rule: Rule) -> list[str]:
    """Fact areas, then the other snapshot roots (host, labels: their keys when the rule reads only some)."""
    roots = [f"{root}.{key}" for root in sorted(rule.roots) for key in rule.root_keys.get(root, ())]
    roots += [root for root in sorted(rule.roots) if root not in rule.root_keys]
    return [f"facts.{area}" for area in sorted(rule.areas)] + roots


def _rule(rule: Rule, live_only: frozenset[str]) -> list[str]:
    runtime = sorted(rule.areas & live_only)
    where = (f"live host only (runtime state: {', '.join(f'`facts.{a}`' for a in runtime)})" if runtime
             else "image and host")
    lines = [f"### `{rule.id}`", "", f"**{rule.severity}** · {_paragraph(rule.name)}", ""]
    if rule.description:
        lines += [_paragraph(rule.description), ""]
    lines += [f"- Judges: {where}" + ("; a fleet rule, over all hosts of a scan" if rule.fleet else ""),
              "- Reads: " + ", ".join(f"`{path}`" for path in _reads(rule))]
    lines += ["- Sources: " + (", ".join(f"<{url}>" for url in rule.refs) or "none")]
    if rule.remediation:
        lines += [f"- Fix: {_paragraph(rule.remediation)}"]
    return [*lines, ""]


def render(ruleset: RuleSet) -> str:
    """The reference as Markdown: packs in load order (file name), rules in file order."""
    live_only = runtime_areas()
    out = ["# Built-in rules", "",
           f"Generated from the packs under `rules/` by `{COMMAND}`; do not edit by hand. "
           f"{len(ruleset.rules)} rules in {len(ruleset.packs)} packs. \"Image and host\": the rule also judges an "
           "unbooted image (`image://`, `ami://`), because every fact area it reads is read from a root "
           "filesystem; \"live host only\": it reads runtime state, which an image does not have (not "
           "applicable there, not a finding).", ""]
    for name, pack in ruleset.packs.items():
        rules = [r for r in ruleset.rules if r.pack == name]
        out += [f"## {name}", ""]
        if pack.description:
            out += [_paragraph(pack.description), ""]
        out += [f"- [`{r.id}`](#{r.id.replace('.', '')}) ({r.severity})" for r in rules] + [""]
        for rule in rules:
            out += _rule(rule, live_only)
    return "\n".join(out).rstrip("\n") + "\n"


def builtin_reference() -> str:
    return render(load_rules(builtin=True))


def main(argv: list[str] | None = None) -> int:
    """Write the reference (to DOC, or the path given)."""
    return write_reference(builtin_reference, DOC, argv)


if __name__ == "__main__":
    raise SystemExit(main())
