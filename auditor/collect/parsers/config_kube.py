"""The container runtime's and the kubelet's configuration: containerd's TOML (v1, v2 and v3 layouts, conf.d
imports), docker's daemon.json, the kubelet's file (where its unit's --config points, else the usual paths, with
config.json.d drop-ins) under the flags its unit declares, and the CNI configurations."""

from __future__ import annotations

import posixpath
import re
import shlex
from fnmatch import fnmatchcase

from ...facttypes import ConfigCni, ConfigContainerd, ConfigDocker, ConfigKubelet
from ..config_files import KUBELET_DEFAULTS
from .config_system import UnitConfig
from .config_text import SCALARS, File, as_text, boolean, deep_merge, dig, json_doc, toml_doc, yaml_doc


# --- containerd ------------------------------------------------------------------------------------------
def containerd(files: list[File]) -> ConfigContainerd:
    out: ConfigContainerd = {"path": None, "version": None, "systemd_cgroup": None, "default_runtime_name": None,
                           "runtimes": [], "enable_cdi": None}
    main = next((f for f in files if f.path == "/etc/containerd/config.toml"), None)
    if main is None:
        return out
    out["path"] = main.path
    doc = toml_doc(main)
    if doc is None:
        return out
    listed = doc.get("imports")
    imports = [i for i in listed if isinstance(i, str)] if isinstance(listed, list) else []
    for f in sorted((f for f in files if f.kind == "containerd" and f is not main), key=lambda f: f.path):
        if any(fnmatchcase(f.path, pattern) for pattern in imports):
            more = toml_doc(f)
            doc = deep_merge(doc, more) if more is not None else doc
    declared = doc.get("version")
    version = declared if isinstance(declared, int) else 1
    out["version"] = version
    plugins = doc.get("plugins") if isinstance(doc.get("plugins"), dict) else {}
    if version >= 3:
        runtime = dig(plugins, "io.containerd.cri.v1.runtime")
        cri_containerd = dig(runtime, "containerd")
        cdi = dig(runtime, "enable_cdi")
    else:
        cri = dig(plugins, "io.containerd.grpc.v1.cri") if version == 2 else dig(plugins, "cri")
        cri_containerd = dig(cri, "containerd")
        cdi = dig(cri, "enable_cdi")
        if version == 1 and isinstance(v1_cgroup := dig(cri, "systemd_cgroup"), bool):
            out["systemd_cgroup"] = v1_cgroup
    default = dig(cri_containerd, "default_runtime_name")
    out["default_runtime_name"] = default if isinstance(default, str) else None
    runtimes = dig(cri_containerd, "runtimes")
    out["runtimes"] = sorted(runtimes) if isinstance(runtimes, dict) else []
    chosen = dig(runtimes, default if isinstance(default, str) else "runc", "options", "SystemdCgroup")
    if isinstance(chosen, bool):
        out["systemd_cgroup"] = chosen
    out["enable_cdi"] = cdi if isinstance(cdi, bool) else None
    return out


def docker(files: list[File]) -> ConfigDocker:
    out: ConfigDocker = {"path": None, "cgroup_driver": None, "default_runtime": None, "runtimes": [],
                           "log_driver": None, "log_max_size": None}
    f = next((f for f in files if f.kind == "docker"), None)
    if f is None:
        return out
    out["path"] = f.path
    doc = json_doc(f)
    if not isinstance(doc, dict):
        if doc is not None:
            f.parse_error = "daemon.json is not a JSON object"
        return out
    for opt in doc.get("exec-opts") or []:
        if isinstance(opt, str) and opt.replace(" ", "").startswith("native.cgroupdriver="):
            out["cgroup_driver"] = opt.split("=", 1)[1].strip()
    out["default_runtime"] = as_text(doc.get("default-runtime"))
    out["runtimes"] = sorted(doc["runtimes"]) if isinstance(doc.get("runtimes"), dict) else []
    out["log_driver"] = as_text(doc.get("log-driver"))
    out["log_max_size"] = as_text(dig(doc, "log-opts", "max-size"))
    return out


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


