"""os-release → os facts."""

from __future__ import annotations

import shlex

from ...facttypes import Os


def parse_os(text: str) -> Os:
    """Parse /etc/os-release (shell-style KEY=value lines, values may be quoted)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if "=" not in line or line.lstrip().startswith("#"):
            continue
        key, raw = line.split("=", 1)
        try:
            parts = shlex.split(raw)
            values[key.strip()] = parts[0] if parts else ""
        except ValueError:
            values[key.strip()] = raw.strip().strip('"')
    return {
        "id": values.get("ID"),
        "id_like": values.get("ID_LIKE"),
        "version_id": values.get("VERSION_ID"),
        # Ubuntu 16.04 images print only UBUNTU_CODENAME
        "version_codename": values.get("VERSION_CODENAME") or values.get("UBUNTU_CODENAME"),
        "pretty_name": values.get("PRETTY_NAME"),
    }
