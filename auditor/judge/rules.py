"""Rule packs: load YAML, check it against the rule-pack schema, then JMESPath, fact paths, titles; compile.

A pack file:

    pack: cgroups                       # defaults to the file name
    description: Dying memory cgroups
    params: {dying_warn: 1000}          # `${dying_warn}` in expressions; override with --set cgroups.dying_warn=500
    rules:
      - id: cgroups.dying-memcgs
        title: "{{ facts.cgroups.memory.dying }} dying memory cgroups"
        severity: medium
        when: "facts.cgroups.memory.dying >= ${dying_warn}"      # host-level condition, or
        select: "facts.systemd.units[?restarts > `3`]"            # one finding per matched item
        evidence: {dying: facts.cgroups.memory.dying}             # name → JMESPath over the snapshot + `item`
        leads_to: [cpu.hot-core-system-time]                      # incident chain: what this finding causes
        link: "{{ evidence.dying | thousands }} dying memcgs"     # its short text in a chain's one line
      - id: fleet.shared-machine-id                             # a fleet rule: over all hosts of a scan
        title: "{{ item.count }} hosts share machine-id {{ item.value }}: {{ item.hosts | join(', ') }}"
        severity: high
        fleet: {unique: host.machine_id}          # or {agree: PATH, within: LABEL}; `where:` filters hosts
        # or {outlier: PATH, within: LABEL, min_delta: N, factor: 10, min_hosts: 3}: a number far above its group's
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

from ..collect.schema import FactSpec, fact_tree
from ..errors import InputError, raise_all
from ..factpath import parse as parse_path
from ..inputschema import Form, check_items
from ..yamlload import LineDict, LineList, load_yaml_file
from .expansion import TooCostly, compile_bounded
from .leadsto import check_chains
from .params import Override, coerce, plain, substitute
from .paths import PathError, Reads, analyze, element, root_spec
from .rulefiles import builtin_files, rule_files
from .shapes import area_shapes
from .templates import TemplateError, compile_title

# the pack's shape (keys, types, severities, ids, required keys) is declared in schemas/rule-pack.schema.json;
# the code checks what a schema cannot: JMESPath, fact paths, parameters, templates, duplicate ids, chains
PACK_FORM = Form("rule-pack", "the rule file", {"rules": ("rule", "id")})
ID_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
FREE_ITEM = FactSpec("item", "map")


@dataclass(frozen=True)
class FleetSpec:
    """A fleet rule's test over all hosts of a scan (judge/fleet.py): `unique` — no value of `path` is held
    by two hosts (within one `within` label group when given); `agree` — every host of a `within` group
    has the same value; `outlier` — no host's number is above `factor` × its `within` group's median and
    at least `min_delta` above it (groups of `min_hosts` hosts with a number or more). `where`: only hosts
    where this JMESPath is true take part."""

    kind: str  # unique | agree | outlier
    path: str
    expr: Any  # compiled JMESPath of `path`
    within: str | None
    where: Any | None
    factor: float = 10.0  # outlier only
    min_delta: float = 0.0
    min_hosts: int = 3


@dataclass(frozen=True)
class Rule:
    """One compiled rule. `areas`: facts areas it reads (unknown on a host → the rule cannot be evaluated)."""

    id: str
    pack: str
    severity: str
    name: str
    title: Any  # compiled jinja2 template
    description: str
    remediation: str
    tags: tuple[str, ...]
    when: Any | None  # compiled JMESPath
    select: Any | None
    item_expr: Any | None
    item_key: str | None  # row field naming the item (from the fact schema's list key)
    evidence: tuple[tuple[str, Any], ...]
    areas: frozenset[str]
    reads: tuple[tuple[str, str | None], ...]  # (area, top-level key read) pairs; key None = the whole area
    roots: frozenset[str]  # top-level snapshot keys read besides facts (host, labels, name, …); "*" = all
    params: dict[str, Any]
    source: str
    line: int
    leads_to: tuple[str, ...] = ()  # rule ids this finding leads to in an incident chain (chains.py)
    leads_to_lines: tuple[int, ...] = ()  # file line of each entry, for errors
    link: Any | None = None  # compiled jinja2 template: this finding's short text in a chain's one line
    fleet: FleetSpec | None = None  # a fleet rule: evaluated over all snapshots of a scan, not per host
    root_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)  # root → the only keys read (host.az…)
    shapes: tuple[tuple[str, Any], ...] = ()  # (area, shape): the part of each area read (judge/shapes.py)
    refs: tuple[str, ...] = ()  # public sources: http(s) URLs (the schema checks each; built-in rules need one)


@dataclass
class Pack:
    name: str
    source: str
    line: int
    description: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    param_lines: dict[str, int] = field(default_factory=dict)
    raw_rules: Any = None
    errors: list[InputError] = field(default_factory=list)  # rules that failed, each on its own


@dataclass
class RuleSet:
    """All loaded rules, the packs they came from, and the files read."""

    rules: list[Rule]
    packs: dict[str, Pack]
    files: list[str]

    def ids(self) -> set[str]:
        return {r.id for r in self.rules}

    def graph(self) -> dict[str, tuple[str, ...]]:
        """Rule id → the rule ids it `leads_to`, in load order (for chains.py)."""
        return {r.id: r.leads_to for r in self.rules}


def _text(node: LineDict, key: str, default: str = "") -> str:
    """An optional text key (the schema made it a string or null)."""
    value = node.get(key)
    return default if value is None else str(value)


def _read_pack(path: Path, shipped: bool) -> Pack:
    """The pack and its rules that passed the format; each broken rule becomes one error of the pack, so
    `rules check` names every one, not only the first."""
    doc = load_yaml_file(path)
    where = str(path)
    bad = check_items(doc, PACK_FORM, where, "rules")  # the declared format first: later steps trust the shapes
    for i, node in enumerate(doc["rules"]) if shipped else ():  # a built-in rule cites its sources
        if i not in bad and not node.get("refs"):
            bad[i] = InputError(f"rule {node['id']!r}: a built-in rule needs `refs:` (public sources)", where,
                                node.line)
    name = _text(doc, "pack", path.stem)
    if not ID_RE.match(name):  # the schema checks `pack:`; a name from the file name is checked here
        raise InputError(f"pack name {name!r} (from the file name) must be lower-case letters, digits, . _ -; "
                         "set `pack:`", where, doc.line)
    params = doc.get("params") or LineDict()
    good = [node for i, node in enumerate(doc["rules"]) if i not in bad]
    return Pack(name, where, doc.line, _text(doc, "description"), plain(params),
                {str(k): params.line_of(k) for k in params}, good, list(bad.values()))


def _apply_overrides(packs: dict[str, Pack], overrides: Iterable[Override]) -> None:
    for o in overrides:
        where = o.source if o.source != "--set" else None
        pack = packs.get(o.pack)
        if pack is None:
            raise InputError(f"{o.pack}.{o.name}: no rule pack named {o.pack!r} (packs: {', '.join(sorted(packs))})",
                             where, o.line)
        if o.name not in pack.params:
            known = ", ".join(sorted(pack.params)) or "none"
            raise InputError(f"{o.pack}.{o.name}: pack {o.pack!r} has no parameter {o.name!r} (known: {known})",
                             where, o.line)
        pack.params[o.name] = coerce(pack.params[o.name], plain(o.value), f"{o.pack}.{o.name}", o.source, o.line)


def _compile_expr(text: str, key: str, node: LineDict, pack: Pack, item: FactSpec | None,
                  used: bool = True) -> tuple[Any, FactSpec | None, Reads]:
    line = node.line_of(key)
    try:
        expanded = substitute(text, pack.params)
    except KeyError as exc:
        known = ", ".join(sorted(pack.params)) or "none"
        raise InputError(f"{key}: unknown parameter ${{{exc.args[0]}}} (pack {pack.name} has: {known})", pack.source,
                         line) from None
    try:
        compiled = compile_bounded(expanded)
    except TooCostly as exc:
        raise InputError(f"{key}: {exc}", pack.source, line) from None
    except RecursionError:
        raise InputError(f"{key}: JMESPath expression nested too deeply", pack.source, line) from None
    except (JMESPathError, ValueError) as exc:  # ValueError: a number past Python's int digit limit
        msg = " ".join(str(exc).split())
        raise InputError(f"{key}: invalid JMESPath expression: {msg}", pack.source, line) from None
    try:
        result, reads = analyze(compiled.parsed, item=item, used=used)
    except PathError as exc:
        raise InputError(f"{key}: {exc}", pack.source, line) from None
    except RecursionError:
        raise InputError(f"{key}: JMESPath expression nested too deeply", pack.source, line) from None
    return compiled, result, reads


def _area_keys(reads: Reads, areas: set[str]) -> tuple[tuple[str, str | None], ...]:
    """Which top-level key of each area a rule reads (None: the whole area), for content-keyed caching."""
    keys: dict[str, set[str | None]] = {a: set() for a in areas}
    for path in reads.paths | reads.bases:
        steps = parse_path(path).steps()
        if steps[0] != ("facts", False) or len(steps) < 2:
            continue
        keys.setdefault(steps[1][0], set()).add(steps[2][0] if len(steps) > 2 else None)
    if reads.whole_facts or "*" in reads.roots:
        keys = {a: {None} for a in areas}
    out: list[tuple[str, str | None]] = []
    for area in sorted(keys):
        wanted = keys[area]
        if None in wanted or not wanted:
            out.append((area, None))
        else:
            out.extend((area, k) for k in sorted(k for k in wanted if k is not None))
    return tuple(out)


def _plain_path(path: str) -> bool:
    return bool(path) and all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part) for part in path.split("."))


def _title_line(path: str, node: LineDict, key: str, exc: TemplateError) -> int:
    """The file line of a template error. A literal block (`|`) keeps the template's lines, so its line
    `lineno` is exact; folded (`>`), quoted and plain values join their lines, so the error is placed on
    the first of their lines that holds what the message quotes, else on the value's first line."""
    span = node.value_spans.get(key)
    if span is None:  # the value is on its key's line, alone
        return node.line_of(key)
    first, last, style = span
    if style == "|":
        return first + exc.lineno
    first += 1 if style == ">" else 0  # a folded block starts on the line after its indicator
    quoted = re.findall(r"'([^']+)'", str(exc))
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line for i, line in enumerate(f, 1) if first <= i <= last]
    except OSError:
        lines = []
    for offset, line in enumerate(lines):
        if any(q in line for q in quoted):
            return first + offset
    return first


