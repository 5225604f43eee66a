"""The real test fleet: systemd-nspawn hosts on overlays of a debootstrapped Debian root."""

from .fleet import AZ_B_HOSTS, EXTRA_UNIT, SCENARIO, Fleet, Host, HostSpec, extra_hosts, unavailable_reason

__all__ = ["AZ_B_HOSTS", "EXTRA_UNIT", "SCENARIO", "Fleet", "Host", "HostSpec", "extra_hosts",
           "unavailable_reason"]
