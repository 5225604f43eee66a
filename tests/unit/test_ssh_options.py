"""--ssh-user/-l, --ssh-identity, --ssh-known-hosts, --ssh-config/-F on ssh:// targets given on the command
line and on inventory hosts (whose own values win), bad combinations refused, and host names with ports."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from auditor.cli import build_parser, main
from auditor.commands.scan import scan_options
from auditor.context import Env
from auditor.errors import InputError
from auditor.targets.inventory import targets_from_args
from auditor.targets.resolve import resolve_specs


def files(tmp_path: Path) -> dict[str, Path]:
    made = {n: tmp_path / n for n in ("key", "known_hosts", "ssh_config", "inv_key")}
    for f in made.values():
        f.write_text("")
    return made


def specs(argv: list[str]):  # type: ignore[no-untyped-def]
    return resolve_specs(scan_options(build_parser(["scan"]).parse_args(["scan", *argv])).targets)


def test_ssh_options_reach_command_line_ssh_targets(tmp_path: Path) -> None:
    f = files(tmp_path)
    got = specs(["ssh://127.0.0.9", "local", "-l", "admin", "--ssh-identity", str(f["key"]),
                 "--ssh-known-hosts", str(f["known_hosts"]), "-F", str(f["ssh_config"])])
    ssh, local = got
    assert (ssh.ssh.user, ssh.ssh.identity_file, ssh.ssh.known_hosts, ssh.ssh.ssh_config) == (
        "admin", str(f["key"]), str(f["known_hosts"]), str(f["ssh_config"]))
    assert local.ssh.identity_file is None  # only ssh:// hosts get them


def test_inventory_values_take_precedence_per_host(tmp_path: Path) -> None:
    f = files(tmp_path)
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"hosts:\n  - {{name: own, target: 'ssh://127.0.0.7', ssh: {{identity_file: {f['inv_key']}}}}}\n"
                   "  - {name: bare, target: 'ssh://127.0.0.8'}\n")
    own, bare = specs(["-i", str(inv), "--ssh-identity", str(f["key"]), "--ssh-user", "admin"])
    assert own.ssh.identity_file == str(f["inv_key"]) and own.ssh.user == "admin"
    assert bare.ssh.identity_file == str(f["key"])


@pytest.mark.parametrize(("argv", "message"), [
    (["local", "--ssh-identity", "KEY"], "--ssh-identity applies to ssh:// hosts"),
    (["ssh://alice@127.0.0.9", "--ssh-user", "bob"], "--ssh-user bob and ssh://alice@127.0.0.9"),
    (["ssh://127.0.0.9", "--ssh-identity", "/nonexistent/key"], "no such file"),
])
def test_bad_combinations_exit_2(tmp_path: Path, argv: list[str], message: str) -> None:
    f = files(tmp_path)
    argv = [str(f["key"]) if a == "KEY" else a for a in argv]
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "--no-store", *argv], Env(out, err))
    assert code == 2 and message in err.getvalue(), err.getvalue()


def test_a_matching_url_user_is_fine(tmp_path: Path) -> None:
    (spec,) = specs(["ssh://bob@127.0.0.9", "--ssh-user", "bob"])
    assert spec.ssh.user == "bob"


def test_host_names_with_ports_are_consistent() -> None:
    names = [s.name for s in targets_from_args(["ssh://root@127.0.0.1:1", "ssh://root@127.0.0.1:2",
                                                "ssh://h:22", "ssh://[::1]:2222", "ssh://g:2200"])]
    assert names == ["127.0.0.1:1", "127.0.0.1:2", "h", "[::1]:2222", "g:2200"]
    with pytest.raises(InputError, match="names the same host"):
        targets_from_args(["ssh://h:2200", "ssh://h:2200"])


def test_an_inventory_url_user_is_the_hosts_own_value(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  - {name: own, target: 'ssh://alice@127.0.0.7'}\n")
    (spec,) = specs(["-i", str(inv), "--ssh-user", "bob"])  # no error: the inventory's alice wins
    assert spec.target == "ssh://alice@127.0.0.7"