@dataclass
class _Match:
    """What a rule's conditions compiled to, gathered while compiling it."""

    reads: Reads = field(default_factory=Reads)
    when: Any | None = None
    when_paths: frozenset[str] = frozenset()
    select: Any | None = None
    item_spec: FactSpec | None = None
    item_expr: Any | None = None
    fleet: FleetSpec | None = None
    evidence: list[tuple[str, Any]] = field(default_factory=list)
    shown: Reads = field(default_factory=Reads)  # what the title and link read


def _compile_rule(node: LineDict, pack: Pack) -> Rule:
    """One rule (its shape already checked by the pack's schema): conditions, evidence, templates."""
    m = _Match()
    _compile_conditions(node, pack, m)
    names = [n for n, _ in m.evidence] if m.evidence or m.select is None else None
    title = _compile_template(node, "title", pack, m, None if m.fleet is not None else names)
    link = _compile_template(node, "link", pack, m, names) if "link" in node else None
    reads = m.reads
    areas = set(reads.areas)
    if reads.whole_facts or "*" in reads.roots:
        areas |= set(fact_tree().children["facts"].children)
    shapes = area_shapes(reads.paths, reads.bases, areas, reads.whole_facts or "*" in reads.roots)
    if m.fleet is not None and m.fleet.kind == "outlier":  # a host's per-host number is kept in its fleet.Taking:
        # the core keeps of the host only what the title reads, not a copy of the number in a slice per host
        shown = m.shown
        whole = shown.whole_facts or "*" in shown.roots
        shapes = area_shapes(shown.paths, shown.bases, areas if whole else set(shown.areas), whole)
    leads_to = node.get("leads_to") or LineList()
    return Rule(
        id=node["id"], pack=pack.name, severity=node["severity"], name=_text(node, "name", node["title"].strip()),
        title=title, description=_text(node, "description").strip(), remediation=_text(node, "remediation").strip(),
        tags=tuple(node.get("tags") or ()), when=m.when, select=m.select, item_expr=m.item_expr,
        item_key=m.item_spec.key if m.item_spec is not None else None, evidence=tuple(m.evidence),
        areas=frozenset(areas), reads=_area_keys(reads, areas), shapes=shapes,
        roots=frozenset(reads.roots - {"facts", "item"}), params=dict(pack.params), source=pack.source,
        line=node.line, leads_to=tuple(leads_to), leads_to_lines=tuple(map(leads_to.line_of, range(len(leads_to)))),
        link=link, fleet=m.fleet, root_keys=_root_keys(reads), refs=tuple(node.get("refs") or ()),
    )


