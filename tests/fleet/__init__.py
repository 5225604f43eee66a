"""The real test fleet: systemd-nspawn hosts on overlays of a debootstrapped Debian roots."""

from .fleet import (
    AZ_B_HOSTS,
    EXTRA_UNIT,
    RELEASE_FLEET,
    SCENARIO,
    Fleet,
    Host,
    HostSpec,
    combined_inventory,
    extra_hosts,
    release_hosts,
    unavailable_reason,
)

__all__ = ["AZ_B_HOSTS", "EXTRA_UNIT", "RELEASE_FLEET", "SCENARIO", "Fleet", "Host", "HostSpec",
           "combined_inventory", "extra_hosts", "release_hosts", "unavailable_reason"]
