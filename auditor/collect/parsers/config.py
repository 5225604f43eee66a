"""Configuration files (the `config` section) parsed as their programs read them: sysctl.d as
systemd-sysctl applies it, networkd.conf and .link files with drop-ins and directory precedence, apt.conf.d
merged, dnf-automatic and yum-cron INI, containerd TOML (v1, v2 and v3 layouts), docker's daemon.json, the
kubelet's configuration (where its unit's --config points, else the usual paths) and flags, unit files,
resolv.conf, CNI configurations and modules-load.d.

A file that is not valid in its format is a fact (`parse_error`), not a failed read; a file the probe could
not read (`failed=`) is that row's error, which fails the area.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import sys
from fnmatch import fnmatchcase
from typing import Any

import yaml

from ..config_files import KUBELET_DEFAULTS, SYSTEMD_DIRS, UNIT_DIRS, UNITS
from ..sections import UnparsableOutput, blocks

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

_TRUE = {"1", "yes", "y", "true", "t", "on"}
_FALSE = {"0", "no", "n", "false", "f", "off"}


def boolean(value: Any) -> bool | None:
    """systemd's and dnf's boolean words (yes/no, true/false, on/off, 1/0); None for anything else."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().strip('"').lower() if value is not None else ""
    return True if word in _TRUE else False if word in _FALSE else None


class File:
    """One file of the section: its kind, path, kept lines and how reading it went."""

    def __init__(self, kind: str, path: str) -> None:
        self.kind = kind
        self.path = path
        self.lines: list[str] = []
        self.truncated = False
        self.error: str | None = None
        self.parse_error: str | None = None

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def row(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "bytes": sum(len(ln) + 1 for ln in self.lines),
                "truncated": self.truncated, "parse_error": self.parse_error, "error": self.error}


def read_files(text: str) -> tuple[list[File], dict[str, str]]:
    """The section's `@ KIND PATH` blocks (`|` lines kept) and its top-level `key=value` lines."""
    files: list[File] = []
    extra: dict[str, str] = {}
    head, _, _ = text.partition("\n@ ")
    for line in ([] if text.startswith("@ ") else head.splitlines()):
        if "=" in line:
            extra[line.split("=", 1)[0]] = line.split("=", 1)[1]
        elif line.strip():
            raise UnparsableOutput(f"config section line {line[:60]!r} is no file block")
    for header, body in blocks(text):
        kind, _, path = header.partition(" ")
        if not kind or not path.startswith("/"):
            raise UnparsableOutput(f"config block header {header[:80]!r} names no kind and path")
        f = File(kind, path)
        for line in body:
            if line.startswith("|"):
                f.lines.append(line[1:])
            elif line == "!truncated":
                f.truncated = True
            elif line.startswith("failed="):
                f.error = line[7:].strip() or "could not be read"
            elif line.startswith("resolv_link="):
                extra["resolv_link"] = line.split("=", 1)[1]
            elif line.strip():
                raise UnparsableOutput(f"config file {path[:80]!r}: line {line[:60]!r} is not file text")
        files.append(f)
    return files, extra


def _dir_rank(path: str, dirs: tuple[str, ...]) -> int:
    for i, d in enumerate(dirs):
        if path.startswith(d + "/"):
            return i
    return len(dirs)


def by_precedence(files: list[File], dirs: tuple[str, ...] = SYSTEMD_DIRS) -> list[File]:
    """One file per name, the one in the earliest directory, in name order (systemd's conf.d rules)."""
    chosen: dict[str, File] = {}
    for f in sorted(files, key=lambda f: _dir_rank(f.path, dirs)):
        chosen.setdefault(f.name, f)
    return [chosen[n] for n in sorted(chosen)]


# --- sysctl.d ---------------------------------------------------------------------------------------------

