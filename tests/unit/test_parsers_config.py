"""The `config` section's parsers on configuration files as their programs ship and read them, the probe's
file list against collect/config_files.py, and a file the probe could not read as a named failure."""

from __future__ import annotations

import re

import pytest

from auditor.collect.collectors import COLLECTORS, run_collector
from auditor.collect.config_files import FILES, UNIT_DIRS, UNITS
from auditor.collect.parsers.config import parse_config
from auditor.collect.parsers.config_system import apt_settings
from auditor.collect.probe import probe_script
from auditor.collect.sections import Section, UnparsableOutput


def block(kind: str, path: str, text: str) -> str:
    kept = [ln for ln in text.strip("\n").split("\n")
            if ln.strip() and not re.match(r"^\s*([#;]|//)", ln)]
    return "\n".join([f"@ {kind} {path}", *("|" + ln for ln in kept)])


def config(*blocks: str) -> dict:
    return parse_config("\n".join(blocks))


# containerd 2.x `containerd config default` (version 3), the part Kubernetes nodes set
CONTAINERD_V3 = """
version = 3
root = '/var/lib/containerd'
state = '/run/containerd'
[plugins]
  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    enable_cdi = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes]
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
          runtime_type = 'io.containerd.runc.v2'
          [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
            BinaryName = ''
            SystemdCgroup = false
"""


def test_containerd_v3_layout() -> None:
    got = config(block("containerd", "/etc/containerd/config.toml", CONTAINERD_V3))["containerd"]
    assert got == {"path": "/etc/containerd/config.toml", "version": 3, "systemd_cgroup": False,
                   "default_runtime_name": "runc", "runtimes": ["runc"], "enable_cdi": True}


def test_containerd_v1_layout_and_imports() -> None:
    main = 'imports = ["/etc/containerd/conf.d/*.toml"]\n[plugins.cri]\nsystemd_cgroup = true\n'
    dropin = '[plugins.cri.containerd]\ndefault_runtime_name = "nvidia"\n'
    ignored = '[plugins.cri]\nsystemd_cgroup = false\n'
    got = config(block("containerd", "/etc/containerd/config.toml", main),
                 block("containerd", "/etc/containerd/conf.d/10-nvidia.toml", dropin))["containerd"]
    assert (got["version"], got["systemd_cgroup"], got["default_runtime_name"]) == (1, True, "nvidia")
    # a conf.d file containerd does not import changes nothing
    got = config(block("containerd", "/etc/containerd/config.toml", "[plugins.cri]\nsystemd_cgroup = true\n"),
                 block("containerd", "/etc/containerd/conf.d/99.toml", ignored))["containerd"]
    assert got["systemd_cgroup"] is True


def test_invalid_toml_is_a_fact_not_a_failed_read() -> None:
    got = config(block("containerd", "/etc/containerd/config.toml", "version = 2\n[plugins\n"))
    assert got["containerd"]["path"] == "/etc/containerd/config.toml" and got["containerd"]["systemd_cgroup"] is None
    assert got["files"][0]["parse_error"].startswith("not valid TOML") and got["files"][0]["error"] is None


def test_sysctl_d_precedence_as_systemd_sysctl_applies_it() -> None:
    got = config(
        block("sysctl", "/etc/sysctl.d/50-pid-max.conf", "kernel.pid_max = 32768"),  # masks /usr/lib's file
        block("sysctl", "/usr/lib/sysctl.d/50-pid-max.conf", "kernel.pid_max = 4194304"),
        block("sysctl", "/usr/lib/sysctl.d/99-hardening.conf", "net.ipv4.ip_forward = 0\n-net.core.bpf_jit_harden=2"),
        block("sysctl", "/etc/sysctl.d/10-k8s.conf", "net.ipv4.ip_forward = 1\nnet/ipv4/conf/all/rp_filter = 1"),
        block("sysctl", "/etc/sysctl.conf", "vm.swappiness=10"),
    )
    assert got["sysctl_declared"] == {"kernel.pid_max": "32768", "net.ipv4.ip_forward": "0",
                                      "net.core.bpf_jit_harden": "2", "net.ipv4.conf.all.rp_filter": "1",
                                      "vm.swappiness": "10"}
    # 99-hardening sorts after 10-k8s: the hardening baseline's 0 wins, and the report names its file
    assert got["sysctl_declared_in"]["net.ipv4.ip_forward"] == "/usr/lib/sysctl.d/99-hardening.conf"