def _compile_conditions(node: LineDict, pack: Pack, m: _Match) -> None:
    """`when`, `select` (+ `item`), `evidence` and `fleet` into `m`, noting what each reads."""
    if "when" in node:
        m.when, _, r = _compile_expr(node["when"], "when", node, pack, None)
        m.reads.merge(r)
        m.when_paths = frozenset(r.paths)
    if "select" in node:
        _compile_select(node, pack, m)
    for name in node.get("evidence") or ():
        compiled, _, r = _compile_expr(node["evidence"][name], name, node["evidence"], pack, m.item_spec)
        m.reads.merge(r)
        m.evidence.append((str(name), compiled))
    if "fleet" in node:
        m.fleet, r = _compile_fleet(node["fleet"], pack)
        m.reads.merge(r)
    if not m.evidence and m.select is None and m.fleet is None:  # a host-level rule shows what its condition read
        m.evidence = [(p, jmespath.compile(p)) for p in sorted(m.when_paths) if _plain_path(p)]
    if not m.evidence and m.select is not None and m.item_spec is not None:
        m.reads.use(m.item_spec)  # the evidence is the whole match


def _compile_select(node: LineDict, pack: Pack, m: _Match) -> None:
    """`select` (one finding per matched item) and the `item` expression naming it."""
    m.select, result, r = _compile_expr(node["select"], "select", node, pack, None, used=False)
    m.reads.merge(r)
    spec = element(result) if result is not None and result.type == "list" else result
    if result is not None and result.type != "list":
        m.reads.use(result)  # one match, the value itself
    m.item_spec = spec = spec or FREE_ITEM
    if spec.key and spec.key in spec.children:
        m.reads.note(spec.children[spec.key].path)  # the item is named by its row key
    if "item" in node:
        m.item_expr, _, r = _compile_expr(node["item"], "item", node, pack, spec)
        m.reads.merge(r)