def sysctl_declared(files: list[File]) -> tuple[dict[str, str], dict[str, str]]:
    """Effective declared values and the file that set each, as systemd-sysctl (then sysctl.conf) applies them."""
    main = [f for f in files if f.path == "/etc/sysctl.conf"]
    ordered = by_precedence([f for f in files if f.path != "/etc/sysctl.conf"]) + main
    values: dict[str, str] = {}
    where: dict[str, str] = {}
    for f in ordered:
        for line in f.lines:
            key, eq, value = line.partition("=")
            if not eq:
                continue
            key = key.strip().lstrip("-").strip().replace("/", ".")
            if key:
                values[key] = " ".join(value.split())
                where[key] = f.path
    return values, where


# --- systemd INI (networkd.conf, .link, units) ------------------------------------------------------------

def ini(lines: list[str]) -> list[tuple[str, str, str]]:
    """systemd-style INI as (section, key, value) in file order; `\\` continues a line."""
    out: list[tuple[str, str, str]] = []
    section = ""
    pending = ""
    for raw in lines:
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif "=" in line:
            key, _, value = line.partition("=")
            out.append((section, key.strip(), value.strip()))
    return out


def networkd(files: list[File]) -> dict[str, Any]:
    mains = [f for f in files if f.name == "networkd.conf"]
    main = sorted(mains, key=lambda f: _dir_rank(f.path, SYSTEMD_DIRS))[:1]
    dropins = by_precedence([f for f in files if f.name != "networkd.conf"])
    out: dict[str, Any] = {"manage_foreign_routes": None, "manage_foreign_routing_policy_rules": None,
                           "manage_foreign_nexthops": None}
    keys = {"ManageForeignRoutes": "manage_foreign_routes",
            "ManageForeignRoutingPolicyRules": "manage_foreign_routing_policy_rules",
            "ManageForeignNextHops": "manage_foreign_nexthops"}
    for f in main + dropins:
        for section, key, value in ini(f.lines):
            if section == "Network" and key in keys:
                out[keys[key]] = boolean(value)
    return out


def links(files: list[File]) -> list[dict[str, Any]]:
    """Each .link name in effect, with the drop-ins (NAME.link.d/*.conf from every directory) applied."""
    units = by_precedence([f for f in files if f.name.endswith(".link")])
    dropins = [f for f in files if not f.name.endswith(".link")]
    rows = []
    for unit in units:
        mine = by_precedence([f for f in dropins if posixpath.basename(posixpath.dirname(f.path)) == unit.name + ".d"])
        row: dict[str, Any] = {"name": unit.name, "path": unit.path, "match_original_name": None, "match_driver": None,
                               "match_type": None, "match_kind": None, "mac_address_policy": None}
        fields = {("Match", "OriginalName"): "match_original_name", ("Match", "Driver"): "match_driver",
                  ("Match", "Type"): "match_type", ("Match", "Kind"): "match_kind",
                  ("Link", "MACAddressPolicy"): "mac_address_policy"}
        for f in [unit, *mine]:
            for section, key, value in ini(f.lines):
                if (section, key) in fields:
                    row[fields[(section, key)]] = value or None
        rows.append(row)
    return rows


def units(files: list[File]) -> list[dict[str, Any]]:
    rows = []
    for name in (f"{u}.service" for u in UNITS):
        frags = sorted((f for f in files if f.name == name), key=lambda f: _dir_rank(f.path, UNIT_DIRS))
        if not frags:
            continue
        dropins = by_precedence([f for f in files if posixpath.basename(posixpath.dirname(f.path)) == name + ".d"],
                                UNIT_DIRS)
        row: dict[str, Any] = {"name": name, "path": frags[0].path, "dropins": [f.path for f in dropins],
                               "exec_start": None, "limit_nofile": None, "tasks_max": None,
                               "_environment": [], "_environment_files": []}
        for f in [frags[0], *dropins]:
            for section, key, value in ini(f.lines):
                if section == "Service" and key == "ExecStart":
                    row["exec_start"] = value or None  # an empty ExecStart= resets the list
                elif section == "Service" and key == "LimitNOFILE":
                    row["limit_nofile"] = value or None
                elif section == "Service" and key == "TasksMax":
                    row["tasks_max"] = value or None
                elif section == "Service" and key == "Environment":
                    row["_environment"].append(value)
                elif section == "Service" and key == "EnvironmentFile":
                    row["_environment_files"].append(value.lstrip("-"))
        rows.append(row)
    return rows


