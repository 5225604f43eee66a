"""Rule packs: load YAML, validate every rule (keys, severity, JMESPath, fact paths, title), compile.

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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from difflib import get_close_matches
from pathlib import Path
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

from ..collect.schema import FactSpec, fact_tree
from ..errors import InputError
from ..factpath import parse as parse_path
from ..models import SEVERITIES
from ..yamlload import LineDict, LineList, load_yaml_file, reject_unknown_keys
from .params import Override, coerce, plain, substitute
from .paths import PathError, Reads, analyze, element, root_spec
from .rulefiles import rule_files
from .shapes import area_shapes
from .templates import TemplateError, compile_title

PACK_KEYS = {"pack", "description", "params", "rules"}
RULE_KEYS = {"id", "name", "title", "severity", "description", "remediation", "tags", "when", "select", "item",
             "evidence", "leads_to", "link", "fleet"}
FLEET_KEYS = {"unique", "agree", "within", "where"}
REQUIRED = ("id", "title", "severity")
ID_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
FREE_ITEM = FactSpec("item", "map")


@dataclass(frozen=True)
class FleetSpec:
    """A fleet rule's test over all hosts of a scan (judge/fleet.py): `unique` — no value of `path` is held
    by two hosts (within one `within` label group when given); `agree` — every host of a `within` group
    has the same value. `where`: only hosts where this JMESPath is true take part."""

    kind: str  # unique | agree
    path: str
    expr: Any  # compiled JMESPath of `path`
    within: str | None
    where: Any | None


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


@dataclass
class Pack:
    name: str
    source: str
    line: int
    description: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    param_lines: dict[str, int] = field(default_factory=dict)
    raw_rules: Any = None


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


def _str(node: LineDict, key: str, path: str, default: str = "") -> str:
    value = node.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise InputError(f"{key!r} must be a string", path, node.line_of(key))
    return value


def _read_pack(path: Path) -> Pack:
    doc = load_yaml_file(path)
    where = str(path)
    if not isinstance(doc, LineDict):
        raise InputError("a rule file is a mapping with `rules:` (and optional pack, description, params)", where,
                         getattr(doc, "line", 1))
    reject_unknown_keys(doc, PACK_KEYS, where)
    name = _str(doc, "pack", where, path.stem)
    if not ID_RE.match(name):
        raise InputError(f"pack name {name!r} must be lower-case letters, digits, . _ -", where, doc.line_of("pack"))
    params = doc.get("params") or LineDict()
    if not isinstance(params, LineDict):
        raise InputError("'params' must be a mapping of name: default", where, doc.line_of("params"))
    rules = doc.get("rules")
    if not isinstance(rules, LineList):
        raise InputError("'rules' must be a list of rules", where, doc.line_of("rules"))
    return Pack(name, where, doc.line, _str(doc, "description", where), plain(params),
                {str(k): params.line_of(k) for k in params}, rules)


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


def _compile_expr(text: Any, key: str, node: LineDict, pack: Pack, item: FactSpec | None,
                  used: bool = True) -> tuple[Any, FactSpec | None, Reads]:
    line = node.line_of(key)
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{key!r} must be a JMESPath expression (a string)", pack.source, line)
    try:
        expanded = substitute(text, pack.params)
    except KeyError as exc:
        known = ", ".join(sorted(pack.params)) or "none"
        raise InputError(f"{key}: unknown parameter ${{{exc.args[0]}}} (pack {pack.name} has: {known})", pack.source,
                         line) from None
    try:
        compiled = jmespath.compile(expanded)
    except RecursionError:
        raise InputError(f"{key}: JMESPath expression nested too deeply", pack.source, line) from None
    except (JMESPathError, ValueError) as exc:  # ValueError: a number past Python's int digit limit
        msg = " ".join(str(exc).split())
        raise InputError(f"{key}: invalid JMESPath expression: {msg}", pack.source, line) from None
    try:
        result, reads = analyze(compiled.parsed, item=item, used=used)  # type: ignore[arg-type]  # jmespath AST
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


def _title_line(path: str, key_line: int, lineno: int) -> int:
    """The file line of a title template's line `lineno`: a block scalar (`title: |-`) starts on the next line."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = next((line for i, line in enumerate(f, 1) if i == key_line), "")
    except OSError:
        text = ""
    value = text.partition(":")[2].strip()
    return key_line + lineno - 1 + (1 if value[:1] in ("|", ">") else 0)


