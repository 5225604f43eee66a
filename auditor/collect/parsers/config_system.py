"""The host's own configuration: sysctl.d as systemd-sysctl applies it, networkd.conf and .link files with
drop-ins and directory precedence, unit files, apt.conf.d merged, dnf-automatic and yum-cron, resolv.conf and
modules-load.d."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from ...facttypes import (
    ConfigDnfAutomatic,
    ConfigLinksRow,
    ConfigNetworkd,
    ConfigResolvConf,
    ConfigUnitsRow,
    ConfigYumCron,
)
from ..config_files import SYSTEMD_DIRS, UNIT_DIRS, UNITS
from .config_text import File, boolean, by_precedence, dir_rank, ini

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


def networkd(files: list[File]) -> ConfigNetworkd:
    mains = [f for f in files if f.name == "networkd.conf"]
    main = sorted(mains, key=lambda f: dir_rank(f.path, SYSTEMD_DIRS))[:1]
    dropins = by_precedence([f for f in files if f.name != "networkd.conf"])
    found: dict[str, bool | None] = {}
    for f in main + dropins:
        for section, key, value in ini(f.lines):
            if section == "Network":
                found[key] = boolean(value)
    return {"manage_foreign_routes": found.get("ManageForeignRoutes"),
            "manage_foreign_routing_policy_rules": found.get("ManageForeignRoutingPolicyRules"),
            "manage_foreign_nexthops": found.get("ManageForeignNextHops")}


def links(files: list[File]) -> list[ConfigLinksRow]:
    """Each .link name in effect, with the drop-ins (NAME.link.d/*.conf from every directory) applied."""
    units = by_precedence([f for f in files if f.name.endswith(".link")])
    dropins = [f for f in files if not f.name.endswith(".link")]
    rows: list[ConfigLinksRow] = []
    for unit in units:
        mine = by_precedence([f for f in dropins if posixpath.basename(posixpath.dirname(f.path)) == unit.name + ".d"])
        set_to: dict[tuple[str, str], str | None] = {}  # the last assignment wins
        for f in [unit, *mine]:
            for section, key, value in ini(f.lines):
                set_to[(section, key)] = value or None
        rows.append({"name": unit.name, "path": unit.path, "match_original_name": set_to.get(("Match", "OriginalName")),
                     "match_driver": set_to.get(("Match", "Driver")), "match_type": set_to.get(("Match", "Type")),
                     "match_kind": set_to.get(("Match", "Kind")),
                     "mac_address_policy": set_to.get(("Link", "MACAddressPolicy"))})
    return rows


@dataclass
class UnitConfig:
    """One unit as its fragment and drop-ins set it; the environment feeds the kubelet's flags (config_kube.py)."""

    name: str
    path: str
    dropins: list[str]
    exec_start: str | None = None
    limit_nofile: str | None = None
    tasks_max: str | None = None
    environment: list[str] = field(default_factory=list)
    environment_files: list[str] = field(default_factory=list)

    def row(self) -> ConfigUnitsRow:
        return {"name": self.name, "path": self.path, "dropins": self.dropins, "exec_start": self.exec_start,
                "limit_nofile": self.limit_nofile, "tasks_max": self.tasks_max}


def units(files: list[File]) -> list[UnitConfig]:
    rows = []
    for name in (f"{u}.service" for u in UNITS):
        frags = sorted((f for f in files if f.name == name), key=lambda f: dir_rank(f.path, UNIT_DIRS))
        if not frags:
            continue
        dropins = by_precedence([f for f in files if posixpath.basename(posixpath.dirname(f.path)) == name + ".d"],
                                UNIT_DIRS)
        row = UnitConfig(name, frags[0].path, [f.path for f in dropins])
        for f in [frags[0], *dropins]:
            for section, key, value in ini(f.lines):
                if section == "Service" and key == "ExecStart":
                    row.exec_start = value or None  # an empty ExecStart= resets the list
                elif section == "Service" and key == "LimitNOFILE":
                    row.limit_nofile = value or None
                elif section == "Service" and key == "TasksMax":
                    row.tasks_max = value or None
                elif section == "Service" and key == "Environment":
                    row.environment.append(value)
                elif section == "Service" and key == "EnvironmentFile":
                    row.environment_files.append(value.lstrip("-"))
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


def dnf_automatic(files: list[File]) -> ConfigDnfAutomatic:
    f = next((f for f in files if f.kind == "dnf-automatic"), None)
    if f is None:
        return {"path": None, "apply_updates": None, "upgrade_type": None}
    return {"path": f.path, "apply_updates": boolean(_ini_value(f, "commands", "apply_updates") or "no"),
            "upgrade_type": _ini_value(f, "commands", "upgrade_type") or "default"}


def yum_cron(files: list[File]) -> ConfigYumCron:
    f = next((f for f in files if f.kind == "yum-cron"), None)
    if f is None:
        return {"path": None, "apply_updates": None, "update_cmd": None}
    return {"path": f.path, "apply_updates": boolean(_ini_value(f, "commands", "apply_updates") or "no"),
            "update_cmd": _ini_value(f, "commands", "update_cmd") or "default"}


# --- resolv.conf, CNI, modules-load.d ----------------------------------------------------------------------

def resolv(files: list[File], link: str | None) -> ConfigResolvConf:
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