# --- apt.conf ---------------------------------------------------------------------------------------------

_APT_TOKEN = re.compile(r'"(?P<str>[^"]*)"|(?P<punct>[{};])|(?P<word>[^\s{};"]+)')
_APT_IGNORED = re.compile(r"(~|\.disabled|\.bak|\.dpkg-[a-z]+|\.ucf-[a-z]+|\.save|\.orig|\.distUpgrade)$")
_APT_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _apt_text(text: str) -> str:
    """apt.conf text without its comments (`//` and `/* */` outside strings, `#` lines but #clear/#include)."""
    out, i, n, in_str = [], 0, len(text), False
    while i < n:
        c = text[i]
        if c == '"':
            in_str = not in_str
        elif not in_str and text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        elif not in_str and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        elif c == "\n":
            in_str = False
        out.append(c)
        i += 1
    return "\n".join(ln for ln in "".join(out).splitlines() if not ln.lstrip().startswith("#"))


def apt_settings(text: str) -> dict[str, str]:
    """apt.conf syntax (`A::B "v";`, `A { B "v"; };`) → {`a::b`: value} (names are case-insensitive)."""
    out: dict[str, str] = {}
    scope: list[str] = []
    name: str | None = None
    for m in _APT_TOKEN.finditer(_apt_text(text)):
        if m.group("word") is not None:
            name = m.group("word")
        elif m.group("str") is not None:
            if name is not None:
                out["::".join([*scope, name]).lower()] = m.group("str")
            name = None
        elif m.group("punct") == "{":
            scope.append(name or "")
            name = None
        elif m.group("punct") == "}":
            if scope:
                scope.pop()
            name = None
        else:
            name = None
    return out


def apt_periodic(files: list[File]) -> dict[str, str]:
    """APT::Periodic::* after apt reads apt.conf.d (name order, apt's ignored names left out), then apt.conf."""
    parts = sorted((f for f in files if f.path.startswith("/etc/apt/apt.conf.d/")
                    and _APT_NAME.match(f.name) and not _APT_IGNORED.search(f.name)), key=lambda f: f.name)
    main = [f for f in files if f.path == "/etc/apt/apt.conf"]
    merged: dict[str, str] = {}
    for f in parts + main:
        merged.update(apt_settings(f.text))
    prefix = "apt::periodic::"
    canon = {"unattended-upgrade": "Unattended-Upgrade", "update-package-lists": "Update-Package-Lists",
             "enable": "Enable", "download-upgradeable-packages": "Download-Upgradeable-Packages",
             "autocleaninterval": "AutocleanInterval"}
    return {canon.get(k[len(prefix):], k[len(prefix):]): v for k, v in merged.items() if k.startswith(prefix)}


# --- INI (dnf-automatic, yum-cron) --------------------------------------------------------------------------

def _ini_value(f: File, section: str, key: str) -> str | None:
    value = None
    for sec, k, v in ini(f.lines):
        if sec == section and k == key:
            value = v
    return value


def dnf_automatic(files: list[File]) -> dict[str, Any]:
    f = next((f for f in files if f.kind == "dnf-automatic"), None)
    if f is None:
        return {"path": None, "apply_updates": None, "upgrade_type": None}
    return {"path": f.path, "apply_updates": boolean(_ini_value(f, "commands", "apply_updates") or "no"),
            "upgrade_type": _ini_value(f, "commands", "upgrade_type") or "default"}


