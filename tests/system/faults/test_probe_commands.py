"""Every external command the probe runs, failing the way real tools fail, on a real fleet host.

The command list is generated from the probe itself: a run on the host with every executable of its PATH
wrapped to log its name, plus every name the probe asks for with `has X` (commands a host may lack). A
command added to the probe is a failing test until it is classified here.
Each case puts one shim first in the probe's PATH — the probe's own text with its PATH line extended by a
per-case directory, nothing else changed — and runs it on fleet host a3 (real systemd, real dpkg, real
cgroups) through nsenter, then builds the snapshot as a scan does. A shim fails as tools do (status 1 with
a real-looking message on stderr), prints garbage (status 0), or hangs.

What must hold: the command's own areas are failed, each with a reason that names the command; no other area
fails; and no area that still reads as collected has changed a stable fact against a clean run. A failed
command is never an empty answer. `test_fault_table` prints the table: command, fault, areas marked, exit.
"""

from __future__ import annotations

import re
import shlex
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from auditor.collect.framing import new_nonce, with_nonce
from auditor.collect.probe import DEFAULT_BINARIES, probe_script
from auditor.collect.snapshot import build_snapshot
from auditor.compare.normalize import normalize
from auditor.models import CommandResult, HostSpec
from tests.fleet import Fleet

pytestmark = pytest.mark.fleet

HOST = "a3"
PROBE_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SHIM_ROOT = "opt/ami-auditor-faults"  # inside the host's root; one directory per case
# Areas whose facts any process on this machine moves between two runs (the kernel's cgroups, the CPU window).
MOVING = ("cgroups", "cpu", "cpu_stack")
# The probe's facility commands: what each one's failure must fail. `also`: areas it may fail besides
# (a second use of the command); `bounded`: the probe runs it under `timeout`, so a hang is a timed-out area.
# `garbage`: output that is not the command's format is detected (False: any text is a valid answer to
# the parser, so garbage cannot be told from facts; the table says so).
@dataclass(frozen=True)
class Facility:
    areas: frozenset[str]
    message: str
    also: frozenset[str] = frozenset()
    bounded: bool = True
    garbage: bool = True


def _f(areas: str, message: str, also: str = "", bounded: bool = True, garbage: bool = True) -> Facility:
    return Facility(frozenset(areas.split()), message, frozenset(also.split()), bounded, garbage)


FACILITIES: dict[str, Facility] = {
    "systemctl": _f("systemd", "Failed to connect to bus: Transport endpoint is not connected"),
    # journalctl -k falling over to dmesg, which a container may not read: network may fail with it
    "journalctl": _f("systemd", "Failed to get journal access: Permission denied", also="network", garbage=False),
    "dpkg-query": _f("packages binaries", "dpkg-query: error: unable to access the dpkg database directory "
                     "/var/lib/dpkg: Permission denied", garbage=False),
    "ethtool": _f("network", "Cannot get driver information: Input/output error"),
    # find also lists the NVIDIA modules of installed kernels (a host without /lib/modules never runs it)
    "find": _f("cgroups", "find: 'memory/system.slice': Permission denied", also="kernel"),
    "df": _f("disk", "df: /var/lib/kubelet: Permission denied"),
    # only when installed (chrony, the Amazon Linux default): a shim installs it
    "chronyc": _f("proc", "501 Not authorised"),
    "sha256sum": _f("binaries hygiene", "sha256sum: -: Input/output error"),
    "stat": _f("cgroups binaries", "stat: cannot read file system information for '/sys/fs/cgroup': "
               "Permission denied", also="hygiene", bounded=False),
    "du": _f("hygiene", "du: cannot read directory '/var/cache/apt/archives/partial': Permission denied"),
    # network compares the ENA version with the release (in-tree drivers): its failing uname fails it too
    "uname": _f("kernel", "uname: cannot get system name: Operation not permitted", also="network", bounded=False),
    # only when installed: a shim installs them
    "docker": _f("ecs", "permission denied while trying to connect to the docker API at unix:///var/run/docker.sock",
                 garbage=False),
    "rpm": _f("binaries", "error: cannot open Packages database in /var/lib/rpm", garbage=False),
    # dmesg runs only when journalctl -k fails (the journalctl case covers it): a fault of its own changes nothing
    "dmesg": _f("", "dmesg: read kernel buffer failed: Operation not permitted", garbage=False),
    # IMDS: off EC2 (the fleet) a failing curl is what no IMDS looks like; host labels only, no area
    "curl": _f("", "curl: (7) Failed to connect to 169.254.169.254 port 80", garbage=False),
    # --deep cpu only (off by default): its failures are that opt-in section's own reasons
    "perf": _f("", "perf: permission denied", garbage=False),
}
# The probe's own toolkit (text tools and process helpers). Their failure must never change a fact
# silently: the host is incomplete, or every fact a clean run gives is unchanged.
TOOLKIT = frozenset([
    "awk", "base64", "cat", "cut", "date", "grep", "head", "id", "ionice", "ls", "readlink", "renice", "sed",
    "sleep", "sort", "tail", "timeout", "tr", "xargs",
])
# Binaries the probe fingerprints, and runs only with --exec-versions: never run by default.
KEY_BINARIES = frozenset([
    "kubelet", "kubectl", "kube-proxy", "containerd", "dockerd", "runc", "crictl",
    "nvidia-container-runtime", "nvidia-smi",
])