def test_networkd_drop_ins_and_link_files_by_precedence() -> None:
    got = config(
        block("networkd", "/etc/systemd/networkd.conf", "[Network]\n#ManageForeignRoutes=yes\n"),
        block("networkd", "/usr/lib/systemd/networkd.conf.d/80-release.conf",
              "[Network]\nManageForeignRoutes=no\nManageForeignRoutingPolicyRules=no"),
        block("networkd", "/etc/systemd/networkd.conf.d/80-release.conf", "[Network]\nManageForeignRoutes=yes"),
        block("link", "/usr/lib/systemd/network/99-default.link",
              "[Match]\nOriginalName=*\n[Link]\nMACAddressPolicy=persistent"),
        block("link", "/etc/systemd/network/99-default.link.d/50-none.conf", "[Link]\nMACAddressPolicy=none"),
    )
    # /etc's 80-release.conf masks /usr/lib's whole file: only ManageForeignRoutes is set (yes)
    assert got["networkd"] == {"manage_foreign_routes": True, "manage_foreign_routing_policy_rules": None,
                               "manage_foreign_nexthops": None}
    assert got["links"] == [{"name": "99-default.link", "path": "/usr/lib/systemd/network/99-default.link",
                             "match_original_name": "*", "match_driver": None, "match_type": None,
                             "match_kind": None, "mac_address_policy": "none"}]


def test_apt_conf_d_merges_in_name_order_with_apt_syntax() -> None:
    got = config(
        block("apt", "/etc/apt/apt.conf.d/20auto-upgrades",
              'APT::Periodic::Update-Package-Lists "1";\nAPT::Periodic::Unattended-Upgrade "1";'),
        block("apt", "/etc/apt/apt.conf.d/99-no-upgrades",
              'APT {\n  Periodic {\n    Unattended-Upgrade "0"; // off\n  };\n};'),
        block("apt", "/etc/apt/apt.conf.d/99zz.dpkg-old", 'APT::Periodic::Unattended-Upgrade "1";'),
    )
    assert got["apt_periodic"] == {"Update-Package-Lists": "1", "Unattended-Upgrade": "0"}
    assert apt_settings('/* a */ Dpkg::Options { "--force-confold"; }; APT::Install-Recommends "false";') == \
        {"apt::install-recommends": "false"}


def test_dnf_automatic_and_yum_cron() -> None:
    got = config(block("dnf-automatic", "/etc/dnf/automatic.conf",
                       "[commands]\nupgrade_type = security\napply_updates = yes"),
                 block("yum-cron", "/etc/yum/yum-cron.conf", "[commands]\nupdate_cmd = default\napply_updates = no"))
    assert got["dnf_automatic"] == {"path": "/etc/dnf/automatic.conf", "apply_updates": True,
                                    "upgrade_type": "security"}
    assert got["yum_cron"] == {"path": "/etc/yum/yum-cron.conf", "apply_updates": False, "update_cmd": "default"}


