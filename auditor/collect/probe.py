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

# One path segment: shell-inert characters, never `.` or `..` (`...` or `.hidden` are ordinary names).
SEGMENT = r"(?:[A-Za-z0-9_+-][A-Za-z0-9._+-]*|\.[A-Za-z0-9_+-][A-Za-z0-9._+-]*|\.\.[A-Za-z0-9._+-]+)"
NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]*"
CLEAN_PATH = rf"(?:/{SEGMENT})+"  # absolute, no `//`, no trailing `/`, no `.`/`..` segments
_NAME = re.compile(rf"^{NAME}$")
_PATH = re.compile(rf"^{CLEAN_PATH}$")
EXEC_VERSIONS_FLAG = "--exec-versions"


@lru_cache(maxsize=1)
def probe_script() -> str:
    """The static probe (auditor/collect/probe.sh)."""
    return resources.files("auditor.collect").joinpath("probe.sh").read_text(encoding="utf-8")


def validate_binaries(names: list[str] | tuple[str, ...]) -> list[str]:
    """Accept plain names (`kubelet`) or clean absolute paths (`/opt/bin/kubelet`: no `.`/`..` segments,
    no `//`, no trailing `/`) only; duplicates are dropped."""
    out: list[str] = []
    for name in names:
        ok = (len(name) <= 128 and _NAME.match(name)) or (len(name) <= 1024 and _PATH.match(name))
        if not ok:
            raise InputError(f"binary {name!r} is neither a plain name nor a clean absolute path")
        if name not in out:
            out.append(name)
    return out


def probe_args(binaries: list[str], exec_versions: bool = False) -> list[str]:
    """The probe's argument list: `--exec-versions` (opt-in) before the validated binaries."""
    return ([EXEC_VERSIONS_FLAG] if exec_versions else []) + list(binaries)