def probe_commands(fleet: Fleet) -> set[str]:
    """Every external command the probe runs on the host, traced: a wrapper for every executable in the
    probe's PATH logs its name and runs the real one; plus every name the probe asks for with `has NAME`
    (commands the host may lack: a shim case installs them)."""
    root = fleet.host(HOST).root
    trace = root / SHIM_ROOT / "trace"
    shutil.rmtree(trace, ignore_errors=True)
    trace.mkdir(parents=True)
    for d in reversed(PROBE_PATH.split("=", 1)[1].split(":")):  # the first directory's wins, as in PATH
        for real in (root / d.lstrip("/")).glob("*"):
            if real.is_file() and real.stat().st_mode & 0o111 and re.fullmatch(r"[\w.+-]+", real.name):
                wrapper = trace / real.name
                wrapper.write_text(f"#!/bin/sh\nprintf '%s\\n' {real.name} >>/{SHIM_ROOT}/trace/.log\n"
                                   f"exec {d}/{real.name} \"$@\"\n")
                wrapper.chmod(0o755)
    try:
        result, _ = _run_probe(fleet, "trace", 90.0)
        assert result.exit_status == 0, result.stderr
        ran = set((trace / ".log").read_text().split())
    finally:
        shutil.rmtree(trace, ignore_errors=True)
    code = "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in probe_script().splitlines())
    return ran | set(re.findall(r"(?:^|[;&|!{(]|\bif|\bthen)\s*has ([a-z][a-z0-9_-]*)", code, re.M))


SHIMS = {
    "fail": "#!/bin/sh\nprintf '%s\\n' {message} >&2\nexit {status}\n",
    "garbage": "#!/bin/sh\nprintf '\\177ELF\\002\\001 ###garbage### 0xdeadbeef\\n#!@ junk\\n'\nexit 0\n",
    "hang": "#!/bin/sh\nexec /bin/sleep 86398\n",
}


@dataclass
class Outcome:
    command: str
    fault: str
    snapshot: dict[str, Any]
    seconds: float

    @property
    def failed(self) -> list[str]:
        return list(self.snapshot["probe"]["failed_areas"])

    @property
    def complete(self) -> bool:
        return bool(self.snapshot["probe"]["complete"]) and not self.failed

    @property
    def exit_code(self) -> int:
        """What `scan` exits with for this host alone (a3 has no finding at the default --fail-on)."""
        return 0 if self.complete else 3


def _run_probe(fleet: Fleet, case: str, deadline: float) -> tuple[CommandResult, str]:
    nonce = new_nonce()
    script = probe_script().replace(PROBE_PATH, f"PATH=/{SHIM_ROOT}/{case}:" + PROBE_PATH.split("=", 1)[1], 1)
    assert f"/{SHIM_ROOT}/{case}:" in script, "the probe's PATH line moved: update PROBE_PATH"
    started = time.monotonic()
    try:
        done = fleet.exec(HOST, ["sh", "-s", "--", *DEFAULT_BINARIES], timeout=deadline,
                          input=with_nonce(script, nonce))
        result = CommandResult(done.stdout, done.stderr, done.returncode, time.monotonic() - started)
    except Exception as exc:  # subprocess.TimeoutExpired: what the transport's deadline does to a hung probe
        out = getattr(exc, "stdout", b"") or b""
        result = CommandResult(out.decode() if isinstance(out, bytes) else out, "", 124,
                               time.monotonic() - started, truncated=False)
    return result, nonce


