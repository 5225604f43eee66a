"""Every built-in rule on recorded facts: probe output recorded per OS (tests/data/probe/<os>/raw.txt, parsed
by the real parsers) and snapshots recorded from the real test fleet (tests/data/snapshots/fleet-*.json)."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import pytest

from auditor.collect.snapshot import build_snapshot
from auditor.judge.engine import Judge
from auditor.judge.params import parse_set
from auditor.judge.rules import load_rules
from auditor.models import CommandResult, Finding, HostSpec
from tests.framing_fixtures import FIXTURE_NONCE
from tests.paths import DATA


@cache
def _recorded(name: str) -> str:
    if name.startswith("fleet-"):
        return (DATA / "snapshots" / f"{name}.json").read_text()
    raw = (DATA / "probe" / name / "raw.txt").read_text()
    return json.dumps(build_snapshot(HostSpec(name, "ssh://x"), CommandResult(stdout=raw, stderr="", exit_status=0),
                                     FIXTURE_NONCE))


def recorded(name: str) -> dict[str, Any]:
    """A fresh copy of a recorded snapshot: al2, al2023, ubuntu2004-dlami, fleet-golden, fleet-a1, fleet-b1."""
    return json.loads(_recorded(name))


@cache
def _judge(overrides: tuple[str, ...]) -> Judge:
    return Judge(load_rules(overrides=[parse_set(text) for text in overrides]))


def judge(snapshot: dict[str, Any], *overrides: str) -> list[Finding]:
    """Findings of all built-in rules; overrides are `pack.param=value` as on the command line (--set)."""
    return _judge(overrides).judge(snapshot)


def fired(findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in findings if f.rule == rule and f.evidence.get("status") not in ("unknown", "error")]


# --- systemd -------------------------------------------------------------------------------------------------

def test_crash_loop_fires_on_al2_from_journal_restarts() -> None:
    snap = recorded("al2")
    assert snap["facts"]["systemd"]["version"] == 219
    [f] = fired(judge(snap), "systemd.unit-crash-looping")
    assert f.item == "ecs.service"
    assert f.evidence["restarts_source"] == "journal" and f.evidence["restarts"] > 1000
    assert "ecs.service is crash-looping" in f.title and "journal" in f.title


def test_crash_loop_fires_on_fleet_az_b_host_not_on_az_a_host() -> None:
    [f] = fired(judge(recorded("fleet-b1")), "systemd.unit-crash-looping")
    assert f.item == "ecs.service" and f.evidence["restarts_source"] == "NRestarts"
    assert fired(judge(recorded("fleet-a1")), "systemd.unit-crash-looping") == []


def test_crash_loop_catches_auto_restart_before_the_restart_threshold() -> None:
    snap = recorded("fleet-b1")
    [unit] = [u for u in snap["facts"]["systemd"]["units"] if u["name"] == "ecs.service"]
    assert unit["sub_state"] == "auto-restart"
    assert fired(judge(snap, "systemd.crashloop_min_restarts=100000"), "systemd.unit-crash-looping")
    unit["sub_state"] = "running"  # recorded facts, one field edited: below the threshold and running
    assert not fired(judge(snap, "systemd.crashloop_min_restarts=100000"), "systemd.unit-crash-looping")


def test_a_crash_looping_unit_stopped_since_is_no_finding() -> None:
    """`systemctl disable --now` (the remediation) leaves NRestarts as it was until reboot: a stopped unit
    (inactive/dead, or failed when stopped mid-start) loops no more, so the finding goes (and Security Hub
    archives it); one systemd gave up on (start-limit-hit) still counts."""
    snap = recorded("fleet-b1")
    [unit] = [u for u in snap["facts"]["systemd"]["units"] if u["name"] == "ecs.service"]
    assert unit["restarts"] >= 3
    for state, sub, result in [("inactive", "dead", "success"),  # stopped between two restarts
                               ("failed", "failed", "signal")]:  # stopped mid-start (ExecStartPre killed)
        unit.update(active_state=state, sub_state=sub, result=result)  # recorded facts, the unit stopped
        assert not fired(judge(snap), "systemd.unit-crash-looping"), state
    unit.update(active_state="failed", sub_state="failed", result="start-limit-hit")  # systemd gave up
    assert fired(judge(snap), "systemd.unit-crash-looping")
    unit.update(active_state="active", sub_state="running", result="success")  # restarted, running again
    assert fired(judge(snap), "systemd.unit-crash-looping")


def test_ecs_enabled_without_cluster() -> None:
    for name in ("al2", "ubuntu2004-dlami", "fleet-b1"):
        [f] = fired(judge(recorded(name)), "systemd.ecs-enabled-without-cluster")
        assert f.item == "ecs.service" and f.evidence["ecs_cluster"] is None
    for name in ("al2023", "fleet-a1"):
        assert not fired(judge(recorded(name)), "systemd.ecs-enabled-without-cluster")


def test_ecs_agent_churn_while_systemd_shows_running() -> None:
    snap = recorded("ubuntu2004-dlami")
    [unit] = [u for u in snap["facts"]["systemd"]["units"] if u["name"] == "ecs.service"]
    assert (unit["active_state"], unit["restarts"]) == ("active", 0)
    findings = judge(snap)
    assert not fired(findings, "systemd.unit-crash-looping")
    [f] = fired(findings, "systemd.ecs-agent-churn")
    assert f.evidence["agent_exits"] == 40213 and "40213 exits" in f.title
    assert not fired(judge(recorded("al2023")), "systemd.ecs-agent-churn")


def test_unit_failed_on_recorded_facts_with_one_unit_marked_failed() -> None:
    snap = recorded("al2023")
    assert not fired(judge(snap), "systemd.unit-failed")
    unit = snap["facts"]["systemd"]["units"][0]
    unit.update(active_state="failed", result="exit-code", main_exit_status=1)  # edited: no recorded failure
    [f] = fired(judge(snap), "systemd.unit-failed")
    assert f.item == unit["name"] and "exit-code" in f.title


# --- cgroups -------------------------------------------------------------------------------------------------

def test_dying_memcg_levels_and_thresholds() -> None:
    al2 = judge(recorded("al2"))  # 12,345 dying
    assert [f.evidence["dying"] for f in fired(al2, "cgroups.dying-memcgs-critical")] == [12345]
    assert not fired(al2, "cgroups.dying-memcgs") and not fired(al2, "cgroups.memcg-ids-near-limit")
    raised = judge(recorded("al2"), "cgroups.dying_critical=20000")
    assert fired(raised, "cgroups.dying-memcgs") and not fired(raised, "cgroups.dying-memcgs-critical")
    dlami = judge(recorded("ubuntu2004-dlami"))  # 68,680 memcgs: the Pinterest host
    assert fired(dlami, "cgroups.memcg-ids-near-limit")[0].evidence["num_cgroups"] == 68680
    fleet = judge(recorded("fleet-a1"))  # 20 dying
    assert not any(fired(fleet, r) for r in ("cgroups.dying-memcgs", "cgroups.dying-memcgs-critical"))
    assert fired(judge(recorded("fleet-a1"), "cgroups.dying_warn=10"), "cgroups.dying-memcgs")


# --- network -------------------------------------------------------------------------------------------------

def test_ena_reset_and_health_counters_on_the_dlami_host() -> None:
    findings = judge(recorded("ubuntu2004-dlami"))
    [reset] = fired(findings, "network.ena-reset-in-kernel-log")
    assert "1 device reset(s)" in reset.title
    assert any("TX q 5 is paused for too long" in line for line in reset.evidence["lines"])
    [counters] = fired(findings, "network.ena-health-counters")
    assert counters.item == "eth0" and counters.evidence["missing_tx_cmpl"] == 7
    assert "suspected_poll_starvation=2" in counters.title
    quiet = judge(recorded("al2023"))
    assert not fired(quiet, "network.ena-reset-in-kernel-log") and not fired(quiet, "network.ena-health-counters")


def test_allowance_exceeded() -> None:
    [f] = fired(judge(recorded("al2023")), "network.allowance-exceeded")
    assert f.item == "ens5" and f.evidence["bw_out_allowance_exceeded"] == 12
    assert not fired(judge(recorded("al2023"), "network.allowance_min=13"), "network.allowance-exceeded")


# --- cpu -----------------------------------------------------------------------------------------------------

def test_hot_core_names_the_thread_on_it() -> None:
    [f] = fired(judge(recorded("ubuntu2004-dlami")), "cpu.hot-core-system-time")
    assert f.item == "5" and "kubelet" in f.title
    assert [t["comm"] for t in f.evidence["threads_on_core"]] == ["kubelet"]
    assert not fired(judge(recorded("ubuntu2004-dlami"), "cpu.average_system_below=10"), "cpu.hot-core-system-time")
    assert not fired(judge(recorded("al2023")), "cpu.hot-core-system-time")


# --- provenance ----------------------------------------------------------------------------------------------

def test_download_source_outside_allowlist() -> None:
    for name in ("ubuntu2004-dlami", "fleet-b1"):
        [f] = fired(judge(recorded(name)), "provenance.source-not-allowlisted")
        assert (f.item, f.evidence["source_host"]) == ("kubelet", "dl.k8s.io")
    for name in ("al2", "fleet-a1", "fleet-golden"):  # the EKS bucket is allowed by default
        assert not fired(judge(recorded(name)), "provenance.source-not-allowlisted")
    assert fired(judge(recorded("al2"), "provenance.allowed_source_hosts=[dl.k8s.io]"),
                 "provenance.source-not-allowlisted")


def test_binary_with_no_package_and_no_source() -> None:
    [f] = fired(judge(recorded("fleet-a1")), "provenance.binary-unknown-origin")
    assert f.item == "ecs-init" and f.evidence["path"] == "/usr/libexec/amazon-ecs-init"
    assert not fired(judge(recorded("al2023")), "provenance.binary-unknown-origin")


# --- kernel --------------------------------------------------------------------------------------------------

def test_thp_mode() -> None:
    [f] = fired(judge(recorded("al2")), "kernel.thp-mode")
    assert "'always'" in f.title
    assert not fired(judge(recorded("al2023")), "kernel.thp-mode")
    assert not fired(judge(recorded("al2"), "kernel.thp_allowed=[always]"), "kernel.thp-mode")


def test_sysctl_expectations() -> None:
    snap = recorded("fleet-a1")
    sysctls = snap["facts"]["kernel"]["sysctls"]
    assert not fired(judge(snap), "kernel.sysctl-mismatch")  # nothing expected by default
    name, value = sorted(sysctls.items())[0]
    findings = fired(judge(snap, f'kernel.sysctl_expected={{"{name}": "{value}", vm.nonexistent: "1"}}'),
                     "kernel.sysctl-mismatch")
    assert [(f.item, f.evidence["actual"]) for f in findings] == [("vm.nonexistent", None)]
    assert "unset" in findings[0].title


def test_lockups_or_oom_on_recorded_log_with_one_event_added() -> None:
    snap = recorded("ubuntu2004-dlami")
    assert not fired(judge(snap), "kernel.lockups-or-oom")
    snap = copy.deepcopy(snap)
    snap["facts"]["network"]["kernel_log"]["events"]["oom_kill"] = 2  # edited: no recorded OOM kill
    [f] = fired(judge(snap), "kernel.lockups-or-oom")
    assert "2 OOM kill(s)" in f.title


@pytest.mark.parametrize("name", ["al2", "al2023", "ubuntu2004-dlami", "fleet-golden"])
def test_every_builtin_rule_evaluates_without_error(name: str) -> None:
    findings = judge(recorded(name))
    assert [f for f in findings if f.evidence.get("status") in ("unknown", "error")] == []
