"""Inventory files and command-line targets → HostSpecs; every error names file and line."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from auditor.errors import InputError
from auditor.models import HostSpec, SSHOptions, TransportOptions
from auditor.targets.inventory import load_inventory, parse_target, targets_from_args
from auditor.transport.ssh import resolve_route
from tests.paths import DATA


def _write(tmp_path: Path, text: str, name: str = "fleet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def _error(tmp_path: Path, text: str) -> InputError:
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_inventory(path)
    assert info.value.path == str(path)
    return info.value


def test_full_inventory_merges_defaults(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
        defaults:
          ssh:
            user: root
            identity_file: keys/fleet
            known_hosts: /etc/auditor/known_hosts
            port: 22
            proxy_jump: bastion
            ssh_config: ~/.ssh/fleet_config
            trust_on_first_use: false
            connect_timeout: 10
            sudo: null
          labels: {env: prod, tier: web}
        hosts:
          - name: b1
            target: ssh://root@127.0.2.21
            labels: {az: us-east-1b, tier: db, rack: 12}
            ssh: {port: 2222, proxy_jump: null, sudo: true, connect_timeout: 2.5}
          - name: i1
            target: ssm://i-0123456789abcdef0?region=eu-west-1
          - name: img
            target: image:///mnt/root/
          - name: me
            target: local
        """,
    )
    b1, i1, img, me = load_inventory(path)
    assert b1 == HostSpec(
        name="b1",
        target="ssh://root@127.0.2.21",
        labels={"env": "prod", "tier": "db", "az": "us-east-1b", "rack": "12"},
        ssh=SSHOptions(
            user="root",
            port=2222,
            identity_file=str(tmp_path / "keys/fleet"),  # relative to the inventory's directory
            known_hosts="/etc/auditor/known_hosts",
            ssh_config="~/.ssh/fleet_config",  # the transport expands ~
            proxy_jump=None,
            trust_on_first_use=False,
            connect_timeout=2.5,
            sudo=True,
        ),
    )
    assert i1.options == TransportOptions(region="eu-west-1") and i1.labels == {"env": "prod", "tier": "web"}
    assert i1.ssh.proxy_jump == "bastion" and i1.ssh.port == 22
    assert img.options == TransportOptions(image_root="/mnt/root")
    assert me.target == "local" and me.ssh.connect_timeout == 10.0


