"""Parsers on real command output other people captured and published (tests/data/real/INDEX.md).

Each capture `tests/data/real/<area>/<name>.txt` starts with `# source:`, `# os:` and `# edited:` header
lines and a `# ---` line; the text after it is the command output as published. A capture is fed
through the probe's own filter functions where the probe filters (run under /bin/sh from probe.sh,
tests/probe_shell.py), then through the parser; the whole result must equal `<name>.json`.
`AMI_AUDITOR_UPDATE_REAL=1` rewrites the .json files (review the diff: they are the expectation).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from auditor.collect.parsers.binaries import parse_binaries
from auditor.collect.parsers.cgroups import parse_cgroups
from auditor.collect.parsers.cpu import parse_cpu
from auditor.collect.parsers.ecs import parse_ecs
from auditor.collect.parsers.identity import parse_host
from auditor.collect.parsers.kernel import parse_kernel
from auditor.collect.parsers.network import parse_kernel_log, parse_network
from auditor.collect.parsers.os_release import parse_os
from auditor.collect.parsers.proc import parse_proc
from auditor.collect.parsers.systemd import parse_journal_restarts, parse_systemd, parse_unit_files, parse_version
from auditor.collect.probe import probe_script
from auditor.collect.sections import Section
from tests.paths import DATA
from tests.probe_shell import probe_filter

REAL = DATA / "real"
HEADER = ("source", "os", "edited")
_NUMBER = re.compile(r"\b\d+\b")
_LOG_PREFIX = re.compile(r"^.*?\[\d+\]: ")  # `Jan 21 20:14:29 node-1 systemd[1]: `, `[ 135.2] x@y[1168]: `


def read_capture(path: Path) -> tuple[dict[str, str], str]:
    """(header fields, raw capture) of one fixture file."""
    head, sep, raw = path.read_text().partition("# ---\n")
    assert sep, f"{path}: no `# ---` line"
    fields = dict(line[2:].split(": ", 1) for line in head.splitlines())
    assert set(fields) == set(HEADER) and all(fields.values()), f"{path}: header must name {HEADER}"
    return fields, raw


def _journal(raw: str) -> dict[str, int]:
    """Messages as `journalctl -o cat` prints them: the syslog/dmesg/console prefix up to `…[PID]: ` is
    dropped (the probe asks journalctl for PID 1's messages only; other processes' lines never match)."""
    lines = "".join(_LOG_PREFIX.sub("", line, count=1) + "\n" for line in raw.splitlines())
    return parse_journal_restarts(probe_filter("restart_tally", lines))


def _dpkg_owner(raw: str) -> dict[str, Any]:
    """`dpkg-query -S PATH` output → the probe's owner pick → the binary's facts."""
    path = raw.splitlines()[0].rsplit(": ", 1)[1]
    owner = probe_filter("dpkg_owner_of", raw).strip()
    block = f"@ {path.rsplit('/', 1)[1]}\nfound=1\npath={path}\n" + (f"dpkg_owner={owner}\n" if owner else "")
    return parse_binaries(block)[0]


def _ethtool(raw: str) -> dict[str, Any]:
    """`ethtool -i` and/or `ethtool -S` output through the probe's info_lines/stat_lines. The `@ eth0 …`
    line the probe writes from sysfs is no part of a capture: the feed supplies it (driver=ena)."""
    info, stats_head, stats = raw.partition("NIC statistics:")
    body = probe_filter("info_lines", info) + probe_filter("stat_lines", stats_head + stats)
    return parse_network("@ eth0 driver=ena operstate= mtu=\n" + body)


def _ena_in_tree(raw: str) -> dict[str, Any]:
    """`uname -r` (the capture's first line, the release its report gives) and `ethtool -i` after it, as the
    probe's network section carries them: the ENA facts of a host with no /sys/module/ena/version."""
    release, _, info = raw.partition("\n")
    body = probe_filter("info_lines", info)
    return parse_network(f"@ eth0 driver=ena operstate= mtu=\n{body}@ \nena_module_version=\n"
                         f"kernel_release={release}\n")["ena"]


def _proc_stat(raw: str) -> dict[str, Any]:
    """One /proc/stat sample as the second sample after an all-zero first one (the counters at boot):
    per-core shares since boot, from however many columns that kernel prints (7 to 10)."""
    boot = "".join(_NUMBER.sub("0", line) + "\n" for line in raw.splitlines() if line.startswith("cpu"))
    return parse_cpu(f"ncpu=\nwindow_s=\n--- stat1\n{boot}--- stat2\n{raw}")


def _swaps(raw: str) -> dict[str, Any]:
    """/proc/swaps through the awk the probe's proc section pipes it into (taken from probe.sh), as the
    section's `swaps` part."""
    found = re.search(r"catf /proc/swaps && printf '%s\\n' \"\$CAP\" \| awk '([^']+)'", probe_script())
    assert found, "the probe's /proc/swaps reading moved: update this feed"
    names = subprocess.run(["awk", found.group(1)], input=raw, capture_output=True, text=True, check=True).stdout
    return parse_proc(f"--- swaps\n{names}--- state\n--- tasks\nthreads=0\n")


FEEDS: dict[str, Callable[[str], Any]] = {
    "systemd_unit_files": parse_unit_files,
    "systemd_journal": _journal,
    "os_release": parse_os,
    "binaries_dpkg_owner": _dpkg_owner,
    "kernel_log": lambda raw: parse_kernel_log(probe_filter("trouble_lines", raw)),
    "network_ethtool": _ethtool,
    "network_ena_intree": _ena_in_tree,
    "cgroups_proc": lambda raw: parse_cgroups(f"fstype=\nunified_fstype=\n--- proc_cgroups\n{raw}"),
    "cgroups_v2_stat": lambda raw: parse_cgroups(f"fstype=cgroup2fs\nunified_fstype=\n--- v2_stat\n{raw}"),
    "cpu_proc_stat": _proc_stat,
    "kernel_meminfo": lambda raw: parse_kernel(probe_filter("meminfo_kv", raw)),
    "systemd_version": parse_version,  # the probe keeps the first line; the parser reads only that
    "systemd_show": lambda raw: parse_systemd("", "", raw, "")["units"],
    "identity_cloudinit": lambda raw: parse_host({"cloudinit": Section("cloudinit", raw, 0)}),
    # one ecs-init.log through the probe's ecs_exits, no ecs.config, no docker
    "ecs_init_log": lambda raw: parse_ecs("config_present=0\nlog=/var/log/ecs/ecs-init.log "
                                          + probe_filter("ecs_exits", raw)),
    # `chronyc tracking` through the probe's chrony_state; `cat current_clocksource available_clocksource`
    "proc_chronyc": lambda raw: parse_proc(f"--- swaps\n--- state\n{probe_filter('chrony_state', raw)}"
                                               "--- tasks\nthreads=0\n"),
    "proc_clocksource": lambda raw: parse_proc("--- swaps\n--- state\nclocksource={}\nclocksources={}\n--- tasks\n"
                                               "threads=0\n".format(*(raw.splitlines() + ["", ""])[:2])),
    "proc_swaps": _swaps,  # /proc/swaps as kubelets that refused to start printed it
}
# Areas where fewer than three real captures were found (INDEX.md says where the search went).
FEWER_THAN_THREE = {"systemd_show", "identity_cloudinit", "proc_clocksource", "proc_chronyc"}
CAPTURES = sorted(REAL.glob("*/*.txt"))


def facts_of(path: Path) -> Any:
    _, raw = read_capture(path)
    return FEEDS[path.parent.name](raw)


def test_every_area_has_a_feed_and_three_captures() -> None:
    areas = {p.parent.name for p in CAPTURES}
    assert areas == set(FEEDS)
    for area in areas - FEWER_THAN_THREE:
        assert sum(p.parent.name == area for p in CAPTURES) >= 3, area


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_real_capture_gives_the_expected_facts(path: Path) -> None:
    facts = json.loads(json.dumps(facts_of(path)))  # tuples → lists, as stored
    expected_file = path.with_suffix(".json")
    if os.environ.get("AMI_AUDITOR_UPDATE_REAL"):
        expected_file.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
    assert facts == json.loads(expected_file.read_text())


# The defects of issue 13, each on a real capture (these failed before the fix: see INDEX.md).
def test_restart_wordings_of_systemd_215_to_242_each_count_one_restart() -> None:
    area = REAL / "systemd_journal"
    assert facts_of(area / "debian8-systemd215-no-holdoff.txt") == {"systemd-journald.service": 1}
    assert facts_of(area / "al2-admin-container-systemd219-no-holdoff.txt") == {"serial-getty@ttyS0.service": 1}
    assert facts_of(area / "nixos-1709-systemd234-hold-off-over.txt") == {"gluster-ssl-privkey-key.service": 1}
    assert facts_of(area / "rkt-stage1-systemd-no-hold-off.txt") == {"systemd-journald.service": 1}
    # 235+: the hold-off/RestartSec line and `Scheduled restart job` describe one restart, not two
    assert facts_of(area / "debian10-systemd241-restartsec-expired.txt") == {"xray.service": 1}
    assert facts_of(area / "centos7-systemd242-restartsec0.txt") == {"getty@tty1.service": 1}


def test_dpkg_diversions_and_multi_package_owners_name_the_owning_package() -> None:
    area = REAL / "binaries_dpkg_owner"
    assert facts_of(area / "debian-2017-diversion-multi-owner.txt")["package"] == "binutils-multiarch"
    assert facts_of(area / "ubuntu-2025-diversion-multi-owner.txt")["package"] == "ghostty"
    assert facts_of(area / "debian9-diversion-multiarch-owner.txt")["package"] == "libgl1-mesa-glx"
    assert facts_of(area / "debian-usrmerge-diversion-only.txt")["package"] is None


def test_cgroup_v2_root_is_the_path_slash_and_counts_come_from_it() -> None:
    cg = facts_of(REAL / "cgroups_v2_stat" / "kernel611-root-and-system-slice.txt")
    assert [r["path"] for r in cg["v2"]] == ["/", "system.slice"]
    assert cg["memory"] == {"num_cgroups": 86, "live": 56, "dying": 30, "source": "nr_dying_subsys_memory"}
    # a root file cut to its dying count: live unknown, not 1
    assert facts_of(REAL / "cgroups_v2_stat" / "kernel50-root-dying-only.txt")["memory"] == {
        "num_cgroups": None, "live": None, "dying": 1000, "source": "nr_dying_descendants"}


def test_ena_reset_written_reset_the_device_counts_once() -> None:
    area = REAL / "kernel_log"
    assert facts_of(area / "ena-2.4.0g-reset-completed.txt")["events"]["reset_triggered"] == 1
    assert facts_of(area / "ena-al2-lost-tx-reset.txt")["events"]["reset_triggered"] == 1  # reason + trigger line


def test_lost_tx_completions_and_the_reset_they_trigger_are_counted() -> None:
    # issue 19: `Found a Tx that wasn't completed on time` lines were dropped by the probe's filter
    events = facts_of(REAL / "kernel_log" / "ena-soft-lockup-reset.txt")["events"]
    assert events["tx_completion_missed"] == 4 and events["lost_tx_completions"] == 1
    assert events["reset_triggered"] == 1  # reason line + `Trigger reset is on`: one reset
    done = facts_of(REAL / "kernel_log" / "ena-2.4.0g-reset-completed.txt")["events"]
    assert done["tx_completion_missed"] == 2 and done["reset_completed"] == 1 and done["reset_triggered"] == 1


def test_in_tree_ena_reporting_the_kernel_release_has_no_version() -> None:
    # issue 19: the kernel release was taken for the ENA version
    for name in ("fedora40-kernel611-intree-325", "rhel84-kernel418-intree-184"):
        ena = facts_of(REAL / "network_ena_intree" / f"{name}.txt")
        assert (ena["version"], ena["in_tree"], ena["out_of_tree"]) == (None, True, False), name
    versioned = facts_of(REAL / "network_ena_intree" / "centos74-ena-1.0.2-versioned-55.txt")
    assert (versioned["version"], versioned["in_tree"]) == ("1.0.2", False)


def test_proc_cgroups_alone_gives_the_memory_controller_total() -> None:
    # issue 19: with no directory count the total was null although the file gives it
    memory = facts_of(REAL / "cgroups_proc" / "centos7-memcg-full.txt")["memory"]
    assert memory == {"num_cgroups": 65535, "live": None, "dying": None, "source": "proc_cgroups"}


def test_oom_kill_wordings_of_kernels_3_to_5_and_memcg_are_counted() -> None:
    area = REAL / "kernel_log"
    assert facts_of(area / "oom-kernel3-kill-process-sacrifice-child.txt")["events"]["oom_kill"] == 1
    assert facts_of(area / "oom-memcg-kill-process-centos7.txt")["events"]["oom_kill"] == 1
    assert facts_of(area / "oom-memcg-killed-process-ubuntu2004.txt")["events"]["oom_kill"] == 1
    assert facts_of(area / "oom-memcg-ltp-kernel4.txt")["events"]["oom_kill"] == 4


def test_list_unit_files_legend_and_footer_are_no_units() -> None:
    for path in sorted((REAL / "systemd_unit_files").glob("*.txt")):
        names = [u["name"] for u in facts_of(path)]
        assert names and all("." in n and n not in ("UNIT", "FILE") for n in names), path
    assert len(facts_of(REAL / "systemd_unit_files" / "centos7-systemd219.txt")) == 244  # as its footer says
    assert len(facts_of(REAL / "systemd_unit_files" / "ubuntu1804-systemd237.txt")) == 321


def test_the_index_names_every_capture_and_its_source() -> None:
    index = (REAL / "INDEX.md").read_text()
    for path in CAPTURES:
        fields, _ = read_capture(path)
        assert f"`{path.stem}`" in index and fields["source"] in index, path


def test_cloud_init_instance_data_in_both_key_spellings_gives_ami_and_type() -> None:
    area = REAL / "identity_cloudinit"
    old = facts_of(area / "ec2-cloud-init-18.4.txt")  # ds.meta-data / ami-id
    new = facts_of(area / "ec2-focal-cloud-init-20.1.txt")  # ds.meta_data / ami_id
    assert (old["ami_id"], old["instance_type"], old["az"]) == ("ami-079638aae7046bdd2", "t2.micro", "us-east-2b")
    assert (new["ami_id"], new["instance_type"], new["az"]) == ("ami-02e8aa396f8be3b6d", "t2.micro", "us-east-1b")
