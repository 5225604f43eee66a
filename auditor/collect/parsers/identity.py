"""Host identity: hostname, cloud-init instance data, IMDSv2 answers, uptime."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

from ..sections import Section, kv_lines


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _cloudinit(text: str) -> dict[str, Any]:
    """instance-data.json; any shape a host prints (a list, numbers, 10,000 digits, deep nesting) is tolerated."""
    try:
        doc = _obj(json.loads(text) if text.strip() else {})
    except (ValueError, RecursionError):  # JSONDecodeError, the int digit limit, nesting too deep
        return {}
    v1 = _obj(doc.get("v1"))
    meta = _obj(_obj(doc.get("ds")).get("meta_data"))
    placement = _obj(meta.get("placement"))
    found = {
        "instance_id": v1.get("instance_id") or meta.get("instance-id"),
        "ami_id": meta.get("ami-id") or v1.get("image_id"),
        "az": v1.get("availability_zone") or placement.get("availability-zone"),
        "az_id": placement.get("availability-zone-id"),
        "region": v1.get("region") or placement.get("region"),
        "instance_type": meta.get("instance-type") or v1.get("instance_type"),
        "cloud": v1.get("cloud_name"),
    }
    return {k: v if isinstance(v, str) else None for k, v in found.items()}  # identity facts are strings


def _imds(text: str) -> dict[str, Any]:
    kv = kv_lines(text)
    return {
        "instance_id": kv.get("instance-id"),
        "ami_id": kv.get("ami-id"),
        "az": kv.get("placement/availability-zone"),
        "az_id": kv.get("placement/availability-zone-id"),
        "region": kv.get("placement/region"),
        "instance_type": kv.get("instance-type"),
    }


def parse_host(sections: dict[str, Section]) -> dict[str, Any]:
    """Merge identity sources; IMDS (live) wins over cloud-init's cached instance data.

    A section marked as tampered with (repeated) is ignored."""
    sections = {name: s for name, s in sections.items() if not s.problem}
    ident = kv_lines(sections["identity"].body) if "identity" in sections else {}
    host: dict[str, Any] = {
        "hostname": ident.get("hostname") or None,
        "machine_id": ident.get("machine_id") or None,
        "boot_id": ident.get("boot_id") or None,
        "uptime_s": None,
        "image_name": None,
        "instance_id": None,
        "ami_id": None,
        "az": None,
        "az_id": None,
        "region": None,
        "instance_type": None,
        "cloud": None,
    }
    up = ident.get("uptime", "").split()
    if up:
        with contextlib.suppress(ValueError):
            host["uptime_s"] = float(up[0]) if math.isfinite(float(up[0])) else None  # no NaN in JSON
    image = kv_lines(ident.get("image_id_file", "").replace('" ', '"\n'))
    host["image_name"] = (image.get("image_name") or "").strip('"') or None
    for source in ("cloudinit", "imds"):
        if source in sections:
            parsed = _cloudinit(sections[source].body) if source == "cloudinit" else _imds(sections[source].body)
            host.update({k: v for k, v in parsed.items() if v})
    if host["region"] is None and host["az"]:
        host["region"] = host["az"][:-1]
    return host
