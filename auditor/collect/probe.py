"""The probe script and its arguments (binary names/paths, validated: never interpolated)."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from ..errors import InputError
from ..models import ProbeRequest
from ..options import DEFAULT_BINARIES as OPTIONS_DEFAULT_BINARIES
from ..probeargs import CLEAN_PATH, DEEP_CPU_FLAG, EXEC_VERSIONS_FLAG, NAME
from .framing import new_nonce, with_nonce

DEFAULT_BINARIES = OPTIONS_DEFAULT_BINARIES  # the CLI's default `--binary` list (options.py, a neutral module)

_NAME = re.compile(rf"^{NAME}$")
_PATH = re.compile(rf"^{CLEAN_PATH}$")


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


def probe_args(binaries: list[str], exec_versions: bool = False, deep_cpu: bool = False) -> list[str]:
    """The probe's argument list: the opt-in flags (`--exec-versions`, `--deep-cpu`) before the validated
    binaries."""
    flags = [flag for flag, on in ((EXEC_VERSIONS_FLAG, exec_versions), (DEEP_CPU_FLAG, deep_cpu)) if on]
    return flags + list(binaries)


def probe_request(binaries: list[str] | tuple[str, ...], exec_versions: bool = False, deep_cpu: bool = False,
                  nonce: str | None = None) -> ProbeRequest:
    """The typed request for one probe run: validated binaries, the opt-in flags, a fresh nonce (or the
    given one) and the script framed with it."""
    names = tuple(validate_binaries(list(binaries)))
    run_nonce = nonce or new_nonce()
    return ProbeRequest(script=with_nonce(probe_script(), run_nonce), nonce=run_nonce, binaries=names,
                        exec_versions=exec_versions, deep_cpu=deep_cpu,
                        argv=tuple(probe_args(list(names), exec_versions, deep_cpu)))
