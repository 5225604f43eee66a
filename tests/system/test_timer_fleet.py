"""contrib/systemd on a real fleet host (systemd 252), installed as docs/deploy.md's systemd recipe says: the
wheel into /opt/ami-auditor/venv with the venv recipe (tests/deploy_host.py makes the host a Debian 12
instance: python3-venv, an offline pip index), the system user from ami-auditor.sysusers, the units,
the SSH key as a root-only file handed over by LoadCredential=, README and docs/ where Documentation= points.
Then: `systemd-analyze verify` clean,
`systemd-analyze security` exposure <= 2.0, the timer enabled and its service started for real by
systemd; the hardened scan sees the host's real units (ecs.service crash-looping on this AZ-b host) and
reaches a peer over SSH with the credential; node_exporter (Debian's binary) as its own unprivileged
user scrapes report.prom with `node_textfile_scrape_error 0`.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

from tests.deploy_host import DebianInstance
from tests.fleet import Fleet
from tests.wheelhouse import ROOT, wheelhouse

HOST = "b1"
PEER = "a1"
VENV = "/opt/ami-auditor/venv"
UNITS = ("ami-auditor.service", "ami-auditor.timer")
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
EXPORTER_UNIT = "test-node-exporter.service"
# What docs/deploy.md tells a user to run (after copying the wheel and the contrib files).
INSTALL = (f"python3 -m venv {VENV} && {VENV}/bin/pip install --quiet /var/tmp/{{wheel}} && "
           "systemd-sysusers && systemctl daemon-reload && systemctl enable --now ami-auditor.timer")


def _sh(fleet: Fleet, *argv: str, timeout: float = 300) -> str:
    done = fleet.exec(HOST, list(argv), timeout=timeout)
    assert done.returncode == 0, f"{argv}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _configure(fleet: Fleet, root: Path, wheel: Path) -> None:
    shutil.copy(wheel, root / "var/tmp" / wheel.name)
    for unit in UNITS:
        shutil.copy(ROOT / "contrib/systemd" / unit, root / "etc/systemd/system" / unit)
    (root / "etc/sysusers.d").mkdir(exist_ok=True)
    shutil.copy(ROOT / "contrib/systemd/ami-auditor.sysusers", root / "etc/sysusers.d/ami-auditor.conf")
    (root / "etc/sysusers.d/test-prometheus.conf").write_text('u prometheus - "node_exporter" /nonexistent\n')
    config = root / "etc/ami-auditor"
    config.mkdir(exist_ok=True)
    shutil.copy(fleet.identity_file, config / "id_ed25519")
    (config / "id_ed25519").chmod(0o600)  # root's only: the scan gets it through LoadCredential=
    shutil.copy(fleet.known_hosts, config / "known_hosts")
    peer = fleet.host(PEER)
    (config / "inventory.yaml").write_text(
        "hosts:\n"
        "  - {name: self, target: local, labels: {az: us-east-1b}}\n"
        f"  - name: {PEER}\n    target: ssh://root@{peer.address}\n    labels: {{az: {peer.az}}}\n"
        "    ssh: {identity_file: /run/credentials/ami-auditor.service/ssh-key,"
        " known_hosts: /etc/ami-auditor/known_hosts}\n")
    shutil.copy(NODE_EXPORTER, root / NODE_EXPORTER.lstrip("/"))
    doc = root / "usr/share/doc/ami-auditor"  # the recipe's `cp -r README.md docs /usr/share/doc/ami-auditor/`
    doc.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "README.md", doc / "README.md")
    shutil.copytree(ROOT / "docs", doc / "docs", dirs_exist_ok=True)


def _cleanup(fleet: Fleet, root: Path) -> None:
    fleet.exec(HOST, ["systemctl", "stop", EXPORTER_UNIT])
    fleet.exec(HOST, ["systemctl", "disable", "--now", "ami-auditor.timer"])
    for unit in UNITS:
        (root / "etc/systemd/system" / unit).unlink(missing_ok=True)
    fleet.exec(HOST, ["systemctl", "daemon-reload"])
    for user in ("ami-auditor", "prometheus"):
        fleet.exec(HOST, ["userdel", user])
    fleet.exec(HOST, ["rm", "-rf", "/run/ami-auditor"])
    for path in ("opt/ami-auditor", "etc/ami-auditor", "var/lib/ami-auditor", "usr/share/doc/ami-auditor"):
        shutil.rmtree(root / path, ignore_errors=True)
    for path in ("etc/sysusers.d/ami-auditor.conf", "etc/sysusers.d/test-prometheus.conf", NODE_EXPORTER.lstrip("/"),
                 *(f"var/tmp/{w.name}" for w in (root / "var/tmp").glob("ami_auditor-*.whl"))):
        (root / path).unlink(missing_ok=True)


@pytest.mark.fleet
def test_the_timer_service_scans_under_its_hardening_and_node_exporter_reads_it(
        fleet_ready_crashloop: Fleet, tmp_path: Path) -> None:
    fleet = fleet_ready_crashloop
    root = fleet.host(HOST).root
    wheels = tmp_path / "wheels"
    wheel = wheelhouse(wheels)
    with DebianInstance(root, wheels):
        try:
            _configure(fleet, root, wheel)
            _sh(fleet, "sh", "-c", INSTALL.format(wheel=wheel.name), timeout=600)
            verify = fleet.exec(HOST, ["systemd-analyze", "verify", *(f"/etc/systemd/system/{u}" for u in UNITS)])
            assert (verify.returncode, verify.stdout + verify.stderr) == (0, "")
            security = _sh(fleet, "systemd-analyze", "security", "--no-pager", "ami-auditor.service")
            exposure = float(re.search(r"Overall exposure level for ami-auditor\.service: ([0-9.]+)", security)[1])
            assert exposure <= 2.0, security
            documentation = _sh(fleet, "systemctl", "show", "ami-auditor.service", "-p", "Documentation")
            uris = documentation.strip().removeprefix("Documentation=").split()
            assert uris and all((root / u.removeprefix("file:///")).is_file() for u in uris), documentation
            timer = _sh(fleet, "systemctl", "show", "ami-auditor.timer", "-p", "ActiveState")
            assert "ActiveState=active" in timer
            fleet.exec(HOST, ["systemctl", "start", "ami-auditor.service"], timeout=600)  # oneshot: returns when done
            show = _sh(fleet, "systemctl", "show", "ami-auditor.service", "-p", "Result,ExecMainStatus")
            journal = _sh(fleet, "journalctl", "-u", "ami-auditor.service", "--no-pager", "-n", "40")
            assert "Result=success" in show, show + journal
            # under the hardening systemctl reached systemd: the real units, the crash loop among them
            units = re.search(r"\bself\b.*?(\d+) enabled units", journal)
            assert units and int(units[1]) > 0, journal
            prom = _sh(fleet, "cat", "/run/ami-auditor/report.prom")  # /run: the host's own tmpfs
            assert re.search(r'ami_auditor_unit_restarts\{host="self",unit="ecs.service"\} [1-9]', prom), prom
            # the peer over SSH with the key from LoadCredential=
            assert f'ami_auditor_host_up{{host="{PEER}",status="ok"}} 1' in prom, journal
            report = json.loads(_sh(fleet, "cat", "/run/ami-auditor/report.json"))
            assert {h["name"]: h["status"] for h in report["hosts"]} == {"self": "ok", PEER: "ok"}
            store = root / "var/lib/ami-auditor/history.sqlite3"
            assert store.stat().st_uid != 0 and (root / "var/lib/ami-auditor").stat().st_mode & 0o077 == 0
            listing = json.loads(_sh(fleet, f"{VENV}/bin/ami-auditor", "history", "list", "--store",
                                     "/var/lib/ami-auditor/history.sqlite3", "--json"))
            assert [(s["state"], s["hosts"]) for s in listing["scans"]] == [("complete", 2)]
            address = f"{fleet.host(HOST).address}:9100"
            _sh(fleet, "systemd-run", f"--unit={EXPORTER_UNIT}", "-p", "User=prometheus", NODE_EXPORTER,
                f"--web.listen-address={address}", "--collector.disable-defaults", "--collector.textfile",
                "--collector.textfile.directory=/run/ami-auditor")
            metrics = _scrape(f"http://{address}/metrics")
            assert "node_textfile_scrape_error 0" in metrics, metrics[-2000:]
            assert 'ami_auditor_host_up{host="self",status="ok"} 1' in metrics
        finally:
            _cleanup(fleet, root)


def _scrape(url: str, attempts: int = 50) -> str:
    """node_exporter's /metrics once it listens (systemd-run returns when it started, not when it binds)."""
    for _ in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
                return response.read().decode()
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"node_exporter never answered at {url}")