def test_relative_paths_resolve_against_the_inventory_dir(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "sub").mkdir()
    _write(
        tmp_path,
        """
        hosts:
          - name: a
            target: ssh://a
            ssh: {identity_file: ../k, known_hosts: kh, ssh_config: cfg/ssh_config}
        """,
        name="sub/inv.yaml",
    )
    monkeypatch.chdir(tmp_path / "sub")
    (spec,) = load_inventory("inv.yaml")
    assert Path(spec.ssh.identity_file).resolve() == tmp_path / "k"
    assert spec.ssh.known_hosts == str(tmp_path / "sub" / "kh")
    assert spec.ssh.ssh_config == str(tmp_path / "sub" / "cfg/ssh_config")


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("hosts:\n  - name: a\n    target: local\n    colour: red\n", 4, "unknown key 'colour'"),
        ("hostz: []\n", 1, "unknown key 'hostz'"),
        ("defaults:\n  ssh: {user: a}\n  extra: 1\nhosts: []\n", 3, "unknown key 'extra'"),
        ("hosts:\n  - name: a\n    target: local\n    ssh:\n      usr: x\n", 5, "unknown key 'usr'"),
        ("hosts:\n  - name: a\n    target: local\n  - target: local\n", 4, "hosts[1] is missing 'name'"),
        ("hosts:\n  - name: a\n", 2, "host 'a' is missing 'target'"),
        ("hosts:\n  - {name: a, target: local}\n  - name: b\n    target: local\n  - name: a\n    target: local\n",
         5, "duplicate host name 'a' (first at line 2)"),
        ("hosts:\n  - name: a\n    target: ftp://a\n", 3, "unknown target"),
        ("hosts:\n  - name: a\n    target: ssh://a:99999\n", 3, "bad port"),
        ("hosts:\n  - name: a\n    target: ssm://i-xyz\n", 3, "bad ssm target"),
        ("hosts:\n  - name: a\n    target: ssm://i-0123456789abcdef0?profile=x\n", 3, "unknown option 'profile'"),
        ("hosts:\n  - name: a\n    target: image://rel/path\n", 3, "bad image target"),
        ("hosts:\n  - name: a\n    target: ssh://h/path\n", 3, "no path"),
        ("hosts:\n  - name: 12\n    target: local\n", 2, "name must be a non-empty string"),
        ("hosts:\n  - name: a b\n    target: local\n", 2, "whitespace"),
        ("hosts:\n\n  - name: a\n    target: local\n    ssh: {port: '22'}\n", 5, "port must be an integer"),
        ("hosts:\n  - name: a\n    target: local\n    ssh: {port: true}\n", 4, "port must be an integer"),
        ("hosts:\n  - name: a\n    target: local\n    ssh:\n      connect_timeout: 0\n", 5, "positive number"),
        ("hosts:\n  - name: a\n    target: local\n    ssh: {trust_on_first_use: 'yes'}\n", 4, "true or false"),
        ("hosts:\n  - name: a\n    target: local\n    ssh: {sudo: 1}\n", 4, "sudo must be"),
        ("hosts:\n  - name: a\n    target: local\n    ssh: {identity_file: [a]}\n", 4, "non-empty string"),
        ("hosts:\n  - name: a\n    target: local\n    labels: {az: [x]}\n", 4, "host 'a': labels.az must be a string"),
        ("hosts:\n  - name: a\n    target: local\n    labels: {prod: yes}\n", 4, "quote it"),
        ("hosts:\n  - name: a\n    target: local\n    labels: [az]\n", 4, "labels must be a mapping"),
        ("defaults:\n  labels: x\nhosts: []\n", 2, "labels must be a mapping"),
        ("hosts:\n  - local\n", 2, "hosts[0] must be a mapping"),
        ("hosts: {a: 1}\n", 1, "hosts must be a list"),
        ("hosts: []\n", 1, "hosts is empty: list at least one host"),
        ("defaults: {}\n", 1, "the inventory is missing 'hosts'"),
        ("- a\n", 1, "the inventory must be a mapping"),
        ("hosts:\n  - name: a\n    name: b\n", 3, "duplicate key 'name'"),
        ("hosts:\n  - name: [a\n", None, "invalid YAML"),
        # caught by schemas/inventory.schema.json, at the key's line
        ("hosts:\n  - name: a\n    target: local\n    ssh: {port: 0}\n", 4,
         "host 'a': ssh.port must be an integer 1-65535, not 0"),
        ("defaults:\n  ssh:\n    connect_timeout: true\nhosts: [{name: a, target: local}]\n", 3,
         "defaults.ssh.connect_timeout must be a positive number of seconds, not a boolean True"),
        ("hosts:\n  - name: a\n    target: local\n    ssh: {known_hosts: \"kh\\tx\"}\n", 4,
         "ssh.known_hosts must be a non-empty string without control characters"),
        ("hosts:\n  - name: a\n    target: '  '\n", 3, "host 'a': target must be a non-empty string"),
        ("hosts:\n  - name: a\n    target: local\n    labels: {1: x}\n", 4, "label name 1 must be a string"),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, text: str, line: int | None, words: str) -> None:
    err = _error(tmp_path, text)
    assert words in err.message
    if line is not None:
        assert err.line == line, err
        assert re.match(rf"{re.escape(str(tmp_path / 'fleet.yaml'))}:{line}:(\d+:)? ", str(err)), err


def test_a_password_in_an_ssh_user_is_refused_and_never_echoed(tmp_path: Path) -> None:
    err = _error(tmp_path, "hosts:\n  - name: a\n    target: local\n    ssh: {user: 'root:s3cret'}\n")
    assert (err.line, err.column) == (4, 11)
    assert "passwords are refused" in err.message and "s3cret" not in str(err)


def test_target_schemes_are_case_insensitive(tmp_path: Path) -> None:
    """Issue 37 item 8: `SSH://` is `ssh://` everywhere (URL schemes are case-insensitive): the target, written
    canonically for every later check, and a ProxyJump hop (`SSH://root@b` has no password)."""
    [direct] = targets_from_args(["SSH://root@10.0.0.5:2222"])
    assert direct.target == "ssh://root@10.0.0.5:2222" and direct.name == "10.0.0.5:2222"
    [host] = load_inventory(_write(tmp_path, "hosts:\n  - name: a\n    target: Ssh://10.0.0.6\n"
                                             "    ssh: {proxy_jump: 'SSH://root@bastion:2222'}\n"))
    assert host.target == "ssh://10.0.0.6" and host.ssh.proxy_jump == "SSH://root@bastion:2222"
    empty = tmp_path / "ssh_config"
    empty.write_text("")
    route = resolve_route(HostSpec(host.name, host.target, ssh=SSHOptions(proxy_jump=host.ssh.proxy_jump,
                                                                       ssh_config=str(empty))))
    assert [(h.user, h.hostname, h.port) for h in route[:-1]] == [("root", "bastion", 2222)]