def _compile_rule(node: Any, pack: Pack, index: int) -> Rule:
    where, line = pack.source, pack.raw_rules.line_of(index)
    if not isinstance(node, LineDict):
        raise InputError("each rule must be a mapping", where, line)
    reject_unknown_keys(node, RULE_KEYS, where, "rule")
    for key in REQUIRED:
        if key not in node:
            raise InputError(f"rule is missing {key!r}", where, node.line)
    rid = node["id"]
    if not isinstance(rid, str) or not ID_RE.match(rid):
        raise InputError(f"rule id {rid!r} must be lower-case letters, digits, . _ -", where, node.line_of("id"))
    severity = node["severity"]
    if severity not in SEVERITIES:
        raise InputError(f"severity {severity!r} is not one of {', '.join(SEVERITIES)}", where,
                         node.line_of("severity"))
    if "fleet" in node:
        for key in ("when", "select", "item", "evidence"):
            if key in node:
                raise InputError(f"a fleet rule takes no {key!r} (use fleet.where to choose hosts; its evidence is "
                                 "the value and the hosts that hold it)", where, node.line_of(key))
    elif "when" not in node and "select" not in node:
        raise InputError("rule needs a condition: `when` (host-level) and/or `select` (one finding per item), "
                         "or `fleet` (over all hosts)", where, node.line)
    tags = node.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InputError("'tags' must be a list of strings", where, node.line_of("tags"))

    reads = Reads()
    when = select = item_expr = None
    item_spec: FactSpec | None = None
    when_paths: set[str] = set()
    if "when" in node:
        when, _, r = _compile_expr(node["when"], "when", node, pack, None)
        reads.merge(r)
        when_paths = r.paths
    if "select" in node:
        select, result, r = _compile_expr(node["select"], "select", node, pack, None, used=False)
        reads.merge(r)
        item_spec = element(result) if result is not None and result.type == "list" else result
        if result is not None and result.type != "list":
            reads.use(result)  # one match, the value itself
        item_spec = item_spec or FREE_ITEM
    item_key = item_spec.key if item_spec is not None else None
    if item_key and item_spec is not None and item_key in item_spec.children:
        reads.note(item_spec.children[item_key].path)  # the item is named by its row key
    if "item" in node:
        if select is None:
            raise InputError("'item' needs 'select' (it names the matched item)", where, node.line_of("item"))
        item_expr, _, r = _compile_expr(node["item"], "item", node, pack, item_spec)
        reads.merge(r)
    evidence: list[tuple[str, Any]] = []
    ev = node.get("evidence") or LineDict()
    if not isinstance(ev, LineDict):
        raise InputError("'evidence' must be a mapping of name: JMESPath expression", where, node.line_of("evidence"))
    for name in ev:
        compiled, _, r = _compile_expr(ev[name], name, ev, pack, item_spec)
        reads.merge(r)
        evidence.append((str(name), compiled))
    fleet = None
    if "fleet" in node:
        fleet, r = _compile_fleet(node["fleet"], node, pack)
        reads.merge(r)
        item_spec = FREE_ITEM
    if not evidence and select is None and fleet is None:  # a host-level rule shows the facts its condition read
        evidence = [(p, jmespath.compile(p)) for p in sorted(when_paths) if _plain_path(p)]
    if not evidence and select is not None and item_spec is not None:
        reads.use(item_spec)  # the evidence is the whole match
    title_src = node["title"]
    if not isinstance(title_src, str) or not title_src.strip():
        raise InputError("'title' must be a non-empty string (a jinja2 template)", where, node.line_of("title"))
    try:
        title, r = compile_title(title_src, root_spec(item_spec), params=pack.params,
                                 evidence=[n for n, _ in evidence] if (evidence or select is None) and fleet is None
                                 else None)
    except TemplateError as exc:
        raise InputError(str(exc), where, _title_line(where, node.line_of("title"), exc.lineno)) from None
    reads.merge(r)
    leads_to, leads_to_lines = _leads_to(node, where)
    link = None
    if "link" in node:
        link_src = node["link"]
        if not isinstance(link_src, str) or not link_src.strip():
            raise InputError("'link' must be a non-empty string (a jinja2 template, like title)", where,
                             node.line_of("link"))
        try:
            link, r = compile_title(link_src, root_spec(item_spec), params=pack.params,
                                    evidence=[n for n, _ in evidence] if evidence or select is None else None)
        except TemplateError as exc:
            raise InputError(str(exc).replace("title template", "link template"), where,
                             _title_line(where, node.line_of("link"), exc.lineno)) from None
        reads.merge(r)

    areas = set(reads.areas)
    if reads.whole_facts or "*" in reads.roots:
        areas |= set(fact_tree().children["facts"].children)
    shapes = area_shapes(reads.paths, reads.bases, areas, reads.whole_facts or "*" in reads.roots)
    return Rule(
        id=rid, pack=pack.name, severity=severity, name=_str(node, "name", where, title_src.strip()), title=title,
        description=_str(node, "description", where).strip(), remediation=_str(node, "remediation", where).strip(),
        tags=tuple(tags), when=when, select=select, item_expr=item_expr, item_key=item_key,
        evidence=tuple(evidence), areas=frozenset(areas), reads=_area_keys(reads, areas),
        shapes=shapes,
        roots=frozenset(reads.roots - {"facts", "item"}),
        params=dict(pack.params), source=where, line=node.line, leads_to=leads_to, leads_to_lines=leads_to_lines,
        link=link, fleet=fleet, root_keys=_root_keys(reads),
    )


