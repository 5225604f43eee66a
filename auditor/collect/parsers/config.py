"""Configuration files (the `config` section) parsed as their programs read them (config_system.py for the
host's own, config_kube.py for the container runtime and the kubelet).

A file that is not valid in its format is a fact (`parse_error`), not a failed read; a file the probe could
not read (`failed=`) is that row's error, which fails the area.
"""

from __future__ import annotations

from ...facttypes import Config
from .config_kube import cni, containerd, docker, kubelet, kubelet_flags
from .config_system import (
    apt_periodic,
    dnf_automatic,
    links,
    modules_load,
    networkd,
    resolv,
    sysctl_declared,
    units,
    yum_cron,
)
from .config_text import File, read_files


def parse_config(text: str) -> Config:
    files, extra = read_files(text)

    def of(kind: str) -> list[File]:
        return [f for f in files if f.kind == kind]

    declared, declared_in = sysctl_declared(of("sysctl"))
    unit_rows = units(of("unit"))
    kubelet_facts = kubelet(files, kubelet_flags(files, unit_rows))
    facts: Config = {
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
        "units": [r.row() for r in unit_rows],
        "resolv_conf": resolv(files, extra.get("resolv_link")),
        "cni": cni(files),
        "modules_load": modules_load(files),
    }
    facts["files"] = [f.row() for f in files]  # last: the parsers above note parse errors on the files
    return facts