def test_empty_and_missing_files(tmp_path: Path) -> None:
    assert "empty inventory" in _error(tmp_path, "").message
    with pytest.raises(InputError, match="cannot read") as info:
        load_inventory(tmp_path / "nope.yaml")
    assert info.value.path == str(tmp_path / "nope.yaml")


def test_targets_from_args() -> None:
    specs = targets_from_args(
        [
            "local",
            "ssh://ec2-user@10.0.0.5:2222",
            "ssh://[::1]",
            "ssm://i-0123456789abcdef0?region=us-east-1",
            "ssm://i-01234567",
            "image:///mnt/ami-root",
        ]
    )
    assert [s.name for s in specs] == [
        "local", "10.0.0.5:2222", "::1", "i-0123456789abcdef0", "i-01234567", "/mnt/ami-root"
    ]
    assert specs[1].target == "ssh://ec2-user@10.0.0.5:2222"
    assert specs[3].options == TransportOptions(region="us-east-1")
    assert specs[5].options == TransportOptions(image_root="/mnt/ami-root")
    assert all(s.ssh == SSHOptions() and s.labels == {} for s in specs)


def test_targets_from_args_disambiguates_ports_and_rejects_duplicates() -> None:
    a, b = targets_from_args(["ssh://h", "ssh://root@h:2200"])
    assert (a.name, b.name) == ("h", "h:2200")
    with pytest.raises(InputError, match="same host"):
        targets_from_args(["local", "local"])
    with pytest.raises(InputError, match="same host"):
        targets_from_args(["ssh://h", "ssh://h:22", "ssh://u@h"])


@pytest.mark.parametrize(
    "target",
    ["", "ftp://x", "ssh://", "ssh://u:pw@h", "ssh://h?x=1", "ssm://i-1", "ssm://i-0123456789abcdef0?region=mars",
     "image://host/p", "image:relative", "localhost", "/mnt/root"],
)
def test_bad_cli_targets(target: str) -> None:
    with pytest.raises(InputError):
        targets_from_args([target])


def test_parse_target_matches_the_transport_registry() -> None:
    from auditor.transport import scheme_of

    for target in ("local", "ssh://h", "ssm://i-01234567", "image:///r"):
        parse_target(target)
        scheme_of(target)


def _labelled(defaults: int, own: int) -> str:
    """An inventory whose host has `own` labels and whose defaults add `defaults` other ones."""
    default_map = ", ".join(f"d{i}: v" for i in range(defaults))
    own_map = ", ".join(f"h{i}: v" for i in range(own))
    return (f"defaults:\n  labels: {{{default_map}}}\n"
            f"hosts:\n  - name: a\n    target: local\n    labels: {{{own_map}}}\n")


def test_labels_merged_with_the_defaults_are_bounded_at_the_hosts_line(tmp_path: Path) -> None:
    """Each map may hold 1,000 labels, but merged they would outgrow a snapshot's 1,024: `collect -o` would
    write a snapshot `analyze` refuses. The loader refuses the host before any host is touched."""
    err = _error(tmp_path, _labelled(600, 401))
    assert err.line == 6 and "host 'a' has 1,001 labels with the defaults' (at most 1,000)" in err.message


def test_a_host_with_the_most_labels_still_makes_a_snapshot_analyze_reads(tmp_path: Path) -> None:
    """1,000 labels of its own, plus the host facts and an AMI's labels the collector adds: the saved
    snapshot stays within the snapshot schema."""
    import json

    from auditor.collect.snapshot import build_snapshot
    from auditor.compare.sources import load_snapshot_file
    from auditor.models import CommandResult
    from auditor.targets.inventory import MAX_HOST_LABELS
    from tests.framing_fixtures import FIXTURE_NONCE

    (spec,) = load_inventory(_write(tmp_path, _labelled(500, MAX_HOST_LABELS - 500)))
    raw = (DATA / "probe" / "al2023" / "raw.txt").read_text(encoding="utf-8")
    ami = {"ami_id": "ami-0123456789abcdef0", "ami_name": "dlami", "creation_date": "2026-11-30T00:00:00Z"}
    snap = build_snapshot(spec, CommandResult(raw, "", 0, 1.0, labels=ami), FIXTURE_NONCE)
    added = {"az", "az_id", "ami_id", "instance_type", "region", "ami_name", "creation_date"}
    assert set(snap["labels"]) - set(spec.labels) == added and len(snap["labels"]) == MAX_HOST_LABELS + len(added)
    saved = tmp_path / "a.json"
    saved.write_text(json.dumps(snap))
    assert len(load_snapshot_file(saved)["labels"]) == len(snap["labels"])
