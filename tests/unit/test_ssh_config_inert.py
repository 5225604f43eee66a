"""An ssh_config is read, never run: `Match exec "cmd"` would have paramiko's lookup run `cmd` (through
invoke), so it is refused as bad input (exit 2, file:line) before any host is contacted, whether the file
comes from -F, an inventory's `ssh.ssh_config` or ~/.ssh/config; the marker file a command would create must
not exist. CanonicalizeHostname (DNS lookups inside the lookup) is ignored."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.errors import InputError
from auditor.models import SSHOptions
from auditor.transport.ssh_route import load_ssh_config
from tests.paths import ROOT


def exec_config(tmp_path: Path, match: str = 'Match exec "touch {marker}"') -> tuple[Path, Path]:
    marker = tmp_path / "ran"
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host other\n  User x\n" + match.format(marker=marker) + "\n  User root\n")
    return cfg, marker


def run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, Env(out, err))
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("via", ["-F", "inventory"])
def test_match_exec_is_refused_before_any_host_and_never_runs(via: str, tmp_path: Path,
                                                               listener: socket.socket) -> None:
    cfg, marker = exec_config(tmp_path)
    target = f"ssh://root@127.0.0.1:{listener.getsockname()[1]}"
    if via == "-F":
        argv = ["scan", target, "-F", str(cfg)]
    else:
        inv = tmp_path / "inv.yaml"
        inv.write_text(f"hosts:\n  - {{name: a, target: '{target}', ssh: {{ssh_config: {cfg}}}}}\n")
        argv = ["scan", "-i", str(inv)]
    code, text = run([*argv, "--no-store", "--out", str(tmp_path / "out")])
    assert code == 2, text
    assert f"{cfg}:3:" in text and "Match exec" in text, text
    assert not marker.exists(), "the Match exec command ran"
    assert not (tmp_path / "out").exists()
    with pytest.raises(BlockingIOError):
        listener.accept()


def test_the_default_user_config_is_checked_too(tmp_path: Path, listener: socket.socket) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    cfg, marker = exec_config(tmp_path)
    (home / ".ssh" / "config").write_text(cfg.read_text())
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "auditor.cli", "collect",
                           f"ssh://root@127.0.0.1:{listener.getsockname()[1]}"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"{home}/.ssh/config:3:" in done.stderr
    assert not marker.exists()


@pytest.mark.parametrize("match", ['Match !exec "touch {marker}"', 'MATCH EXEC "touch {marker}"',
                                   'Match host h exec "touch {marker}"', 'Match exec="touch {marker}"',
                                   'match user u Exec "touch {marker}" host x'])
def test_every_spelling_of_match_exec_is_refused(match: str, tmp_path: Path) -> None:
    cfg, marker = exec_config(tmp_path, match)
    with pytest.raises(InputError) as caught:
        load_ssh_config(SSHOptions(ssh_config=str(cfg))).lookup("h")
    assert (caught.value.path, caught.value.line) == (str(cfg), 3)
    assert not marker.exists()


def test_other_match_criteria_still_apply(tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text('Match host "exec" user exec\n  Port 2201\nMatch host h\n  User admin\n')  # `exec` as a value
    found = load_ssh_config(SSHOptions(ssh_config=str(cfg))).lookup("h")
    assert found["user"] == "admin"


def test_canonicalize_hostname_is_ignored_not_resolved(tmp_path: Path) -> None:
    """With CanonicalizeFallbackLocal no, paramiko raises when no candidate resolves: ignoring the option
    means no name is looked up, so the lookup simply answers."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text("CanonicalizeHostname yes\nCanonicalDomains nothing.invalid\nCanonicalizeFallbackLocal no\n"
                   "Host h\n  User admin\n")
    found = load_ssh_config(SSHOptions(ssh_config=str(cfg))).lookup("h")
    assert (found["hostname"], found["user"]) == ("h", "admin")
