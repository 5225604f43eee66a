"""The probe script and its arguments (binary names/paths, validated: never interpolated)."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from ..errors import InputError

DEFAULT_BINARIES: tuple[str, ...] = (
    "kubelet",
    "containerd",
    "dockerd",
    "runc",
    "ecs-init",
    "nvidia-smi",
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_PATH = re.compile(r"^/[A-Za-z0-9._+/-]{1,1023}$")


@lru_cache(maxsize=1)
def probe_script() -> str:
    """The static probe (auditor/collect/probe.sh)."""
    return resources.files("auditor.collect").joinpath("probe.sh").read_text(encoding="utf-8")


def validate_binaries(names: list[str] | tuple[str, ...]) -> list[str]:
    """Accept plain names (`kubelet`) or absolute paths (`/opt/bin/kubelet`) only."""
    out = []
    for name in names:
        if not (_NAME.match(name) or (_PATH.match(name) and "/../" not in name and not name.endswith("/.."))):
            raise InputError(f"binary {name!r} is neither a plain name nor a clean absolute path")
        out.append(name)
    return out
