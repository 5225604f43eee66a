"""The configuration files the `config` section reads, declared once: probe.sh's s_config globs the same
patterns (tests/test_config_files.py checks), the image reader reads them from an unbooted root, and the
parsers apply each kind's precedence rules.

Directories are listed in systemd's precedence order (/etc, /run, /usr/local/lib, /usr/lib, /lib): a file
name in an earlier directory masks the same name in a later one.
"""

from __future__ import annotations

CONF_MAX = 16384  # bytes kept of one file (after comment and blank lines are left out)
GLOB_MAX = 64  # files read for one pattern
SYSTEMD_DIRS = ("/etc", "/run", "/usr/local/lib", "/usr/lib", "/lib")
UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
             "/usr/lib/systemd/system", "/lib/systemd/system")
UNITS = ("kubelet", "containerd", "docker", "nvidia-persistenced", "nvidia-fabricmanager")
KUBELET_DEFAULTS = ("/var/lib/kubelet/config.yaml", "/etc/kubernetes/kubelet/config.json",
                    "/etc/kubernetes/kubelet/kubelet-config.json", "/etc/kubernetes/kubelet-config.yaml")
KUBELET_DROPINS = "/etc/kubernetes/kubelet/config.json.d/*.conf"

# (kind, patterns) in the probe's order
FILES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("sysctl", ("/etc/sysctl.d/*.conf", "/run/sysctl.d/*.conf", "/usr/local/lib/sysctl.d/*.conf",
                "/usr/lib/sysctl.d/*.conf", "/lib/sysctl.d/*.conf", "/etc/sysctl.conf")),
    ("networkd", ("/etc/systemd/networkd.conf", "/usr/lib/systemd/networkd.conf",
                  "/etc/systemd/networkd.conf.d/*.conf", "/run/systemd/networkd.conf.d/*.conf",
                  "/usr/local/lib/systemd/networkd.conf.d/*.conf", "/usr/lib/systemd/networkd.conf.d/*.conf",
                  "/lib/systemd/networkd.conf.d/*.conf")),
    ("link", tuple(f"{d}/systemd/network/*.link" for d in SYSTEMD_DIRS)
     + tuple(f"{d}/systemd/network/*.link.d/*.conf" for d in SYSTEMD_DIRS)),
    ("apt", ("/etc/apt/apt.conf", "/etc/apt/apt.conf.d/*")),
    ("dnf-automatic", ("/etc/dnf/automatic.conf",)),
    ("yum-cron", ("/etc/yum/yum-cron.conf",)),
    ("containerd", ("/etc/containerd/config.toml", "/etc/containerd/conf.d/*.toml")),
    ("docker", ("/etc/docker/daemon.json",)),
    ("unit", tuple(p for u in UNITS for d in UNIT_DIRS for p in (f"{d}/{u}.service", f"{d}/{u}.service.d/*.conf"))),
    ("kubelet-env", ("/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet", "/etc/sysconfig/kubelet",
                     "/etc/eks/kubelet/environment")),
    ("kubelet", (*KUBELET_DEFAULTS, KUBELET_DROPINS)),
    ("resolv", ("/etc/resolv.conf",)),
    ("cni", ("/etc/cni/net.d/*",)),
    ("modules-load", ("/etc/modules-load.d/*.conf", "/run/modules-load.d/*.conf",
                      "/usr/local/lib/modules-load.d/*.conf", "/usr/lib/modules-load.d/*.conf",
                      "/lib/modules-load.d/*.conf", "/etc/modules")),
)
