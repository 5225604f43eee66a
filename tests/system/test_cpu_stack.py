"""`--deep cpu`: perf kernel stacks of the hottest core (probe section cpu_stack → facts.cpu_stack → rule).

The parser and judge tests read output the probe printed on this machine (trimmed); the real test runs the
probe on the local host with a thread hammering the root memory cgroup's memory.stat while thousands of
real dying memcgs exist, and shows memory-cgroup frames at the top of that core's kernel stacks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from auditor.collect.collectors import COLLECTORS, run_collector
from auditor.collect.parsers.cpu_stack import parse_cpu_stack
from auditor.collect.sections import Section
from auditor.judge.engine import Judge
from auditor.judge.rules import load_rules
from tests.fleet import memcg

RULE = "cpu.hot-core-in-memcg-code"

# Printed by the probe with --deep-cpu on this 2-core VM (kernel 6.18, perf 6.1) while a thread read
# /sys/fs/cgroup/memory/memory.stat in a loop with 8,000 dying memcgs; trimmed to the first few lines of
# each list, plus one malformed and one duplicate line a hostile host could add.
SAMPLED = """\
requested=1
core=1
busiest_tid=4242
incl 231 entry_SYSCALL_64_after_hwframe
incl 231 do_syscall_64
incl 212 memory_stat_show
incl 205 memcg1_stat_format
incl 98 mem_cgroup_flush_stats
incl 2 not a function line
kernel_samples=240
memcg_samples=214
samples=249
self 61 memcg1_stat_format
self 40 vsnprintf
self 40 vsnprintf
self 9 _raw_spin_unlock_irqrestore
"""

CPU = """\
ncpu=2
--- threads
4241 4242 1 98 96 python3
"""


def test_not_requested_is_just_that() -> None:
    assert parse_cpu_stack("requested=0\n") == {"requested": False}


def test_sampled_stack_parses_to_shares_sorted_and_deduplicated() -> None:
    facts = parse_cpu_stack(SAMPLED, CPU)
    assert facts == {
        "requested": True, "core": 1, "busiest_tid": 4242, "busiest_comm": "python3",
        "samples": 249, "kernel_samples": 240, "memcg_share_pct": 85.9,
        "self": [
            {"function": "memcg1_stat_format", "samples": 61, "share_pct": 24.5},
            {"function": "vsnprintf", "samples": 40, "share_pct": 16.1},
            {"function": "_raw_spin_unlock_irqrestore", "samples": 9, "share_pct": 3.6},
        ],
        "inclusive": [
            {"function": "do_syscall_64", "samples": 231, "share_pct": 92.8},
            {"function": "entry_SYSCALL_64_after_hwframe", "samples": 231, "share_pct": 92.8},
            {"function": "memory_stat_show", "samples": 212, "share_pct": 85.1},
            {"function": "memcg1_stat_format", "samples": 205, "share_pct": 82.3},
            {"function": "mem_cgroup_flush_stats", "samples": 98, "share_pct": 39.4},
        ],
    }


def test_perf_missing_is_not_available_with_the_reason_not_a_failure() -> None:
    section = Section("cpu_stack", "requested=1\nreason=perf is not installed\n", 3)
    got = run_collector(COLLECTORS["cpu_stack"], {"cpu_stack": section})
    assert got.value is None and not got.failed
    assert got.error == "kernel stacks not available on this host: perf is not installed"


def _snapshot(cpu_stack: dict[str, Any] | None, max_core_pct: float = 97.0) -> dict[str, Any]:
    cpu = {"count": 2, "average": {"system_pct": 48.0}, "max_core": 1, "max_core_system_pct": max_core_pct,
           "cores": [{"cpu": 0, "system_pct": 1.0}, {"cpu": 1, "system_pct": max_core_pct}],
           "threads": [{"pid": 4241, "tid": 4242, "cpu": 1, "ticks": 98, "system_ticks": 96, "comm": "python3"}]}
    errors = {} if cpu_stack is not None else {"cpu_stack": "kernel stacks not available on this host: "
                                                            "perf is not installed"}
    return {"name": "h", "facts": {"cpu": cpu, "cpu_stack": cpu_stack}, "errors": errors}


def _findings(snapshot: dict[str, Any]) -> list[Any]:
    return [f for f in Judge(load_rules()).judge(snapshot) if f.rule == RULE]


def test_rule_names_the_memcg_share_and_the_top_functions() -> None:
    [f] = _findings(_snapshot(parse_cpu_stack(SAMPLED, CPU)))
    assert f.severity == "high"
    assert f.title == ("core 1 at 97.0% system: 85.9% of its perf samples are in memory-cgroup code (busiest "
                       "thread python3); innermost kernel functions: memcg1_stat_format 24.5%, vsnprintf 16.1%, "
                       "_raw_spin_unlock_irqrestore 3.6%")
    assert f.evidence["memcg_share_pct"] == 85.9 and f.evidence["top_inclusive"][2]["function"] == "memory_stat_show"


def test_rule_is_silent_when_not_asked_or_core_not_hot_or_not_memcg() -> None:
    assert _findings(_snapshot({"requested": False})) == []
    assert _findings(_snapshot(parse_cpu_stack(SAMPLED, CPU), max_core_pct=40.0)) == []
    other = parse_cpu_stack(SAMPLED.replace("memcg_samples=214", "memcg_samples=3"), CPU)
    assert _findings(_snapshot(other)) == []


def test_without_perf_the_rule_is_unknown_never_a_pass() -> None:
    [f] = _findings(_snapshot(None))
    assert f.evidence["status"] == "unknown" and f.severity == "info"
    assert "perf is not installed" in f.title


def _perf() -> str | None:
    perf = shutil.which("perf")
    if perf is None:
        return None
    ok = subprocess.run([perf, "stat", "-e", "cpu-clock", "-C", "0", "--", "true"], capture_output=True)
    return perf if ok.returncode == 0 else None


_HAMMER = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
fd = os.open("/sys/fs/cgroup/memory/memory.stat", os.O_RDONLY)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    os.lseek(fd, 0, 0)
    os.read(fd, 1 << 16)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (perf on a core, dying memcgs)")
def test_real_hot_thread_walking_memcgs_shows_memcg_frames_on_top(tmp_path: Path) -> None:
    from auditor.models import HostSpec
    from auditor.run.live_hosts import collect_host

    reason = memcg.available()
    if reason:
        pytest.skip(reason)
    if _perf() is None:
        pytest.skip("perf cannot sample here (install linux-perf)")
    core = (os.cpu_count() or 1) - 1
    generic = {"entry_SYSCALL_64_after_hwframe", "do_syscall_64", "x64_sys_call", "ksys_read", "vfs_read",
               "__x64_sys_read", "seq_read_iter", "seq_read"}
    attempts: list[str] = []
    with memcg.DyingMemcgs() as dying:
        made = dying.make(4000)
        assert made >= 2000  # other memcg users on the machine can release some meanwhile
        hammer = subprocess.Popen([sys.executable, "-c", _HAMMER, str(core), "120"])
        try:
            time.sleep(0.5)
            # The hammer shares its core with whatever else the machine runs: on a heavily loaded machine
            # one sample can be dominated by others, so up to three probes run; the claim is what the
            # core shows when the hot thread is what pins it.
            for _ in range(3):
                result = collect_host(HostSpec("local", "local"), binaries=["kubelet"], deep_cpu=True)
                assert result.status == "ok", result.error
                snap = result.snapshot
                assert snap is not None and "cpu_stack" not in snap["errors"], snap and snap["errors"]
                stack = snap["facts"]["cpu_stack"]
                assert stack["requested"] is True and stack["samples"] >= 20
                top = [f["function"] for f in stack["inclusive"] if f["function"] not in generic][:3]
                attempts.append(f"core {stack['core']} (busiest thread {stack['busiest_comm']}): "
                                f"{stack['samples']} samples, {stack['memcg_share_pct']}% in memcg code; top {top}")
                print(f"dying memcgs made: {made}; sampled {attempts[-1]}")
                for f in stack["inclusive"][:10]:
                    print(f"  {f['share_pct']:5.1f}%  {f['function']}")
                memcg_top = any("memcg" in n or "mem_cgroup" in n or n == "memory_stat_show" for n in top)
                if stack["core"] == core and (stack["memcg_share_pct"] or 0) >= 20 and memcg_top:
                    break
            else:
                pytest.fail("no probe showed memory-cgroup code on the hot core:\n" + "\n".join(attempts))
        finally:
            hammer.kill()
            hammer.wait()


@pytest.mark.fleet
def test_fleet_host_without_perf_says_not_available_never_pass(fleet: Any, tmp_path: Path) -> None:
    """The fleet's hosts have no perf: `scan --deep cpu` reports the rule as could-not-be-evaluated, with
    the reason, and the scan is still complete (exit 0 or 1, never 3)."""
    import io
    import json

    import yaml

    from auditor.cli import main
    from auditor.context import Env

    inventory = yaml.safe_load(fleet.inventory_path.read_text())
    inventory["hosts"] = [h for h in inventory["hosts"] if h["name"] == "a1"]
    one = tmp_path / "a1.yaml"
    one.write_text(yaml.safe_dump(inventory))
    out = io.StringIO()
    code = main(["scan", "-i", str(one), "--deep", "cpu", "--format", "json", "--out", str(tmp_path / "r")],
                Env(out, io.StringIO()))
    assert code in (0, 1), out.getvalue()
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    [host] = doc["hosts"]
    assert host["status"] == "ok" and host["complete"] is True
    [finding] = [f for f in doc["findings"] if f["rule"] == RULE]
    assert finding["evidence"]["status"] == "unknown" and finding["severity"] == "info"
    assert "perf is not installed" in finding["title"]
