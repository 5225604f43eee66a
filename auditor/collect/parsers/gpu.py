"""NVIDIA GPUs as the PCI bus, the driver and /sys/module see them (the `gpu` section)."""

from __future__ import annotations

from ...facttypes import Gpu
from ..sections import UnparsableOutput, to_int


def parse_gpu(text: str) -> Gpu:
    values: dict[str, str] = {}
    modules: list[str] = []
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if not eq:
            if line.strip():
                raise UnparsableOutput(f"gpu section line {line[:60]!r} is not key=value")
            continue
        if key == "module":
            modules.append(value.strip())
        else:
            values[key] = value.strip()
    counts = {k: to_int(values.get(k)) for k in ("pci_gpus", "pci_nvswitches", "driver_gpus", "infiniband_devices")}
    for key in ("pci_gpus", "pci_nvswitches", "infiniband_devices"):
        if counts[key] is None:
            raise UnparsableOutput(f"gpu section: {key} missing or not a number")
    gsp = values.get("gsp") or None
    return {
        "pci_gpus": counts["pci_gpus"],
        "pci_nvswitches": counts["pci_nvswitches"],
        "driver_gpus": counts["driver_gpus"],
        "infiniband_devices": counts["infiniband_devices"],
        "module_version": values.get("module_version") or None,
        "modules": modules,
        "gsp_firmware": gsp.split(":", 1)[1].strip() if gsp and ":" in gsp else gsp,
    }
