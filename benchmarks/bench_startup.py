"""Start-up and scanner CPU: how long `ami-auditor --help` and `rules list` take, which heavy libraries
they load, and (with -i INVENTORY) the scanner's CPU per host beyond start-up.

    python3 -m benchmarks.bench_startup [--runs N] [-i INVENTORY [--parallel N]]

Every figure is a median over --runs whole processes (after one warm-up run, with Python's bytecode
cache on in a temporary directory, as an installed wheel has it). `rules list` validates every pack on
each run. "cpu" is the process's user+system
time (os.wait4), which a busy machine inflates far less than wall time. With an inventory (for
example the test fleet's: `AMI_AUDITOR_FLEET_NET=N python -m tests.fleet up --extra 13`), it runs
`collect` on 1 host and on all of them and prints the marginal CPU per host: (cpu(all) - cpu(1)) /
(hosts - 1) — SSH handshake, decoding, parsing, schema validation and writing the snapshot included.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("boto3", "botocore", "deepdiff", "jinja2", "paramiko", "jsonschema", "yaml", "jmespath", "re2")
LOADED = ("import contextlib, io, json, sys\nfrom auditor.cli import main\n"
          "with contextlib.redirect_stdout(io.StringIO()):\n"
          "    try:\n        main(sys.argv[1:])\n    except SystemExit:\n        pass\n"
          "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, cpu s, exit status) of one whole process."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, proc.returncode


def median_run(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float, int]:
    run(argv, env)  # warm-up: bytecode cache, page cache
    samples = [run(argv, env) for _ in range(runs)]
    return (statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples), samples[-1][2])


def heavy_loaded(args: list[str], env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", LOADED, *args], capture_output=True, text=True, env=env,
                         cwd=ROOT, check=False).stdout
    lines = out.strip().splitlines()
    return sorted(set(json.loads(lines[-1])) & set(HEAVY)) if lines else ["?"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("-i", "--inventory", help="also measure scanner CPU per host on these hosts")
    parser.add_argument("--parallel", type=int, default=8)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup.") as tmp:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pyc")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cli = [sys.executable, "-m", "auditor.cli"]
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; medians of {opts.runs} runs")
        print(f"{'command':<34} {'wall s':>8} {'cpu s':>8}  heavy libraries loaded")
        base = median_run([sys.executable, "-c", "pass"], env, opts.runs)
        print(f"{'python -c pass':<34} {base[0]:8.3f} {base[1]:8.3f}")
        for args in (["--help"], ["scan", "--help"], ["rules", "list"]):
            wall, cpu, _ = median_run([*cli, *args], env, opts.runs)
            print(f"{'ami-auditor ' + ' '.join(args):<34} {wall:8.3f} {cpu:8.3f}  "
                  f"{', '.join(heavy_loaded(args, env)) or '-'}")
        if opts.inventory:
            scanner_cpu(cli, opts.inventory, opts.parallel, env, opts.runs, Path(tmp))


def scanner_cpu(cli: list[str], inventory: str, parallel: int, env: dict[str, str], runs: int, tmp: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from auditor.targets.inventory import load_inventory

    names = [s.name for s in load_inventory(inventory)]
    common = ["collect", "-i", inventory, "--parallel", str(parallel), "-o", str(tmp / "snapshots")]
    single = tmp / "one.yaml"
    single.write_text(_one_host_inventory(inventory, names[0]))
    w1, c1, s1 = median_run([*cli, "collect", "-i", str(single), "-o", str(tmp / "one")], env, runs)
    wn, cn, sn = median_run([*cli, *common], env, runs)
    n = len(names)
    print(f"\ncollect, 1 host:   wall {w1:.2f} s, cpu {c1:.3f} s (exit {s1})")
    print(f"collect, {n} hosts: wall {wn:.2f} s, cpu {cn:.3f} s (exit {sn}, --parallel {parallel})")
    print(f"scanner CPU per host beyond start-up: {(cn - c1) / max(n - 1, 1) * 1000:.1f} ms")


def _one_host_inventory(inventory: str, name: str) -> str:
    """The inventory cut to one host (its defaults kept)."""
    import yaml

    doc = yaml.safe_load(Path(inventory).read_text())
    doc["hosts"] = [h for h in doc["hosts"] if h.get("name") == name]
    return yaml.safe_dump(doc)


if __name__ == "__main__":
    main()
