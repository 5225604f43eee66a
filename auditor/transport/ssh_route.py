"""Where an SSH target leads: the hops (jump hosts first, the target last) with ssh_config applied.

paramiko's SSHConfig only parses, so HostName/User/Port/IdentityFile/ProxyJump are applied here by hand
(FIELD-NOTES §9). Pure but for reading the ssh_config file: no network, no commands. paramiko's lookup would
run a `Match exec` command (through invoke) and resolve names for CanonicalizeHostname, so an ssh_config with
`Match exec` is refused (file:line) before any lookup, and CanonicalizeHostname is ignored (names are resolved
when connecting, as for any host).
"""

from __future__ import annotations

import getpass
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import paramiko

from ..errors import InputError
from ..inputfile import read_text
from ..models import HostSpec, SSHOptions

MAX_SSH_CONFIG_BYTES = 1 << 20
_SETTING = re.compile(r"(\w+)(?:\s*=\s*|\s+)(.+)")  # paramiko's SETTINGS_REGEX: keyword, value
_NO_ARGUMENT = {"all", "canonical", "final"}  # Match criteria that take no argument


@dataclass(frozen=True)
class Hop:
    """One SSH connection on the way to the host: bastions first, the target last."""

    alias: str  # the name as written (target host or ProxyJump entry); used for ssh_config lookup
    hostname: str  # where to connect (ssh_config HostName applied)
    port: int
    user: str
    key_files: tuple[str, ...] = ()

    @property
    def known_hosts_name(self) -> str:
        """The name this hop has in known_hosts: `host`, or `[host]:port` when the port is not 22."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"

    @property
    def endpoint(self) -> str:
        """`hostname:port`: what the per-jump-host bounds (jumplimits.py) are keyed by."""
        return f"{self.hostname}:{self.port}"


def parse_ssh_target(target: str) -> tuple[str | None, str, int | None]:
    """`ssh://[user@]host[:port]` → (user, host, port); InputError when malformed."""
    parts = urlsplit(target)
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"bad port in target {target!r}") from None
    if parts.scheme != "ssh" or not parts.hostname:
        raise InputError(f"bad ssh target {target!r}: use ssh://[user@]host[:port]")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.password:
        raise InputError(f"bad ssh target {target!r}: only ssh://[user@]host[:port] is accepted")
    return parts.username or None, parts.hostname, port


def _parse_jump(entry: str) -> tuple[str | None, str, int | None]:
    """A ProxyJump entry `[user@]host[:port]` (or `ssh://…`) → (user, host, port)."""
    entry = entry.strip()
    if entry[:6].lower() != "ssh://":  # the scheme in any case (urlsplit reads it so)
        entry = "ssh://" + entry
    try:
        return parse_ssh_target(entry)
    except InputError as exc:
        raise InputError(f"bad ProxyJump entry: {exc.message}") from None


def expand_path(path: str) -> str:
    """`~` and `$VARS` expanded, as ssh does for paths in its config."""
    return os.path.expanduser(os.path.expandvars(path))


def load_ssh_config(opts: SSHOptions) -> paramiko.SSHConfig:
    """The ssh_config named by the options, else ~/.ssh/config if present, else an empty one."""
    if opts.ssh_config:
        path = Path(expand_path(opts.ssh_config))
        if not path.is_file():
            raise InputError("ssh_config file not found", str(path))
    else:
        path = Path.home() / ".ssh" / "config"
        if not path.is_file():
            return paramiko.SSHConfig()
    text = _inert(read_text(path, MAX_SSH_CONFIG_BYTES), str(path))
    try:
        return paramiko.SSHConfig.from_text(text)
    except (OSError, paramiko.ssh_exception.ConfigParseError) as exc:
        raise InputError(f"cannot parse ssh_config: {exc}", str(path)) from None


def check_ssh_configs(specs: list[HostSpec]) -> None:
    """Load every ssh:// host's ssh_config once, before any host is contacted: a missing or refused one
    (`Match exec`) is bad input for the whole run, named by file and line, not one host's error."""
    seen: set[str | None] = set()
    for spec in specs:
        if spec.target.startswith("ssh://") and spec.ssh.ssh_config not in seen:
            seen.add(spec.ssh.ssh_config)
            load_ssh_config(spec.ssh)


def _inert(text: str, path: str) -> str:
    """The ssh_config text with nothing a lookup could run or resolve: `Match exec` (a command, in any case,
    negated or as `exec=`) is InputError at its line; CanonicalizeHostname lines are dropped (DNS lookups)."""
    kept: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        setting = _SETTING.match(raw.strip())
        keyword = setting.group(1).lower() if setting else ""
        if keyword == "canonicalizehostname":
            kept.append("")
            continue
        if keyword == "match" and setting:
            try:
                tokens = shlex.split(setting.group(2))
            except ValueError:
                raise InputError("cannot parse ssh_config: unbalanced quotes in Match", path, number) from None
            while tokens:
                criterion = tokens.pop(0).lstrip("!").split("=", 1)[0].lower()
                if criterion == "exec":
                    raise InputError("`Match exec` would run a command; ami-auditor never runs commands from an "
                                     "ssh_config (use Match host/user, or a Host block)", path, number)
                if criterion not in _NO_ARGUMENT and tokens:
                    tokens.pop(0)
        kept.append(raw)
    return "\n".join(kept)


def resolve_route(spec: HostSpec, config: paramiko.SSHConfig | None = None) -> list[Hop]:
    """The hops to reach `spec` (bastions first), with ssh_config and SSHOptions applied.

    Precedence for the target: URL user/port > spec.ssh > ssh_config > defaults (local user, 22).
    A ProxyJump (spec.ssh.proxy_jump, else ssh_config's) may list several comma-separated hops;
    each is looked up in ssh_config by its own name (a hop's own ProxyJump is not followed).
    Jump hosts use their ssh_config IdentityFile, then spec.ssh.identity_file.
    """
    opts = spec.ssh
    config = config if config is not None else load_ssh_config(opts)
    url_user, host, url_port = parse_ssh_target(spec.target)
    found = config.lookup(host)
    extra_keys = (expand_path(opts.identity_file),) if opts.identity_file else ()
    target = Hop(
        alias=host,
        hostname=found.get("hostname", host),
        port=_port(url_port or opts.port or found.get("port") or 22, host),
        user=url_user or opts.user or found.get("user") or getpass.getuser(),
        key_files=extra_keys or tuple(expand_path(p) for p in found.get("identityfile", [])),
    )
    jump = opts.proxy_jump or found.get("proxyjump")
    hops: list[Hop] = []
    if jump and jump.strip().lower() != "none":
        for entry in jump.split(","):
            j_user, j_host, j_port = _parse_jump(entry)
            j_found = config.lookup(j_host)
            own = tuple(expand_path(p) for p in j_found.get("identityfile", []))
            hops.append(
                Hop(
                    alias=j_host,
                    hostname=j_found.get("hostname", j_host),
                    port=_port(j_port or j_found.get("port") or 22, j_host),
                    user=j_user or j_found.get("user") or getpass.getuser(),
                    key_files=own + tuple(k for k in extra_keys if k not in own),
                )
            )
    return [*hops, target]


def _port(value: int | str, host: str) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise InputError(f"bad port {value!r} for {host}") from None
    if not 0 < port < 65536:
        raise InputError(f"bad port {port} for {host}")
    return port

