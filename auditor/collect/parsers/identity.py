"""Host identity: hostname, cloud-init instance data, IMDSv2 answers, uptime."""

from __future__ import annotations

import contextlib
import json
import math

from ...snapshotdoc import HostInfo
from ..sections import Section, kv_lines


def _obj(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _get(doc: dict[str, object], key: str) -> object:
    """`doc[key]` under either spelling cloud-init has used: `meta_data`/`ami_id` (20.1 and later) or
    `meta-data`/`ami-id` (18.4, and the IMDS names the EC2 datasource keeps)."""
    value = doc.get(key)
    return value if value is not None else doc.get(key.replace("_", "-"))


def _cloudinit(text: str) -> dict[str, str | None]:
    """instance-data.json; any shape a host prints (a list, numbers, 10,000 digits, deep nesting) is tolerated."""
    try:
        doc = _obj(json.loads(text) if text.strip() else {})
    except (ValueError, RecursionError):  # JSONDecodeError, the int digit limit, nesting too deep
        return {}
    v1 = _obj(doc.get("v1"))
    meta = _obj(_get(_obj(doc.get("ds")), "meta_data"))
    placement = _obj(meta.get("placement"))
    found = {
        "instance_id": _get(v1, "instance_id") or _get(meta, "instance_id"),
        "ami_id": _get(meta, "ami_id") or _get(v1, "image_id"),
        "az": _get(v1, "availability_zone") or _get(placement, "availability_zone"),
        "az_id": _get(placement, "availability_zone_id"),
        "region": _get(v1, "region") or _get(placement, "region"),
        "instance_type": _get(meta, "instance_type") or _get(v1, "instance_type"),
        "cloud": _get(v1, "cloud_name"),
    }
    return {k: v if isinstance(v, str) else None for k, v in found.items()}  # identity facts are strings


def _imds(text: str) -> dict[str, str | None]:
    kv = kv_lines(text)
    return {
        "instance_id": kv.get("instance-id"),
        "ami_id": kv.get("ami-id"),
        "az": kv.get("placement/availability-zone"),
        "az_id": kv.get("placement/availability-zone-id"),
        "region": kv.get("placement/region"),
        "instance_type": kv.get("instance-type"),
    }


def imds_instance_id(sections: dict[str, Section]) -> str | None:
    """The instance id IMDS answered on the host (live, unlike cloud-init's cache), when it answered."""
    imds = sections.get("imds")
    return _imds(imds.body)["instance_id"] or None if imds is not None and not imds.problem else None


def parse_host(sections: dict[str, Section]) -> HostInfo:
    """Merge identity sources; IMDS (live) wins over cloud-init's cached instance data.

    A section marked as tampered with (repeated) is ignored."""
    sections = {name: s for name, s in sections.items() if not s.problem}
    ident = kv_lines(sections["identity"].body) if "identity" in sections else {}
    uptime_s = None
    up = ident.get("uptime", "").split()
    if up:
        with contextlib.suppress(ValueError):
            uptime_s = float(up[0]) if math.isfinite(float(up[0])) else None  # no NaN in JSON
    image = kv_lines(ident.get("image_id_file", "").replace('" ', '"\n'))
    cloud: dict[str, str] = {}
    for source in ("cloudinit", "imds"):
        if source in sections:
            parsed = _cloudinit(sections[source].body) if source == "cloudinit" else _imds(sections[source].body)
            cloud.update({k: v for k, v in parsed.items() if v})
    az = cloud.get("az")
    return {
        "hostname": ident.get("hostname") or None,
        "machine_id": ident.get("machine_id") or None,
        "boot_id": ident.get("boot_id") or None,
        "uptime_s": uptime_s,
        "container": ident.get("container", "").strip() or None,
        "image_name": (image.get("image_name") or "").strip('"') or None,
        "instance_id": cloud.get("instance_id"),
        "ami_id": cloud.get("ami_id"),
        "az": az,
        "az_id": cloud.get("az_id"),
        "region": cloud.get("region") or (az[:-1] if az else None),
        "instance_type": cloud.get("instance_type"),
        "cloud": cloud.get("cloud"),
    }