def run_case(fleet: Fleet, command: str | None, fault: str, deadline: float = 45.0) -> Outcome:
    case = f"{command or 'clean'}-{fault}"
    shim_dir = fleet.host(HOST).root / SHIM_ROOT / case
    shutil.rmtree(shim_dir, ignore_errors=True)
    shim_dir.mkdir(parents=True)
    if command:
        message = FACILITIES[command].message if command in FACILITIES else \
            f"{command}: error while loading shared libraries: libc.so.6: cannot open shared object file"
        status = 1 if command in FACILITIES else 127
        shim = shim_dir / command
        shim.write_text(SHIMS[fault].format(message=shlex.quote(message), status=status))
        shim.chmod(0o755)
    try:
        started = time.monotonic()
        result, nonce = _run_probe(fleet, case, deadline)
        snapshot = build_snapshot(HostSpec(HOST, f"ssh://{HOST}"), result, nonce)
        return Outcome(command or "-", fault, snapshot, time.monotonic() - started)
    finally:
        shutil.rmtree(shim_dir, ignore_errors=True)


def stable_facts(snapshot: dict[str, Any], area: str) -> dict[str, Any]:
    """The area's stable facts as compare sees them (`facts.AREA.…` paths, volatile ones left out)."""
    prefix = f"facts.{area}"
    return {k: v for k, v in normalize(snapshot).flat.items() if k.startswith((prefix + ".", prefix + "["))}


@pytest.fixture(scope="module")
def outcomes(fleet: Fleet) -> dict[tuple[str, str], Outcome]:
    """Every case, run on a3 a few at a time (each with its own shim directory), plus a clean run."""
    cases = [(None, "clean")] + [(c, "fail") for c in sorted(FACILITIES) + sorted(TOOLKIT)] + \
        [(c, "garbage") for c in sorted(FACILITIES) if FACILITIES[c].areas] + \
        [(c, "hang") for c in sorted(FACILITIES) if FACILITIES[c].areas]
    outcomes: dict[tuple[str, str], Outcome] = {}
    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            # a hang of a command the probe runs without `timeout` lasts until the scanner's deadline
            futures = {(c or "-", f): pool.submit(run_case, fleet, c, f,
                                                  15.0 if f == "hang" and not FACILITIES[c or ""].bounded else 90.0)
                       for c, f in cases}
            for key, future in futures.items():
                outcomes[key] = future.result()
    finally:  # the hang shims a probe killed from outside left behind (ours, by pid)
        pids = fleet.exec(HOST, ["pgrep", "-f", "^/bin/sleep 86398$"]).stdout.split()
        if pids:
            fleet.exec(HOST, ["kill", "-KILL", *pids])
    return outcomes


def test_every_probe_command_is_classified(fleet: Fleet) -> None:
    commands = probe_commands(fleet)
    classified = set(FACILITIES) | TOOLKIT | KEY_BINARIES
    assert commands - classified == set(), "classify the probe's new commands in FACILITIES or TOOLKIT"
    # some run only where the host has what they read (ls: cloud-init state; perf: --deep cpu)
    words = set(re.findall(r"[a-z][a-z0-9_-]*", probe_script()))
    assert (set(FACILITIES) | TOOLKIT) - words == set(), "commands the probe no longer runs"


def test_the_clean_run_is_complete(outcomes: dict[tuple[str, str], Outcome]) -> None:
    clean = outcomes[("-", "clean")]
    assert clean.complete, clean.snapshot["errors"]
    assert clean.snapshot["facts"]["systemd"]["units"], "a clean a3 has units"
    for area in ("os", "kernel", "systemd", "binaries", "hygiene", "network", "packages"):
        assert stable_facts(clean.snapshot, area), f"the comparison of {area} would be vacuous"


FAULTS = [(c, f) for c in sorted(FACILITIES) if FACILITIES[c].areas for f in ("fail", "garbage", "hang")
          if f != "garbage" or FACILITIES[c].garbage]


