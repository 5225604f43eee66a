"""The CLI's SSH options and grouped summary on the real fleet (tests/fleet): a direct ssh:// target with
--ssh-identity/--ssh-known-hosts, and a fleet cloned from one image whose crash loop leads the summary."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.paths import ROOT

pytestmark = pytest.mark.fleet


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "auditor.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=300, check=False)


def test_direct_ssh_target_with_ssh_options(fleet) -> None:  # type: ignore[no-untyped-def]
    a1 = fleet.host("a1")
    target = f"ssh://root@{a1.address}"
    done = cli("scan", target, "--ssh-identity", str(fleet.identity_file), "--ssh-known-hosts",
               str(fleet.known_hosts), "--no-store", "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    import json

    (host,) = json.loads(done.stdout)["hosts"]
    assert (host["name"], host["status"]) == (a1.address, "ok")
    # the same target without the key: refused by the host, not a crash (exit 3: not reached)
    empty = fleet.dir / "empty_known_hosts"
    empty.write_text("")
    refused = cli("scan", target, "--ssh-known-hosts", str(empty), "--no-store", "--format", "json")
    assert refused.returncode == 3, refused.stderr
    assert json.loads(refused.stdout)["hosts"][0]["status"] != "ok"


@pytest.fixture
def cloned(fleet_ready_crashloop, tmp_path: Path) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    """Every host given a1's SSH host keys and machine-id (clones of one baked image); restored after."""
    fleet = fleet_ready_crashloop
    inv = yaml.safe_load(Path(fleet.inventory_path).read_text())
    names = [h["name"] for h in inv["hosts"]]
    a1 = fleet.host("a1")
    keys = sorted(p.name for p in (a1.root / "etc/ssh").glob("ssh_host_*"))
    saved = tmp_path / "saved"
    known = Path(inv["defaults"]["ssh"]["known_hosts"]).read_text().splitlines()
    a1_lines = [ln for ln in known if ln.startswith(a1.address + " ")]
    lines = []
    for name in names:
        h = fleet.host(name)
        (saved / name).mkdir(parents=True)
        for key in keys:
            shutil.copy2(h.root / "etc/ssh" / key, saved / name / key)
        shutil.copy2(h.root / "etc/machine-id", saved / name / "machine-id")
        lines += [ln.replace(a1.address + " ", h.address + " ", 1) for ln in a1_lines]
    shared_known = tmp_path / "known_hosts"
    shared_known.write_text("\n".join(lines) + "\n")
    inv["defaults"]["ssh"]["known_hosts"] = str(shared_known)
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(inv))
    try:
        for name in names:
            if name != "a1":
                for key in keys:
                    shutil.copy2(a1.root / "etc/ssh" / key, fleet.host(name).root / "etc/ssh" / key)
                shutil.copy2(a1.root / "etc/machine-id", fleet.host(name).root / "etc/machine-id")
        yield inventory
    finally:
        for name in names:
            for key in keys:
                shutil.copy2(saved / name / key, fleet.host(name).root / "etc/ssh" / key)
            shutil.copy2(saved / name / "machine-id", fleet.host(name).root / "etc/machine-id")


def test_cloned_fleet_summary_leads_with_the_crash_loop(cloned: Path) -> None:
    done = cli("scan", "-i", str(cloned), "--no-store", "--group-by", "az")
    assert done.returncode == 1, done.stderr
    text = done.stdout
    summary = text[text.index("hosts reached"):].splitlines()
    print("\n".join(summary))  # shown with -s: the note quotes it
    findings = [ln for ln in summary if ln.startswith("  [")]
    assert "ecs.service" in findings[0] and "3 hosts (b1, b2, b3)" in findings[0], findings[:3]
    assert any("ecs.service" in ln for ln in summary[:6])  # the chain / crash loop in the first lines
    machine = [ln for ln in findings if "machine-id" in ln]
    assert len(machine) == 1 and "7 hosts (" in machine[0], machine
    host_keys = [ln for ln in findings if "SSH host key" in ln]
    assert 1 <= len(host_keys) <= 4 and all("7 hosts (" in ln for ln in host_keys), host_keys