def _compile_template(node: LineDict, key: str, pack: Pack, m: _Match, evidence: list[str] | None) -> Any:
    """`title` or `link`: a jinja2 template checked against what the rule's findings carry."""
    item = FREE_ITEM if m.fleet is not None else m.item_spec
    try:
        template, r = compile_title(node[key], root_spec(item), params=pack.params, evidence=evidence)
    except TemplateError as exc:
        raise InputError(str(exc).replace("title template", f"{key} template"), pack.source,
                         _title_line(pack.source, node, key, exc)) from None
    m.reads.merge(r)
    m.shown.merge(r)
    return template


def _root_keys(reads: Reads) -> dict[str, tuple[str, ...]]:
    """For `host` and `labels`, the keys a rule reads when it reads only some (`host.az`, `labels.az`): results
    are then shared between hosts that agree on those keys, not only between hosts with equal identities."""
    out: dict[str, tuple[str, ...]] = {}
    for root in ("host", "labels"):
        if root not in reads.roots or "*" in reads.roots:
            continue
        keys = {parse_path(p).area for p in reads.paths if parse_path(p).steps()[0] == (root, False)}
        if keys and "" not in keys:
            out[root] = tuple(sorted(keys))
    return out


def _compile_fleet(spec: LineDict, pack: Pack) -> tuple[FleetSpec, Reads]:
    """`fleet: {unique: PATH [, within: LABEL]}`, `{agree: PATH, within: LABEL}` or `{outlier: PATH, within:
    LABEL, min_delta: N [, factor: N, min_hosts: N]}` (+ optional `where`)."""
    # the schema allows exactly one kind, `within` with `agree` and `outlier`, the numbers only with `outlier`
    kind = next(k for k in ("unique", "agree", "outlier") if k in spec)
    within = spec.get("within")
    expr, result, reads = _compile_expr(spec[kind], kind, spec, pack, None)
    if kind == "outlier" and result is not None and result.type not in ("integer", "number"):
        raise InputError(f"outlier: {spec[kind]} is {_a_type(result.type)}, not a number (an integer or number "
                         "fact, or an expression giving one)", pack.source, spec.line_of(kind))
    cond = None
    if "where" in spec:
        cond, _, r = _compile_expr(spec["where"], "where", spec, pack, None)
        reads.merge(r)
    numbers = {k: spec[k] for k in ("factor", "min_delta", "min_hosts") if k in spec}
    return FleetSpec(kind, str(spec[kind]), expr, within, cond, **numbers), reads


def _a_type(name: str) -> str:
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def load_rules(dirs: Iterable[str | Path] = (), builtin: bool = True,
               overrides: Iterable[Override] = ()) -> RuleSet:
    """Load, validate and compile rule packs; any problem is an InputError naming the file and line."""
    files = rule_files(dirs, builtin)
    shipped = builtin_files()
    packs: dict[str, Pack] = {}
    for path in files:
        pack = _read_pack(path, path.resolve() in shipped)
        if pack.name in packs:
            raise InputError(f"pack {pack.name!r} is already defined in {packs[pack.name].source}", pack.source,
                             pack.line)
        packs[pack.name] = pack
    _apply_overrides(packs, overrides)
    rules: list[Rule] = []
    seen: dict[str, Rule] = {}
    errors = [e for pack in packs.values() for e in pack.errors]
    for pack in packs.values():
        for node in pack.raw_rules:
            try:  # each rule on its own: a broken one does not hide the next
                rule = _compile_rule(node, pack)
            except InputError as exc:
                errors.append(exc)
                continue
            if rule.id in seen:
                other = seen[rule.id]
                errors.append(InputError(f"rule id {rule.id!r} is already defined at {other.source}:{other.line}",
                                         rule.source, rule.line))
                continue
            seen[rule.id] = rule
            rules.append(rule)
    raise_all(errors)
    check_chains(rules)
    return RuleSet(rules, packs, [str(f) for f in files])