@pytest.mark.parametrize(("command", "fault"), FAULTS, ids=[f"{f}-{c}" for c, f in FAULTS])
def test_a_failing_facility_fails_its_areas(outcomes: dict[tuple[str, str], Outcome], command: str,
                                            fault: str) -> None:
    spec, got, clean = FACILITIES[command], outcomes[(command, fault)], outcomes[("-", "clean")]
    if fault == "hang" and not spec.bounded:  # no `timeout` around it: the scanner's deadline ends the probe
        assert not got.snapshot["probe"]["complete"] and "probe" in got.snapshot["errors"]
        return
    assert spec.areas <= set(got.failed), (got.failed, got.snapshot["errors"])
    assert set(got.failed) <= spec.areas | spec.also, got.snapshot["errors"]
    for area in spec.areas:
        reason = got.snapshot["errors"][area]
        wanted = {"fail": re.escape(command), "garbage": f"{re.escape(command)}|unparsable",
                  "hang": "timed out"}[fault]
        assert re.search(wanted, reason), (area, reason)
    for area in set(clean.snapshot["facts"]) - set(got.failed) - set(MOVING):
        assert stable_facts(got.snapshot, area) == stable_facts(clean.snapshot, area), area


@pytest.mark.parametrize("command", sorted(c for c in FACILITIES if FACILITIES[c].areas and not FACILITIES[c].garbage))
def test_garbage_from_a_free_text_command_is_read_as_its_answer(outcomes: dict[tuple[str, str], Outcome],
                                                                 command: str) -> None:
    """The limit, stated as a test: where any text is a valid answer (journal messages counted by pattern, a
    package owner's name, a container's fields), garbage reads as an answer — nothing else is harmed."""
    got, clean = outcomes[(command, "garbage")], outcomes[("-", "clean")]
    assert got.snapshot["probe"]["complete"], got.snapshot["errors"]
    for area in set(clean.snapshot["facts"]) - FACILITIES[command].areas - set(MOVING):
        assert stable_facts(got.snapshot, area) == stable_facts(clean.snapshot, area), area


@pytest.mark.parametrize("command", sorted(c for c in FACILITIES if not FACILITIES[c].areas))
def test_a_fallback_or_opt_in_command_changes_nothing_by_default(outcomes: dict[tuple[str, str], Outcome],
                                                                  command: str) -> None:
    got, clean = outcomes[(command, "fail")], outcomes[("-", "clean")]
    assert got.complete, got.snapshot["errors"]
    for area in set(clean.snapshot["facts"]) - set(MOVING):
        assert stable_facts(got.snapshot, area) == stable_facts(clean.snapshot, area), area


@pytest.mark.parametrize("command", sorted(TOOLKIT))
def test_a_failing_tool_never_changes_a_fact_silently(outcomes: dict[tuple[str, str], Outcome],
                                                      command: str) -> None:
    got, clean = outcomes[(command, "fail")], outcomes[("-", "clean")]
    for area in set(clean.snapshot["facts"]) - set(got.failed) - set(MOVING):
        if got.snapshot["facts"].get(area) is None and area in got.snapshot["errors"]:
            continue  # not collected, and said so
        assert stable_facts(got.snapshot, area) == stable_facts(clean.snapshot, area), \
            f"{command} failing changed {area} without failing it"
    for area in got.failed:
        assert got.snapshot["errors"].get(area), area


def test_fault_table(outcomes: dict[tuple[str, str], Outcome], capsys: pytest.CaptureFixture[str]) -> None:
    """The per-command fault table (printed with -s, and kept in the test log): command, fault, areas
    marked failed, exit code a scan of this host gives."""
    rows = [f"{'command':<12} {'fault':<8} {'exit':<4} {'seconds':>7}  areas failed (reason of the first)"]
    for (command, fault), got in sorted(outcomes.items()):
        first = got.failed[0] if got.failed else (next(iter(got.snapshot["errors"]), None))
        reason = (got.snapshot["errors"].get(first) or "") if first else ""
        rows.append(f"{command:<12} {fault:<8} {got.exit_code:<4} {got.seconds:>7.1f}  "
                    f"{','.join(got.failed) or '-'}  {reason[:110]}")
    with capsys.disabled():
        print("\n[fault table] probe commands on fleet host " + HOST + "\n" + "\n".join(rows))
    assert len(rows) == len(outcomes) + 1