KUBEADM_DROPIN = """
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/etc/kubernetes/custom-kubelet.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""


def test_kubelet_config_where_its_unit_points_and_flags_over_the_file() -> None:
    got = config(
        block("unit", "/lib/systemd/system/kubelet.service", "[Service]\nExecStart=/usr/bin/kubelet\nRestart=always"),
        block("unit", "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf", KUBEADM_DROPIN),
        block("kubelet-env", "/etc/default/kubelet",
              'KUBELET_EXTRA_ARGS="--cgroup-driver=cgroupfs --fail-swap-on=false"'),
        block("kubelet", "/var/lib/kubelet/config.yaml", "kind: KubeletConfiguration\ncgroupDriver: cgroupfs"),
        block("kubelet", "/etc/kubernetes/custom-kubelet.yaml",
              "kind: KubeletConfiguration\ncgroupDriver: systemd\nresolvConf: /run/systemd/resolve/resolv.conf\n"
              "systemReserved:\n  memory: 1Gi\nevictionHard:\n  memory.available: 50Mi"),
    )
    kubelet = got["kubelet"]
    assert (kubelet["path"], kubelet["found_by"]) == ("/etc/kubernetes/custom-kubelet.yaml", "unit")
    assert kubelet["cgroup_driver"] == "cgroupfs"  # the flag in /etc/default/kubelet wins over the file
    assert kubelet["fail_swap_on"] is False and kubelet["resolv_conf"] == "/run/systemd/resolve/resolv.conf"
    assert (kubelet["system_reserved"], kubelet["eviction_hard"]) == ({"memory": "1Gi"}, {"memory.available": "50Mi"})
    unit = got["units"][0]
    assert unit["path"] == "/lib/systemd/system/kubelet.service"
    assert unit["exec_start"].startswith("/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS")  # the reset, then the drop-in's


def test_kubelet_default_path_and_an_invalid_file() -> None:
    got = config(block("kubelet", "/var/lib/kubelet/config.yaml", "cgroupDriver: [systemd\n"))
    assert (got["kubelet"]["path"], got["kubelet"]["found_by"], got["kubelet"]["cgroup_driver"]) == \
        ("/var/lib/kubelet/config.yaml", "default", None)
    assert got["files"][0]["parse_error"].startswith("not valid YAML")


def test_resolv_cni_and_modules_load() -> None:
    got = config(
        block("resolv", "/etc/resolv.conf", "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch ec2.internal"),
        "resolv_link=../run/systemd/resolve/stub-resolv.conf",
        block("cni", "/etc/cni/net.d/10-flannel.conflist",
              '{"name": "cbr0", "plugins": [{"type": "flannel"}, {"type": "portmap"}]}'),
        block("cni", "/etc/cni/net.d/99-loopback.conf", '{"cniVersion": "0.3.1", "type": "loopback"}'),
        block("modules-load", "/usr/lib/modules-load.d/k8s.conf", "overlay"),
        block("modules-load", "/etc/modules-load.d/k8s.conf", "br_netfilter"),
        block("modules-load", "/etc/modules", "nf_conntrack"),
    )
    assert got["resolv_conf"] == {"link": "../run/systemd/resolve/stub-resolv.conf",
                                  "nameservers": ["127.0.0.53"], "search": ["ec2.internal"]}
    assert got["cni"] == {"files": ["10-flannel.conflist", "99-loopback.conf"],
                          "plugins": ["flannel", "portmap", "loopback"]}
    assert got["modules_load"] == ["br_netfilter", "nf_conntrack"]  # /etc's k8s.conf masks /usr/lib's


def test_a_file_the_probe_could_not_read_fails_the_area_naming_it() -> None:
    body = "\n".join([block("resolv", "/etc/resolv.conf", "nameserver 10.0.0.2"),
                      "@ kubelet /var/lib/kubelet/config.yaml",
                      "failed=read /var/lib/kubelet/config.yaml: grep: /var/lib/kubelet/config.yaml: Permission denied "
                      "(status 2)"])
    got = run_collector(COLLECTORS["config"], {"config": Section("config", body, 0)})
    assert got.failed and "files[/var/lib/kubelet/config.yaml]" in got.error and "Permission denied" in got.error
    assert got.value["resolv_conf"]["nameservers"] == ["10.0.0.2"]  # the other files stand


@pytest.mark.parametrize("body", ["garbage line", "@ sysctl relative/path",
                                  "@ sysctl /etc/sysctl.conf\nnot a file line"])
def test_output_that_is_not_the_section_format_is_unparsable(body: str) -> None:
    with pytest.raises(UnparsableOutput):
        parse_config(body)


def _probe_patterns() -> dict[str, list[str]]:
    """`conf_glob KIND PATTERN…` calls of probe.sh's s_config (continued lines joined)."""
    text = probe_script()
    body = text[text.index("s_config() {"):text.index("kubelet_config_flag() {")].replace("\\\n", " ")
    out: dict[str, list[str]] = {}
    for line in body.splitlines():
        words = line.split()
        if len(words) > 2 and words[0] == "conf_glob":
            out.setdefault(words[1], []).extend(w.strip("'\"") for w in words[2:])
    return out


def test_the_probe_reads_the_declared_files() -> None:
    probe = _probe_patterns()
    units = probe.pop("unit")
    assert units == ["$_d/$_u.service", "$_d/$_u.service.d/*.conf"]
    text = probe_script()
    assert f"for _u in {' '.join(UNITS)}; do" in text
    assert " ".join(UNIT_DIRS) in " ".join(text[text.index("for _u in kubelet"):].replace("\\\n", " ").split()[:20])
    declared = {kind: list(patterns) for kind, patterns in FILES if kind != "unit"}
    assert probe == declared


def test_a_hostile_kubelet_yaml_stays_small_and_fast() -> None:
    """Nested aliases (a "billion laughs" in a 1 KB file) never become text: only scalar settings are kept."""
    laughs = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    laughs += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    text = "\n".join([*laughs, "cgroupDriver: *a8", "systemReserved: {memory: *a8, cpu: 100m}", "resolvConf: *a8"])
    got = config(block("kubelet", "/var/lib/kubelet/config.yaml", text))["kubelet"]
    assert (got["cgroup_driver"], got["resolv_conf"], got["system_reserved"]) == (None, None, {"cpu": "100m"})
