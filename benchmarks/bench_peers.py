"""Peer benchmark: ami-auditor vs pytest-testinfra vs Ansible vs a bare single-exec paramiko script,
gathering the same facts from the same real fleet hosts, on loopback and through a user-space delay
proxy (benchmarks/delayproxy.py) in front of each host's sshd at 0, 25 and 50 ms one-way.

    pip install -e '.[bench]'
    AMI_AUDITOR_FLEET_NET=N python3 -m benchmarks.bench_peers [--hosts 6] [--delays loopback,0,25,50] [--rounds 3]

Run as root; boots the test fleet (Fleet(extra=hosts-6) when more than the 6 scenario hosts are asked
for), or attaches to a running one with AMI_AUDITOR_FLEET_ATTACH=1. Every tool is a whole process
(start-up included), one connection per host at once (testinfra and the bare script: a thread per host;
Ansible: forks = hosts; ami-auditor: --parallel = hosts). Per setting, tools run in a rotating order,
`--rounds` times; the table shows medians: wall, scanner CPU (user+sys of the process and the children
it reaped — Ansible's ssh ControlPersist masters detach and are not counted), round trips per host (the
client's turns counted by the proxy) and ami-auditor's wall over the peer's. Prints figures; asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditor.collect.probe import DEFAULT_BINARIES  # noqa: E402
from tests.fleet import Fleet  # noqa: E402
from tests.fleet.fleet import SCENARIO  # noqa: E402

PROXY_PORT = 2222
TOOLS = ("ami-auditor", "bare-script", "testinfra", "ansible")

# What each peer is asked for: every fact area ami-auditor collects that the peer can express.
COVERAGE = (
    ("os-release, kernel (uname, cmdline, THP, hugepages, memory)", "yes", "yes", "setup + slurp"),
    ("identity (hostname, boot id, uptime, machine id)", "yes", "yes", "setup"),
    ("23 sysctls", "yes", "host.sysctl × 23", "shell"),
    ("systemd version, all unit files + state", "yes", "run", "command"),
    ("runtime state + restart count of each loaded/enabled unit", "yes",
     "service().systemd_properties per unit", "service_facts + one `systemctl show`"),
    ("restart evidence from PID 1's journal", "yes", "run", "shell"),
    ("/proc/cgroups + live cgroup dirs per v1 controller", "yes", "file + run per controller", "slurp + shell"),
    ("key binaries: path, sha256, stat, owner package + version, URL evidence", "yes",
     "file().sha256sum etc. + package()", "stat loop + shell"),
    ("ECS config, EKS release", "yes", "file", "slurp"),
    ("NICs: driver, state, MTU, ethtool -S (ENA) counters", "yes", "interface + file + run", "setup + shell"),
    ("kernel log (driver trouble)", "yes", "run", "shell"),
    ("per-core CPU over a 1 s window", "yes", "file × 2", "slurp + shell (sleep 1)"),
    ("installed packages", "yes", "run (no listing API)", "command (package_facts needs python3-apt)"),
    ("per-thread CPU, cgroup v2 stats, IMDS, cloud-init data", "yes", "—", "—"),
)


@dataclass
class Run:
    tool: str
    wall: float
    cpu: float
    turns: float
    ok: bool
    note: str = ""


@dataclass
class Setting:
    name: str
    delay_ms: float | None  # None: straight to sshd on loopback
    runs: list[Run] = field(default_factory=list)


def _loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def _host_targets(fleet: Fleet, n: int) -> list[tuple[str, str]]:
    hosts = [h for h in fleet.hosts if h.name != "golden"][:n]
    if len(hosts) < n:
        raise SystemExit(f"the fleet has {len(hosts)} hosts besides golden; asked for {n}")
    return [(h.name, h.address) for h in hosts]


def _write_inputs(fleet: Fleet, hosts: list[tuple[str, str]], port: int, work: Path) -> dict[str, Path]:
    """Inventory (ami-auditor), HOSTS.json (testinfra, bare script), INI (Ansible), known_hosts for `port`."""
    kh_lines = fleet.known_hosts.read_text().splitlines()
    kh = work / f"known_hosts.{port}"
    if port == 22:
        kh.write_text("\n".join(kh_lines) + "\n")
    else:
        wanted = {addr for _, addr in hosts}
        out = []
        for line in kh_lines:
            parts = line.split(" ", 1)
            if len(parts) == 2 and parts[0] in wanted:
                out.append(f"[{parts[0]}]:{port} {parts[1]}")
        kh.write_text("\n".join(out) + "\n")
    inv = work / f"inventory.{port}.yaml"
    lines = ["defaults:", f"  ssh: {{user: root, identity_file: {fleet.identity_file}, known_hosts: {kh}}}", "hosts:"]
    lines += [f"- {{name: {name}, target: 'ssh://root@{addr}:{port}'}}" for name, addr in hosts]
    inv.write_text("\n".join(lines) + "\n")
    hj = work / f"hosts.{port}.json"
    hj.write_text(json.dumps({"identity": str(fleet.identity_file), "known_hosts": str(kh),
                              "binaries": list(DEFAULT_BINARIES),
                              "hosts": [[name, addr, port] for name, addr in hosts]}))
    ini = work / f"ansible.{port}.ini"
    ini.write_text("[fleet]\n" + "".join(f"{name} ansible_host={addr} ansible_port={port}\n" for name, addr in hosts)
                   + "[fleet:vars]\nansible_user=root\n"
                   + f"ansible_ssh_common_args='-o UserKnownHostsFile={kh} -o StrictHostKeyChecking=yes'\n")
    return {"inventory": inv, "hosts_json": hj, "ini": ini}


def _command(tool: str, files: dict[str, Path], n: int, work: Path) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    py = sys.executable
    if tool == "ami-auditor":
        out = work / "snapshots"
        shutil.rmtree(out, ignore_errors=True)
        return [py, "-c", "import sys; from auditor.cli import main; sys.exit(main())", "collect", "-i",
                str(files["inventory"]), "-o", str(out), "--parallel", str(n)], env
    if tool == "bare-script":
        return [py, str(ROOT / "benchmarks/peers/bare_paramiko.py"), str(files["hosts_json"])], env
    if tool == "testinfra":
        return [py, str(ROOT / "benchmarks/peers/testinfra_gather.py"), str(files["hosts_json"])], env
    cp = work / "cp"
    shutil.rmtree(cp, ignore_errors=True)
    cp.mkdir()
    env.update(ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_FORKS=str(n), ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
               ANSIBLE_PRIVATE_KEY_FILE=env.get("BENCH_IDENTITY", ""), ANSIBLE_SSH_CONTROL_PATH_DIR=str(cp),
               ANSIBLE_LOCAL_TEMP=str(work / "ansible-tmp"), ANSIBLE_RETRY_FILES_ENABLED="False",
               ANSIBLE_NOCOLOR="1")
    binaries = json.dumps({"binaries": list(DEFAULT_BINARIES)})
    return ["ansible-playbook", "-i", str(files["ini"]), "-e", binaries,
            str(ROOT / "benchmarks/peers/ansible_gather.yml")], env


def _close_ansible_masters(work: Path) -> None:
    """Ansible leaves ssh ControlPersist masters behind (ControlPersist=60s): end them so the next run
    starts cold and the proxy records the connection."""
    cp = work / "cp"
    for sock in cp.glob("*") if cp.exists() else []:
        subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"], capture_output=True, timeout=10)


def _run_tool(tool: str, files: dict[str, Path], n: int, work: Path, stats: Path | None,
              setting_delay_ms: float | None = None) -> Run:
    cmd, env = _command(tool, files, n, work)
    if stats is not None:
        stats.write_text("")
    log = work / f"{tool}.log"
    started = time.monotonic()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=work)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if tool == "ansible":
        _close_ansible_masters(work)
    cpu = usage.ru_utime + usage.ru_stime
    text = log.read_text(errors="replace")
    ok = proc.returncode == 0 and (tool != "ansible" or " failed=0" in text and "unreachable=0" in text)
    turns = 0.0
    if stats is not None:
        # the proxy writes a connection's line when both sides closed (each close is delayed too)
        time.sleep(0.5 + 0.004 * (setting_delay_ms or 0))
        per: dict[str, int] = {}
        for line in stats.read_text().splitlines():
            rec = json.loads(line)
            per[rec["listen"]] = per.get(rec["listen"], 0) + rec["turns"]
        turns = statistics.median(per.values()) if per else 0.0
    note = "" if ok else f"FAILED (rc {proc.returncode}); see {log}"
    return Run(tool, wall, cpu, turns, ok, note)


def _start_proxy(hosts: list[tuple[str, str]], delay_ms: float, stats: Path | None) -> subprocess.Popen[str]:
    pairs = [f"{addr}:{PROXY_PORT}={addr}:22" for _, addr in hosts]
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.delayproxy", "--delay-ms", str(delay_ms),
                             "--stats", str(stats), *pairs], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit("delay proxy did not start")
    return proc


def bench(fleet: Fleet, n: int, delays: list[str], rounds: int, tools: list[str],
          ansible_rounds: int | None = None) -> list[Setting]:
    hosts = _host_targets(fleet, n)
    work = Path(tempfile.mkdtemp(prefix="ami-auditor-bench-peers-"))
    os.environ["BENCH_IDENTITY"] = str(fleet.identity_file)
    settings = []
    try:
        for d in delays:
            setting = Setting(d if d == "loopback" else f"{d} ms one-way", None if d == "loopback" else float(d))
            port = 22 if setting.delay_ms is None else PROXY_PORT
            files = _write_inputs(fleet, hosts, port, work)
            stats = work / "proxy.jsonl" if setting.delay_ms is not None else None  # loopback: no proxy
            proxy = _start_proxy(hosts, setting.delay_ms, stats) if setting.delay_ms is not None else None
            try:
                for r in range(rounds):
                    order = tools[r % len(tools):] + tools[:r % len(tools)]  # rotate who goes first
                    for tool in order:
                        if tool == "ansible" and ansible_rounds is not None and r >= ansible_rounds:
                            continue
                        run = _run_tool(tool, files, n, work, stats, setting.delay_ms)
                        setting.runs.append(run)
                        print(f"  [{setting.name}] round {r + 1} {tool:12s} wall {run.wall:6.2f} s  cpu "
                              f"{run.cpu:5.2f} s  turns/host {run.turns:5.0f}  load {_loadavg()} {run.note}",
                              file=sys.stderr, flush=True)
            finally:
                if proxy is not None:
                    proxy.send_signal(signal.SIGTERM)
                    proxy.wait(timeout=10)
            settings.append(setting)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return settings


def table(settings: list[Setting], n: int, tools: list[str]) -> str:
    """Markdown table of medians; round trips come from the 0 ms proxy setting (the same at every delay)."""
    turns: dict[str, float] = {}
    for s in settings:
        if s.delay_ms is not None:
            for tool in tools:
                vals = [r.turns for r in s.runs if r.tool == tool and r.ok]
                if vals and tool not in turns:
                    turns[tool] = statistics.median(vals)
    counts = {t: sum(1 for r in settings[0].runs if r.tool == t) for t in tools}
    rounds = ", ".join(f"{t} {c}" for t, c in counts.items())
    rows = [f"{n} hosts; medians of rounds per link ({rounds}); load at the end {_loadavg()}", "",
            "| link | tool | wall s | scanner CPU s | round trips/host | ami-auditor wall ÷ tool wall |",
            "|---|---|---|---|---|---|"]
    for s in settings:
        med = {}
        for tool in tools:
            ok = [r for r in s.runs if r.tool == tool and r.ok]
            med[tool] = (statistics.median(r.wall for r in ok), statistics.median(r.cpu for r in ok)) if ok else None
        ours = med.get("ami-auditor")
        for tool in tools:
            m = med[tool]
            if m is None:
                rows.append(f"| {s.name} | {tool} | failed | | | |")
                continue
            ratio = f"{ours[0] / m[0]:.2f}" if ours and tool != "ami-auditor" else "—"
            rt = f"{turns[tool]:.0f}" if tool in turns else "—"
            rows.append(f"| {s.name} | {tool} | {m[0]:.2f} | {m[1]:.2f} | {rt} | {ratio} |")
    return "\n".join(rows)


def coverage() -> str:
    rows = ["| fact area | ami-auditor | testinfra | Ansible |", "|---|---|---|---|"]
    rows += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in COVERAGE]
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=6, help="fleet hosts to gather from (default 6)")
    ap.add_argument("--delays", default="loopback,0,25,50", help="loopback and/or one-way delays in ms")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ansible-rounds", type=int, help="fewer rounds for Ansible (its runs take minutes)")
    ap.add_argument("--tools", default=",".join(TOOLS))
    args = ap.parse_args()
    tools = [t for t in args.tools.split(",") if t]
    unknown = set(tools) - set(TOOLS)
    if unknown:
        raise SystemExit(f"unknown tools {sorted(unknown)}; known: {', '.join(TOOLS)}")
    delays = [d for d in args.delays.split(",") if d]
    if os.environ.get("AMI_AUDITOR_FLEET_ATTACH") == "1":
        fleet = Fleet.attach()
        settings = bench(fleet, args.hosts, delays, args.rounds, tools, args.ansible_rounds)
    else:
        with Fleet(extra=max(0, args.hosts - (len(SCENARIO) - 1))) as fleet:
            settings = bench(fleet, args.hosts, delays, args.rounds, tools, args.ansible_rounds)
    print(table(settings, args.hosts, tools))
    print()
    print(coverage())


if __name__ == "__main__":
    main()