def kubelet_flags(files: list[File], unit_rows: list[UnitConfig]) -> dict[str, str]:
    row = next((r for r in unit_rows if r.name == "kubelet.service"), None)
    if row is None or not row.exec_start:
        return {}
    env: dict[str, str] = {}
    by_path = {f.path: f for f in files}
    for path in row.environment_files:
        if path in by_path:
            env.update(_env_file(by_path[path]))
    for assignment in row.environment:
        try:
            words = shlex.split(assignment)
        except ValueError:
            words = assignment.split()
        for w in words:
            key, eq, value = w.partition("=")
            if eq:
                env[key] = value
    return flags(_expand(row.exec_start, env)[1:])


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


def _plain_map(value: object) -> dict[str, str] | None:
    """A mapping of scalar settings (`memory: 1Gi`) as text; entries that are not scalars are left out."""
    if not isinstance(value, dict):
        return None
    return {str(k): str(v) for k, v in value.items() if isinstance(k, SCALARS) and isinstance(v, SCALARS)}


def kubelet(files: list[File], flag: dict[str, str]) -> ConfigKubelet:
    by_path = {f.path: f for f in files if f.kind == "kubelet"}
    path, found_by = None, None
    named = flag.get("config")
    if named and named in by_path:
        path, found_by = named, "unit"
    else:
        path = next((p for p in KUBELET_DEFAULTS if p in by_path), None)
        found_by = "default" if path else None
    doc: dict[str, object] = {}
    if path:
        f = by_path[path]
        parsed = json_doc(f) if path.endswith(".json") else yaml_doc(f)
        if isinstance(parsed, dict):
            doc = parsed
        elif parsed is not None:
            f.parse_error = "not a mapping"
        for drop in sorted((f for f in files if f.kind == "kubelet" and f.path.startswith(
                posixpath.dirname(path) + "/config.json.d/")), key=lambda f: f.name):
            more = json_doc(drop)
            if isinstance(more, dict):
                doc = deep_merge(doc, more)
    swap = dig(doc, "memorySwap", "swapBehavior")
    fail_swap = boolean(flag["fail-swap-on"]) if "fail-swap-on" in flag else doc.get("failSwapOn")
    return {
        "path": path, "found_by": found_by,
        "cgroup_driver": flag.get("cgroup-driver") or as_text(doc.get("cgroupDriver")),
        "resolv_conf": flag.get("resolv-conf") if "resolv-conf" in flag else as_text(doc.get("resolvConf")),
        "fail_swap_on": fail_swap if isinstance(fail_swap, bool) else None,
        "memory_swap_behavior": as_text(swap),
        "system_reserved": _map_flag(flag.get("system-reserved")) or _plain_map(doc.get("systemReserved")) or {},
        "kube_reserved": _map_flag(flag.get("kube-reserved")) or _plain_map(doc.get("kubeReserved")) or {},
        "eviction_hard": _map_flag(flag.get("eviction-hard"), "<") or _plain_map(doc.get("evictionHard")) or {},
        "container_log_max_size": as_text(doc.get("containerLogMaxSize")),
        "flags": flag,
    }


def cni(files: list[File]) -> ConfigCni:
    mine = sorted((f for f in files if f.kind == "cni"), key=lambda f: f.name)
    plugins: list[str] = []
    for f in mine:
        if not f.name.endswith((".conf", ".conflist", ".json")):
            continue
        doc = json_doc(f)
        listed = doc.get("plugins") if isinstance(doc, dict) else None
        entries: list[object] = listed if isinstance(listed, list) else [doc]
        for entry in entries:
            kind = entry.get("type") if isinstance(entry, dict) else None
            if isinstance(kind, str) and kind not in plugins:
                plugins.append(kind)
    return {"files": [f.name for f in mine], "plugins": plugins}
