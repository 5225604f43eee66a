"""Wheels for installing ami-auditor as users do (a fresh venv, pip, a wheel file) with no index.

Tests and fleet hosts reach no package index, so the runtime dependencies come from this machine's
installed distributions, each packed back into the wheel it was installed from (its files as listed
in RECORD, its WHEEL tags, a new RECORD). pip then resolves ami-auditor's real requirements against
this directory (`--no-index --find-links`), exactly as it would against an index.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "ami-auditor"


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements(name: str = PROJECT) -> set[str]:
    """The installed distributions `name` needs at run time (transitively; markers for other platforms and
    extras left out), by normalised name, `name` itself excluded."""
    seen: set[str] = set()

    def walk(dist: str) -> None:
        for req in metadata.requires(dist) or []:
            spec, _, marker = req.partition(";")
            if "extra ==" in marker:
                continue
            dep = re.match(r"[A-Za-z0-9._-]+", spec.strip())
            if not dep or _key(dep[0]) in seen:
                continue
            try:
                metadata.distribution(dep[0])
            except metadata.PackageNotFoundError:
                continue  # an optional dependency for another platform
            seen.add(_key(dep[0]))
            walk(dep[0])

    walk(name)
    seen.discard(_key(name))
    return seen


def project_wheel(dest: Path) -> Path:
    """Build ami-auditor's wheel from this checkout into `dest` (pip's own file name kept)."""
    dest.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return next(dest.glob("ami_auditor-*.whl"))


def _wheel_name(dist: metadata.Distribution) -> str:
    tags = [line.split(":", 1)[1].strip() for line in (dist.read_text("WHEEL") or "").splitlines()
            if line.startswith("Tag:")]
    if not tags:
        raise RuntimeError(f"{dist.metadata['Name']} was not installed from a wheel: cannot pack it back")
    parts = [sorted({t.split("-")[i] for t in tags}) for i in range(3)]
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    return f"{name}-{dist.version}-{'-'.join('.'.join(p) for p in parts)}.whl"


def repack(name: str, dest: Path) -> Path:
    """Pack the installed distribution `name` back into a wheel in `dest`."""
    dist = metadata.distribution(name)
    out = dest / _wheel_name(dist)
    if out.exists():
        return out
    record: list[tuple[str, str, str]] = []
    tmp = out.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as zf:
        for file in dist.files or []:
            path = file.as_posix()
            if (".." in file.parts or "__pycache__" in file.parts or file.name == "RECORD"
                    or path.endswith((".dist-info/INSTALLER", ".dist-info/REQUESTED", ".dist-info/direct_url.json"))):
                continue
            src = Path(str(dist.locate_file(file)))
            if not src.is_file():
                continue
            data = src.read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append((path, f"sha256={digest}", str(len(data))))
            zf.writestr(path, data)
        info = next(p for p, _, _ in record if p.endswith(".dist-info/METADATA")).rsplit("/", 1)[0]
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows([*record, (f"{info}/RECORD", "", "")])
        zf.writestr(f"{info}/RECORD", text.getvalue())
    tmp.rename(out)
    return out


def wheelhouse(dest: Path) -> Path:
    """`dest` filled with ami-auditor's wheel (built from this checkout) and its dependencies' wheels;
    returns the ami-auditor wheel."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in sorted(runtime_requirements()):
        repack(name, dest)
    return project_wheel(dest)