def yum_cron(files: list[File]) -> dict[str, Any]:
    f = next((f for f in files if f.kind == "yum-cron"), None)
    if f is None:
        return {"path": None, "apply_updates": None, "update_cmd": None}
    return {"path": f.path, "apply_updates": boolean(_ini_value(f, "commands", "apply_updates") or "no"),
            "update_cmd": _ini_value(f, "commands", "update_cmd") or "default"}


# --- containerd ------------------------------------------------------------------------------------------

def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _dig(doc: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(k)
    return doc


def containerd(files: list[File]) -> dict[str, Any]:
    out: dict[str, Any] = {"path": None, "version": None, "systemd_cgroup": None, "default_runtime_name": None,
                           "runtimes": [], "enable_cdi": None}
    main = next((f for f in files if f.path == "/etc/containerd/config.toml"), None)
    if main is None:
        return out
    out["path"] = main.path
    doc = _toml(main)
    if doc is None:
        return out
    imports = [str(i) for i in doc.get("imports") or [] if isinstance(i, str)]
    for f in sorted((f for f in files if f.kind == "containerd" and f is not main), key=lambda f: f.path):
        if any(fnmatchcase(f.path, pattern) for pattern in imports):
            more = _toml(f)
            doc = _merge(doc, more) if more is not None else doc
    version = doc["version"] if isinstance(doc.get("version"), int) else 1
    out["version"] = version
    plugins = doc.get("plugins") if isinstance(doc.get("plugins"), dict) else {}
    if version >= 3:
        runtime = _dig(plugins, "io.containerd.cri.v1.runtime")
        cri_containerd = _dig(runtime, "containerd")
        out["enable_cdi"] = _dig(runtime, "enable_cdi")
    else:
        cri = _dig(plugins, "io.containerd.grpc.v1.cri") if version == 2 else _dig(plugins, "cri")
        cri_containerd = _dig(cri, "containerd")
        out["enable_cdi"] = _dig(cri, "enable_cdi")
        if version == 1 and isinstance(_dig(cri, "systemd_cgroup"), bool):
            out["systemd_cgroup"] = _dig(cri, "systemd_cgroup")
    default = _dig(cri_containerd, "default_runtime_name")
    out["default_runtime_name"] = default if isinstance(default, str) else None
    runtimes = _dig(cri_containerd, "runtimes")
    out["runtimes"] = sorted(runtimes) if isinstance(runtimes, dict) else []
    chosen = _dig(runtimes, default if isinstance(default, str) else "runc", "options", "SystemdCgroup")
    if isinstance(chosen, bool):
        out["systemd_cgroup"] = chosen
    if not isinstance(out["enable_cdi"], bool):
        out["enable_cdi"] = None
    return out


def _toml(f: File) -> dict[str, Any] | None:
    try:
        return tomllib.loads(f.text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        f.parse_error = f"not valid TOML: {str(exc)[:200]}"
        return None


def _json(f: File) -> Any:
    try:
        return json.loads(f.text)
    except (ValueError, RecursionError) as exc:
        f.parse_error = f"not valid JSON: {str(exc)[:200]}"
        return None


def _yaml(f: File) -> Any:
    try:
        return yaml.load(f.text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError) as exc:
        f.parse_error = f"not valid YAML: {' '.join(str(exc).split())[:200]}"
        return None


def docker(files: list[File]) -> dict[str, Any]:
    out: dict[str, Any] = {"path": None, "cgroup_driver": None, "default_runtime": None, "runtimes": [],
                           "log_driver": None, "log_max_size": None}
    f = next((f for f in files if f.kind == "docker"), None)
    if f is None:
        return out
    out["path"] = f.path
    doc = _json(f)
    if not isinstance(doc, dict):
        if doc is not None:
            f.parse_error = "daemon.json is not a JSON object"
        return out
    for opt in doc.get("exec-opts") or []:
        if isinstance(opt, str) and opt.replace(" ", "").startswith("native.cgroupdriver="):
            out["cgroup_driver"] = opt.split("=", 1)[1].strip()
    out["default_runtime"] = _str(doc.get("default-runtime"))
    out["runtimes"] = sorted(doc["runtimes"]) if isinstance(doc.get("runtimes"), dict) else []
    out["log_driver"] = _str(doc.get("log-driver"))
    out["log_max_size"] = _str(_dig(doc, "log-opts", "max-size"))
    return out


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None if value is None else str(value)


# --- kubelet ---------------------------------------------------------------------------------------------

def _env_file(f: File) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in f.lines:
        key, eq, value = line.strip().removeprefix("export ").partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.strip()):
            try:
                words = shlex.split(value)
            except ValueError:
                words = [value]
            out[key.strip()] = " ".join(words)
    return out


def _expand(command: str, env: dict[str, str]) -> list[str]:
    """A unit's ExecStart as systemd splits it: `${VAR}` one word, `$VAR` split on white space."""
    try:
        words = shlex.split(command.lstrip("-@:+!"))
    except ValueError:
        words = command.split()
    out: list[str] = []
    for w in words:
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", w)
        if m:
            out += env.get(m.group(1), "").split()
        else:
            out.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda g: env.get(g.group(1), ""), w))
    return [w for w in out if w]