CRON_HOST = "a3"


def cron_job(path: Path) -> tuple[dict[str, str], str]:
    """The environment cron gives the job (its defaults, then the file's assignments) and its command."""
    env = {"SHELL": "/bin/sh", "HOME": "/root", "LOGNAME": "root", "PATH": "/usr/bin:/bin"}
    jobs = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        assign = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        if assign:
            env[assign[1]] = assign[2]
        else:
            fields = line.split(None, 6)  # five time fields, the user, the command
            assert fields[5] == "root" and "%" not in fields[6]  # cron turns % into newlines
            jobs.append(fields[6])
    [command] = jobs
    return env, command


@pytest.mark.fleet
def test_a_failing_cron_run_reaches_syslog_and_cron_mail(fleet: Fleet, tmp_path: Path) -> None:
    """The cron.d line run as cron runs it (`/bin/sh -c` with cron's environment only) with a broken
    inventory: exit 2 lands in the journal under the tag ami-auditor and on stdout with the tool's own error
    line, which cron mails; what it writes is not world-readable."""
    root = fleet.host(CRON_HOST).root
    wheels = tmp_path / "wheels"
    wheel = wheelhouse(wheels)
    env, command = cron_job(ROOT / "contrib/cron/ami-auditor")
    with DebianInstance(root, wheels):
        try:
            shutil.copy(wheel, root / "var/tmp" / wheel.name)
            done = fleet.exec(CRON_HOST, ["sh", "-c", f"python3 -m venv {VENV} && "
                                          f"{VENV}/bin/pip install --quiet /var/tmp/{wheel.name}"], timeout=600)
            assert done.returncode == 0, done.stderr
            (root / "etc/ami-auditor").mkdir(exist_ok=True)
            (root / "etc/ami-auditor/inventory.yaml").write_text("hosts:\n  - name: [broken\n")
            run = fleet.exec(CRON_HOST, ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "/bin/sh", "-c", command],
                             timeout=300)
            assert run.returncode == 2, run.stdout + run.stderr
            mail = run.stdout.splitlines()
            assert mail[0] == \
                "ami-auditor scan failed with exit 2: see journalctl -t ami-auditor or /var/log/ami-auditor.log"
            assert len(mail) == 2 and mail[1].startswith("ami-auditor: error: ") and "inventory.yaml" in mail[1], mail
            log_mode = (root / "var/log/ami-auditor.log").stat().st_mode
            assert log_mode & 0o007 == 0, oct(log_mode)  # umask 027: nothing the fleet says is world-readable
            journal = fleet.exec(CRON_HOST, ["journalctl", "-t", "ami-auditor", "--no-pager", "-o", "cat"]).stdout
            assert "inventory.yaml" in journal, journal
        finally:
            for path in ("opt/ami-auditor", "etc/ami-auditor", "var/lib/ami-auditor", "usr/share/doc/ami-auditor"):
                shutil.rmtree(root / path, ignore_errors=True)
            for path in ("var/log/ami-auditor.log", f"var/tmp/{wheel.name}"):
                (root / path).unlink(missing_ok=True)
