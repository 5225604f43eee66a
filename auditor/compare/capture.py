"""Capture a baseline from one host: pick the stable facts worth pinning and write readable YAML."""

from __future__ import annotations

import re
import textwrap
from typing import Any

import yaml

from .. import __version__
from ..collect.snapshot import now_iso
from ..factpath import area_of, parse
from ..snapshotdoc import Snapshot
from .baseline import BASELINE_SCHEMA
from .normalize import normalize

# Facts a baseline pins by default (goss-`add` style): configuration, not runtime state or identity.
DEFAULT_FACTS: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in (
    r"^facts\.os\.(id|version_id|version_codename)$",
    r"^facts\.kernel\.(release|machine|cmdline|thp_enabled|thp_defrag|hugepages_total|nvidia_driver)$",
    r"^facts\.kernel\.sysctls\[",
    r"^facts\.systemd\.version$",
    r"^facts\.systemd\.unit_files\[[^\]]+\]\.state$",
    r"^facts\.cgroups\.mode$",
    r"^facts\.cgroups\.v2_controllers\[",
    r"^facts\.binaries\[[^\]]+\]\.(found|path|sha256|package|package_version|version|source_url|source_host)$",
    r"^facts\.ecs\.(config_present|cluster|cluster_configured)$",
    r"^facts\.network\.ena\.(present|version|out_of_tree)$",
    r"^facts\.packages\.manager$",
    r"^facts\.packages\.items\[[^\]]+\]\.version$",
))
# All of them as one pattern: each is anchored at the start, so one match() is any() of their search()es.
_ANY_DEFAULT = re.compile("|".join(f"(?:{p.pattern})" for p in DEFAULT_FACTS))
# Unit file states that are not a configuration choice (nothing enables or disables them).
NOT_A_CHOICE = frozenset({"static", "alias", "generated", "transient", "indirect"})
DEFAULT_COMPLETE = ("facts.systemd.unit_files", "facts.binaries", "facts.packages.items", "facts.kernel.sysctls")
SECTIONS = ("os", "kernel", "systemd", "cgroups", "binaries", "ecs", "network", "packages")

HEADER = """\
# ami-auditor baseline. It reads like a rule pack: each line under `expect` is a fact every host
# must have. Edit freely:
#   - delete a line to stop checking that fact;
#   - allow several values with a list ([a, b]) or a full-match regex ({pattern: 'v1\\.29\\..*'});
#   - `complete` collections are listed in full: a host row they do not list (a new unit file,
#     package, binary or sysctl) is drift; put a glob in `ignore` to skip paths.
# Volatile facts (uptime, restart counters, IPs, hostnames, timestamps…) are never baselined.
"""


def select(flat: dict[str, Any]) -> dict[str, Any]:
    """The default baseline facts of a normalized view (also what `complete` collections compare)."""
    out = {}
    for path, value in flat.items():
        if isinstance(value, tuple) or not _ANY_DEFAULT.match(path):
            continue
        if path.startswith("facts.systemd.unit_files[") and value in NOT_A_CHOICE:
            continue
        out[path] = value
    return out


def capture(snapshot: Snapshot) -> tuple[dict[str, Any], dict[str, Any]]:
    """(source header, expected facts) for a snapshot."""
    host = snapshot.get("host") or {}
    source = {
        "host": snapshot.get("name"),
        "target": snapshot.get("target"),
        "captured_at": now_iso(),
        "snapshot_collected_at": snapshot.get("collected_at"),
        "ami_id": host.get("ami_id") or (snapshot.get("labels") or {}).get("ami_id"),
        "tool_version": __version__,
    }
    return source, select(normalize(snapshot).flat)


class _Dumper(yaml.SafeDumper):
    """Host text (a unit name may hold `\\n`, U+0085, U+2028) as one double-quoted, escaped line: plain or
    single-quoted it would fold across lines that the indented `expect:` map cannot hold, or load back changed."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if any(not c.isprintable() for c in value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_str(value)


_Dumper.add_representer(str, _str)


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True,
                     width=1 << 16)


def render(source: dict[str, Any], expect: dict[str, Any], unknown: list[str] | None = None) -> str:
    """The baseline YAML text: header comment, source, complete, ignore, then facts by section."""
    lines = [HEADER, _dump({"baseline": BASELINE_SCHEMA}), _dump({"source": source}),
             _dump({"complete": [c for c in DEFAULT_COMPLETE if area_of(c) not in (unknown or ())]}),
             "ignore: []\n"]
    if unknown:
        lines.append(f"# not captured (collector failed on the source host): {', '.join(unknown)}\n")
    lines.append("expect:\n")
    order = {name: i for i, name in enumerate(SECTIONS)}
    paths = sorted(expect, key=lambda p: (order.get(area_of(p), len(order)), parse(p).collection or "", p))
    current = None
    for path in paths:
        if area_of(path) != current:
            current = area_of(path)
            lines.append(f"  # {current}\n")
        lines.append(textwrap.indent(_dump({path: expect[path]}), "  "))  # every line: `? key` / `: value` too
    return "".join(lines)