def flags(words: list[str]) -> dict[str, str]:
    """`--name=value` / `--name value` / `--name` (→ "true") words of a command line."""
    out: dict[str, str] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and len(w) > 2:
            name, eq, value = w[2:].partition("=")
            if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
                value, i = words[i + 1], i + 1
            elif not eq:
                value = "true"
            out[name] = value
        i += 1
    return out


def kubelet_flags(files: list[File], unit_rows: list[dict[str, Any]]) -> dict[str, str]:
    row = next((r for r in unit_rows if r["name"] == "kubelet.service"), None)
    if row is None or not row["exec_start"]:
        return {}
    env: dict[str, str] = {}
    by_path = {f.path: f for f in files}
    for path in row["_environment_files"]:
        if path in by_path:
            env.update(_env_file(by_path[path]))
    for assignment in row["_environment"]:
        try:
            words = shlex.split(assignment)
        except ValueError:
            words = assignment.split()
        for w in words:
            key, eq, value = w.partition("=")
            if eq:
                env[key] = value
    return flags(_expand(row["exec_start"], env)[1:])


def _map_flag(value: str | None, sep: str = "=") -> dict[str, str] | None:
    """`cpu=100m,memory=1Gi` (or `memory.available<100Mi,…` with sep `<`) → a map."""
    if value is None:
        return None
    out = {}
    for part in value.split(","):
        key, found, v = part.partition(sep)
        if found:
            out[key.strip()] = v.strip()
    return out


def _plain_map(value: Any) -> dict[str, str] | None:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else None