def _leads_to(node: LineDict, where: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """`leads_to: [rule ids]` → (ids, line of each); the ids are checked once every pack is loaded."""
    value = node.get("leads_to")
    if value is None:
        return (), ()
    if not isinstance(value, LineList):
        raise InputError("'leads_to' must be a list of rule ids", where, node.line_of("leads_to"))
    ids, lines = [], []
    for i, rid in enumerate(value):
        line = value.line_of(i)
        if not isinstance(rid, str) or not ID_RE.match(rid):
            raise InputError(f"leads_to: {rid!r} is not a rule id", where, line)
        if rid in ids:
            raise InputError(f"leads_to: {rid!r} is listed twice", where, line)
        ids.append(rid)
        lines.append(line)
    return tuple(ids), tuple(lines)


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


def _compile_fleet(spec: Any, node: LineDict, pack: Pack) -> tuple[FleetSpec, Reads]:
    """`fleet: {unique: PATH [, within: LABEL]}` or `{agree: PATH, within: LABEL}` (+ optional `where`)."""
    where, line = pack.source, node.line_of("fleet")
    if not isinstance(spec, LineDict):
        raise InputError("'fleet' must be a mapping: {unique: PATH} or {agree: PATH, within: LABEL}", where, line)
    reject_unknown_keys(spec, FLEET_KEYS, where, "fleet")
    kinds = [k for k in ("unique", "agree") if k in spec]
    if len(kinds) != 1:
        raise InputError("'fleet' needs exactly one of `unique: PATH` or `agree: PATH`", where, line)
    kind = kinds[0]
    within = spec.get("within")
    if within is not None and (not isinstance(within, str) or not re.fullmatch(r"[A-Za-z0-9_:./-]{1,128}", within)):
        raise InputError("fleet.within must be a label name (az, az_id, ami_id, cluster, …)", where,
                         spec.line_of("within"))
    if kind == "agree" and within is None:
        raise InputError("fleet.agree needs `within: LABEL` (the group whose hosts must agree)", where, line)
    expr, _, reads = _compile_expr(spec[kind], kind, spec, pack, None)
    cond = None
    if "where" in spec:
        cond, _, r = _compile_expr(spec["where"], "where", spec, pack, None)
        reads.merge(r)
    return FleetSpec(kind, str(spec[kind]), expr, within, cond), reads


def load_rules(dirs: Iterable[str | Path] = (), builtin: bool = True,
               overrides: Iterable[Override] = ()) -> RuleSet:
    """Load, validate and compile rule packs; any problem is an InputError naming the file and line."""
    files = rule_files(dirs, builtin)
    packs: dict[str, Pack] = {}
    for path in files:
        pack = _read_pack(path)
        if pack.name in packs:
            raise InputError(f"pack {pack.name!r} is already defined in {packs[pack.name].source}", pack.source,
                             pack.line)
        packs[pack.name] = pack
    _apply_overrides(packs, overrides)
    rules: list[Rule] = []
    seen: dict[str, Rule] = {}
    for pack in packs.values():
        for i, node in enumerate(pack.raw_rules):
            rule = _compile_rule(node, pack, i)
            if rule.id in seen:
                other = seen[rule.id]
                raise InputError(f"rule id {rule.id!r} is already defined at {other.source}:{other.line}",
                                 rule.source, rule.line)
            seen[rule.id] = rule
            rules.append(rule)
    check_chains(rules)
    return RuleSet(rules, packs, [str(f) for f in files])
