"""The facts of each area as TypedDicts, generated from collect/facts.yaml: do not edit by hand.

Regenerate with `AMI_AUDITOR_UPDATE_GOLDEN=1 pytest tests/unit/test_snapshot_types.py` after changing
facts.yaml; the test fails while this file and the schema disagree. Every key is optional and every
value may be null: a snapshot is host data, and a failed collector leaves nulls (snapshotdoc.py). Lists of
values and maps are read-only (Sequence, Mapping): a parser's `list[str]` is one, a reader must allow nulls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict


class Os(TypedDict, total=False):
    """`facts.os`."""

    id: str | None
    id_like: str | None
    version_id: str | None
    version_codename: str | None
    pretty_name: str | None


class KernelInstalledRow(TypedDict, total=False):
    """One row of `facts.kernel.installed`."""

    release: str | None
    nvidia_module: bool | None
    running: bool | None
    newer_than_running: bool | None


class Kernel(TypedDict, total=False):
    """`facts.kernel`."""

    release: str | None
    version: str | None
    machine: str | None
    cmdline: str | None
    thp_enabled: str | None
    thp_defrag: str | None
    hugepages_total: int | None
    mem_total_kb: int | None
    nvidia_driver: str | None
    sysctls: Mapping[str, str | None] | None
    sysctl_counters: Mapping[str, str | None] | None
    installed: list[KernelInstalledRow] | None


class SystemdUnitFilesRow(TypedDict, total=False):
    """One row of `facts.systemd.unit_files`."""

    name: str | None
    state: str | None
    preset: str | None


class SystemdUnitsRow(TypedDict, total=False):
    """One row of `facts.systemd.units`."""

    name: str | None
    description: str | None
    load_state: str | None
    active_state: str | None
    sub_state: str | None
    result: str | None
    health: str | None
    unit_file_state: str | None
    preset: str | None
    type: str | None
    restart_policy: str | None
    restarts: int | None
    restarts_source: str | None
    n_restarts: int | None
    journal_restarts: int | None
    main_pid: int | None
    main_exit_status: int | None
    main_started_s: float | None
    fragment_path: str | None


class SystemdLimitsRow(TypedDict, total=False):
    """One row of `facts.systemd.limits`."""

    name: str | None
    load_state: str | None
    limit_nofile: int | None
    limit_nofile_infinite: bool | None
    limit_nofile_soft: int | None
    tasks_max: int | None
    tasks_max_infinite: bool | None


class Systemd(TypedDict, total=False):
    """`facts.systemd`."""

    version: int | None
    enabled_units: Sequence[str | None] | None
    failed_units: Sequence[str | None] | None
    unit_files: list[SystemdUnitFilesRow] | None
    units: list[SystemdUnitsRow] | None
    limits: list[SystemdLimitsRow] | None


class CgroupsMemory(TypedDict, total=False):
    """`facts.cgroups.memory`."""

    num_cgroups: int | None
    live: int | None
    dying: int | None
    source: str | None


class CgroupsControllersRow(TypedDict, total=False):
    """One row of `facts.cgroups.controllers`."""

    name: str | None
    hierarchy: int | None
    num_cgroups: int | None
    enabled: int | None
    live: int | None
    dying: int | None


class CgroupsV2Row(TypedDict, total=False):
    """One row of `facts.cgroups.v2`."""

    path: str | None
    nr_descendants: int | None
    nr_dying_descendants: int | None
    nr_subsys_memory: int | None
    nr_dying_subsys_memory: int | None


class Cgroups(TypedDict, total=False):
    """`facts.cgroups`."""

    mode: str | None
    v2_controllers: Sequence[str | None] | None
    memory: CgroupsMemory | None
    controllers: list[CgroupsControllersRow] | None
    v2: list[CgroupsV2Row] | None


class BinariesRowEvidenceRow(TypedDict, total=False):
    """One row of `facts.binaries[].evidence`."""

    file: str | None
    url: str | None


class BinariesRow(TypedDict, total=False):
    """One row of `facts.binaries`."""

    name: str | None
    requested: str | None
    found: bool | None
    path: str | None
    realpath: str | None
    size: int | None
    mtime: int | None
    mode: str | None
    owner_user: str | None
    sha256: str | None
    package: str | None
    package_version: str | None
    package_manager: str | None
    version: str | None
    version_source: str | None
    version_refused: str | None
    source_url: str | None
    source_host: str | None
    evidence: list[BinariesRowEvidenceRow] | None
    error: str | None


class Ecs(TypedDict, total=False):
    """`facts.ecs`."""

    config_present: bool | None
    cluster: str | None
    cluster_configured: bool | None
    init_log_present: bool | None
    agent_exits: int | None
    last_exit: str | None
    agent_container_started: str | None
    agent_container_status: str | None
    agent_container_restarts: int | None


class HygieneSshHostKeysRow(TypedDict, total=False):
    """One row of `facts.hygiene.ssh_host_keys`."""

    path: str | None
    type: str | None
    fingerprint: str | None


class HygieneRootAuthorizedKeysRow(TypedDict, total=False):
    """One row of `facts.hygiene.root_authorized_keys`."""

    path: str | None
    keys: int | None


class HygieneShellHistoriesRow(TypedDict, total=False):
    """One row of `facts.hygiene.shell_histories`."""

    path: str | None
    bytes: int | None


class HygieneCredentialFilesRow(TypedDict, total=False):
    """One row of `facts.hygiene.credential_files`."""

    path: str | None
    kinds: Sequence[str | None] | None


class HygienePackageCachesRow(TypedDict, total=False):
    """One row of `facts.hygiene.package_caches`."""

    path: str | None
    mb: float | None


class Hygiene(TypedDict, total=False):
    """`facts.hygiene`."""

    image: bool | None
    cloud_init_instances: int | None
    machine_id_state: str | None
    ssh_host_keys: list[HygieneSshHostKeysRow] | None
    root_authorized_keys: list[HygieneRootAuthorizedKeysRow] | None
    shell_histories: list[HygieneShellHistoriesRow] | None
    credential_files: list[HygieneCredentialFilesRow] | None
    package_caches: list[HygienePackageCachesRow] | None


class NetworkInterfacesRow(TypedDict, total=False):
    """One row of `facts.network.interfaces`."""

    name: str | None
    driver: str | None
    driver_version: str | None
    firmware_version: str | None
    operstate: str | None
    mtu: int | None
    stats: Mapping[str, int | None] | None
    stats_available: bool | None
    error: str | None


class NetworkEna(TypedDict, total=False):
    """`facts.network.ena`."""

    present: bool | None
    version: str | None
    out_of_tree: bool | None
    in_tree: bool | None


class NetworkKernelLogXidsRow(TypedDict, total=False):
    """One row of `facts.network.kernel_log.xids`."""

    code: int | None
    count: int | None
    devices: int | None
    last: str | None


class NetworkKernelLog(TypedDict, total=False):
    """`facts.network.kernel_log`."""

    events: Mapping[str, int | None] | None
    lines: Sequence[str | None] | None
    xids: list[NetworkKernelLogXidsRow] | None


class Network(TypedDict, total=False):
    """`facts.network`."""

    interfaces: list[NetworkInterfacesRow] | None
    ena: NetworkEna | None
    kernel_log: NetworkKernelLog | None


class CpuAverage(TypedDict, total=False):
    """`facts.cpu.average`."""

    user_pct: float | None
    nice_pct: float | None
    system_pct: float | None
    idle_pct: float | None
    iowait_pct: float | None
    irq_pct: float | None
    softirq_pct: float | None
    steal_pct: float | None


class CpuCoresRow(TypedDict, total=False):
    """One row of `facts.cpu.cores`."""

    user_pct: float | None
    nice_pct: float | None
    system_pct: float | None
    idle_pct: float | None
    iowait_pct: float | None
    irq_pct: float | None
    softirq_pct: float | None
    steal_pct: float | None
    cpu: int | None


class CpuThreadsRow(TypedDict, total=False):
    """One row of `facts.cpu.threads`."""

    pid: int | None
    tid: int | None
    cpu: int | None
    ticks: int | None
    system_ticks: int | None
    comm: str | None


class Cpu(TypedDict, total=False):
    """`facts.cpu`."""

    count: int | None
    model: str | None
    window_s: float | None
    average: CpuAverage | None
    cores: list[CpuCoresRow] | None
    max_core_system_pct: float | None
    max_core: int | None
    threads: list[CpuThreadsRow] | None


class CpuStackSelfRow(TypedDict, total=False):
    """One row of `facts.cpu_stack.self`."""

    function: str | None
    samples: int | None
    share_pct: float | None


CpuStackInclusiveRow = CpuStackSelfRow  # One row of `facts.cpu_stack.inclusive`: declared alike


class CpuStack(TypedDict, total=False):
    """`facts.cpu_stack`."""

    requested: bool | None
    core: int | None
    busiest_tid: int | None
    busiest_comm: str | None
    samples: int | None
    kernel_samples: int | None
    memcg_share_pct: float | None
    self: list[CpuStackSelfRow] | None
    inclusive: list[CpuStackInclusiveRow] | None


class ConfigFilesRow(TypedDict, total=False):
    """One row of `facts.config.files`."""

    path: str | None
    kind: str | None
    bytes: int | None
    truncated: bool | None
    parse_error: str | None
    error: str | None


class ConfigNetworkd(TypedDict, total=False):
    """`facts.config.networkd`."""

    manage_foreign_routes: bool | None
    manage_foreign_routing_policy_rules: bool | None
    manage_foreign_nexthops: bool | None


class ConfigLinksRow(TypedDict, total=False):
    """One row of `facts.config.links`."""

    name: str | None
    path: str | None
    match_original_name: str | None
    match_driver: str | None
    match_type: str | None
    match_kind: str | None
    mac_address_policy: str | None


class ConfigDnfAutomatic(TypedDict, total=False):
    """`facts.config.dnf_automatic`."""

    path: str | None
    apply_updates: bool | None
    upgrade_type: str | None


class ConfigYumCron(TypedDict, total=False):
    """`facts.config.yum_cron`."""

    path: str | None
    apply_updates: bool | None
    update_cmd: str | None


class ConfigContainerd(TypedDict, total=False):
    """`facts.config.containerd`."""

    path: str | None
    version: int | None
    systemd_cgroup: bool | None
    default_runtime_name: str | None
    runtimes: Sequence[str | None] | None
    enable_cdi: bool | None


class ConfigDocker(TypedDict, total=False):
    """`facts.config.docker`."""

    path: str | None
    cgroup_driver: str | None
    default_runtime: str | None
    runtimes: Sequence[str | None] | None
    log_driver: str | None
    log_max_size: str | None


class ConfigKubelet(TypedDict, total=False):
    """`facts.config.kubelet`."""

    path: str | None
    found_by: str | None
    cgroup_driver: str | None
    resolv_conf: str | None
    fail_swap_on: bool | None
    memory_swap_behavior: str | None
    system_reserved: Mapping[str, str | None] | None
    kube_reserved: Mapping[str, str | None] | None
    eviction_hard: Mapping[str, str | None] | None
    container_log_max_size: str | None
    flags: Mapping[str, str | None] | None


class ConfigUnitsRow(TypedDict, total=False):
    """One row of `facts.config.units`."""

    name: str | None
    path: str | None
    dropins: Sequence[str | None] | None
    exec_start: str | None
    limit_nofile: str | None
    tasks_max: str | None


class ConfigResolvConf(TypedDict, total=False):
    """`facts.config.resolv_conf`."""

    link: str | None
    nameservers: Sequence[str | None] | None
    search: Sequence[str | None] | None


class ConfigCni(TypedDict, total=False):
    """`facts.config.cni`."""

    files: Sequence[str | None] | None
    plugins: Sequence[str | None] | None


class Config(TypedDict, total=False):
    """`facts.config`."""

    files: list[ConfigFilesRow] | None
    sysctl_declared: Mapping[str, str | None] | None
    sysctl_declared_in: Mapping[str, str | None] | None
    networkd: ConfigNetworkd | None
    links: list[ConfigLinksRow] | None
    apt_periodic: Mapping[str, str | None] | None
    dnf_automatic: ConfigDnfAutomatic | None
    yum_cron: ConfigYumCron | None
    containerd: ConfigContainerd | None
    docker: ConfigDocker | None
    kubelet: ConfigKubelet | None
    units: list[ConfigUnitsRow] | None
    resolv_conf: ConfigResolvConf | None
    cni: ConfigCni | None
    modules_load: Sequence[str | None] | None


class Gpu(TypedDict, total=False):
    """`facts.gpu`."""

    pci_gpus: int | None
    pci_nvswitches: int | None
    driver_gpus: int | None
    module_version: str | None
    modules: Sequence[str | None] | None
    infiniband_devices: int | None
    gsp_firmware: str | None


class ProcZombieParentsRow(TypedDict, total=False):
    """One row of `facts.proc.zombie_parents`."""

    pid: int | None
    comm: str | None
    zombies: int | None


class Proc(TypedDict, total=False):
    """`facts.proc`."""

    swaps: Sequence[str | None] | None
    clocksource: str | None
    clocksources_available: Sequence[str | None] | None
    arp_entries: int | None
    ntp_synchronized: bool | None
    ntp_source: str | None
    reboot_required: bool | None
    reboot_required_pkgs: Sequence[str | None] | None
    threads: int | None
    processes: int | None
    zombies: int | None
    zombie_parents: list[ProcZombieParentsRow] | None


class DiskMountsRow(TypedDict, total=False):
    """One row of `facts.disk.mounts`."""

    path: str | None
    mount: str | None
    used_pct: float | None
    avail_kb: int | None
    inodes_used_pct: float | None


class Disk(TypedDict, total=False):
    """`facts.disk`."""

    mounts: list[DiskMountsRow] | None


class PackagesItemsRow(TypedDict, total=False):
    """One row of `facts.packages.items`."""

    name: str | None
    version: str | None
    arch: str | None


class Packages(TypedDict, total=False):
    """`facts.packages`."""

    manager: str | None
    count: int | None
    items: list[PackagesItemsRow] | None


class TrendsUnitsRow(TypedDict, total=False):
    """One row of `facts.trends.units`."""

    name: str | None
    restarts_previous: int | None
    restarts_now: int | None
    restarts_delta: int | None
    restarts_per_hour: float | None
    active_previous: str | None
    active_now: str | None
    active_both: bool | None


class TrendsCgroups(TypedDict, total=False):
    """`facts.trends.cgroups`."""

    dying_memcgs_previous: int | None
    dying_memcgs_delta: int | None
    dying_memcgs_per_hour: float | None


class Trends(TypedDict, total=False):
    """`facts.trends`."""

    scans_seen: int | None
    previous_scan: int | None
    previous_at: str | None
    hours_since_previous: float | None
    same_boot: bool | None
    units: list[TrendsUnitsRow] | None
    cgroups: TrendsCgroups | None