def kubelet(files: list[File], flag: dict[str, str]) -> dict[str, Any]:
    by_path = {f.path: f for f in files if f.kind == "kubelet"}
    path, found_by = None, None
    named = flag.get("config")
    if named and named in by_path:
        path, found_by = named, "unit"
    else:
        path = next((p for p in KUBELET_DEFAULTS if p in by_path), None)
        found_by = "default" if path else None
    doc: dict[str, Any] = {}
    if path:
        f = by_path[path]
        parsed = _json(f) if path.endswith(".json") else _yaml(f)
        if isinstance(parsed, dict):
            doc = parsed
        elif parsed is not None:
            f.parse_error = "not a mapping"
        for drop in sorted((f for f in files if f.kind == "kubelet" and f.path.startswith(
                posixpath.dirname(path) + "/config.json.d/")), key=lambda f: f.name):
            more = _json(drop)
            if isinstance(more, dict):
                doc = _merge(doc, more)
    swap = _dig(doc, "memorySwap", "swapBehavior")
    fail_swap = boolean(flag["fail-swap-on"]) if "fail-swap-on" in flag else doc.get("failSwapOn")
    return {
        "path": path, "found_by": found_by,
        "cgroup_driver": flag.get("cgroup-driver") or _str(doc.get("cgroupDriver")),
        "resolv_conf": flag.get("resolv-conf") if "resolv-conf" in flag else _str(doc.get("resolvConf")),
        "fail_swap_on": fail_swap if isinstance(fail_swap, bool) else None,
        "memory_swap_behavior": _str(swap),
        "system_reserved": _map_flag(flag.get("system-reserved")) or _plain_map(doc.get("systemReserved")) or {},
        "kube_reserved": _map_flag(flag.get("kube-reserved")) or _plain_map(doc.get("kubeReserved")) or {},
        "eviction_hard": _map_flag(flag.get("eviction-hard"), "<") or _plain_map(doc.get("evictionHard")) or {},
        "container_log_max_size": _str(doc.get("containerLogMaxSize")),
        "flags": flag,
    }


# --- resolv.conf, CNI, modules-load.d ----------------------------------------------------------------------

def resolv(files: list[File], link: str | None) -> dict[str, Any]:
    f = next((f for f in files if f.kind == "resolv"), None)
    servers: list[str] = []
    search: list[str] = []
    for line in f.lines if f is not None else []:
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            servers.append(words[1])
        elif words and words[0] in ("search", "domain"):
            search = words[1:]
    return {"link": link or None, "nameservers": servers, "search": search}


def cni(files: list[File]) -> dict[str, Any]:
    mine = sorted((f for f in files if f.kind == "cni"), key=lambda f: f.name)
    plugins: list[str] = []
    for f in mine:
        if not f.name.endswith((".conf", ".conflist", ".json")):
            continue
        doc = _json(f)
        entries: list[Any] = doc["plugins"] if isinstance(doc, dict) and isinstance(doc.get("plugins"), list) else [doc]
        for entry in entries:
            kind = entry.get("type") if isinstance(entry, dict) else None
            if isinstance(kind, str) and kind not in plugins:
                plugins.append(kind)
    return {"files": [f.name for f in mine], "plugins": plugins}


def modules_load(files: list[File]) -> list[str]:
    mine = [f for f in files if f.kind == "modules-load"]
    main = [f for f in mine if f.path == "/etc/modules"]
    ordered = by_precedence([f for f in mine if f.path != "/etc/modules"]) + main
    out: list[str] = []
    for f in ordered:
        for line in f.lines:
            words = line.split()
            if words and words[0] not in out:
                out.append(words[0])
    return out


def parse_config(text: str) -> dict[str, Any]:
    files, extra = read_files(text)

    def of(kind: str) -> list[File]:
        return [f for f in files if f.kind == kind]

    declared, declared_in = sysctl_declared(of("sysctl"))
    unit_rows = units(of("unit"))
    kubelet_facts = kubelet(files, kubelet_flags(files, unit_rows))
    facts = {
        "sysctl_declared": declared,
        "sysctl_declared_in": declared_in,
        "networkd": networkd(of("networkd")),
        "links": links(of("link")),
        "apt_periodic": apt_periodic(of("apt")),
        "dnf_automatic": dnf_automatic(files),
        "yum_cron": yum_cron(files),
        "containerd": containerd(of("containerd")),
        "docker": docker(files),
        "kubelet": kubelet_facts,
        "units": [{k: v for k, v in r.items() if not k.startswith("_")} for r in unit_rows],
        "resolv_conf": resolv(files, extra.get("resolv_link")),
        "cni": cni(files),
        "modules_load": modules_load(files),
    }
    facts["files"] = [f.row() for f in files]  # last: the parsers above note parse errors on the files
    return facts
