"""Hosts from an inventory YAML file and from command-line targets.

```yaml
defaults:
  ssh: {user: root, identity_file: keys/fleet, known_hosts: known_hosts, proxy_jump: bastion}
  labels: {env: prod}
hosts:
  - name: b1
    target: ssh://root@127.0.2.21
    labels: {az: us-east-1b}
    ssh: {port: 2222}          # per-host overrides, key by key
```
The file's shape is declared in schemas/inventory.schema.json (checked first); the code checks what a schema
cannot: targets, duplicate names, passwords in proxy_jump. Every error is an InputError naming the file and
line. Relative paths (identity_file, known_hosts, ssh_config) are resolved against the inventory's directory;
`~` is left for the transport to expand.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlsplit

from ..errors import InputError
from ..inputschema import Form, check
from ..models import NO_TRANSPORT_OPTIONS, HostSpec, SSHOptions, TransportOptions
from ..yamlload import as_text, line_of, load_yaml_file

# hosts are named by `name` in messages; string values are never echoed (a user or jump host may hold a password)
INVENTORY_FORM = Form("inventory", "the inventory", {"hosts": ("host", "name")}, show_strings=False)
_PATH_KEYS = ("identity_file", "known_hosts", "ssh_config")
_INSTANCE_ID = re.compile(r"^m?i-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
_AMI_ID = re.compile(r"^ami-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
_REGION = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+$")
# A snapshot holds at most 1,024 labels (collect/schema.MAX_LABELS); collect adds the host's facts (az, ami_id…)
# and the transport's (an AMI's id, name, date), so a host's own and default labels, merged, keep room for them.
MAX_HOST_LABELS = 1000


def safe_target(target: str, quote: bool = True) -> str:
    """The target for messages, quoted: a userinfo password replaced by `***`, control characters escaped."""
    shown = redact_urls(repr(target)) if isinstance(target, str) else repr(target)
    return shown if quote or not isinstance(target, str) else shown[1:-1]


def redact_urls(text: str) -> str:
    """Replace the password of every `scheme://user:password@host` (and bare `user:password@host`, as in
    a ProxyJump) in text by `***`."""
    return _BARE.sub(r"\1:***@", _URL.sub(_redact_match, text))


_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/?#\s]*)")
_BARE = re.compile(r"(?<![\w:/*.-])([A-Za-z0-9_][A-Za-z0-9_.-]*):(?!\*\*\*@)[^\s@/,'\"]+@(?=[A-Za-z0-9_\[])")


def _redact_match(match: re.Match[str]) -> str:
    scheme, netloc = match.group(1), match.group(2)
    userinfo, at, host = netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return match.group(0)
    return f"{scheme}{userinfo.split(':', 1)[0]}:***@{host}"


_SSH_HOST = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252})$")
_SSH_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_PORT = re.compile(r"^[0-9]{1,5}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _ssh_target(target: str, shown: str) -> str:
    """Validate `ssh://[user@]host[:port]` strictly; return the host name, `host:port` for a port other than
    22 (every such target alike). Never echoes a password."""
    if any(c.isspace() for c in target):
        raise InputError(f"bad ssh target {shown}: whitespace is not allowed")
    try:
        parts = urlsplit(target)
    except ValueError as exc:
        raise InputError(f"bad ssh target {shown}: {exc}") from None
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        raise InputError(f"target {shown}: passwords in target URLs are refused (they end up in shell "
                         "history and process lists); use an SSH key (identity_file) or ssh-agent")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InputError(f"bad ssh target {shown}: no path, query or fragment allowed")
    if at and not _SSH_USER.match(userinfo):
        raise InputError(f"bad ssh target {shown}: bad user name {userinfo!r}")
    if hostport.startswith("["):
        host_text, bracket, port_text = hostport[1:].partition("]")
        if not bracket or (port_text and not port_text.startswith(":")):
            raise InputError(f"bad ssh target {shown}: bad IPv6 address")
        try:
            ipaddress.IPv6Address(host_text)
        except ValueError:
            raise InputError(f"bad ssh target {shown}: {host_text!r} is not an IPv6 address") from None
        port_text = port_text[1:]
    else:
        host_text, _, port_text = hostport.partition(":")
        if not host_text:
            raise InputError(f"bad ssh target {shown}: no host name; use ssh://[user@]host[:port]")
        if not _SSH_HOST.match(host_text):
            raise InputError(f"bad ssh target {shown}: host name {host_text!r} may hold only letters, "
                             "digits, '.', '-' and '_' (and must not start with '-' or '.')")
    if port_text and (not _PORT.match(port_text) or not 0 < int(port_text) < 65536):
        raise InputError(f"bad port in target {shown}: give 1-65535")
    host = parts.hostname or host_text.lower()
    if not port_text or int(port_text) == 22:
        return host
    return f"[{host}]:{int(port_text)}" if ":" in host else f"{host}:{int(port_text)}"  # as known_hosts writes it


def _image_target(parts: SplitResult, shown: str) -> str:
    """Validate `image:///abs/path` (syntax only); return the normalised path."""
    if parts.netloc or not parts.path.startswith("/") or parts.query or parts.fragment:
        raise InputError(f"bad image target {shown}: use image:///absolute/path")
    return os.path.normpath(parts.path)


def check_image_root(path: str, target: str) -> None:
    """InputError unless an image target's root exists and has an etc/ directory (not a symlink)."""
    shown = safe_target(target)
    if not os.path.isdir(path):
        raise InputError(f"image target {shown}: {path} is not a directory")
    etc = os.path.join(path, "etc")
    if os.path.islink(etc) or not os.path.isdir(etc):
        raise InputError(f"image target {shown}: {path} has no etc/ directory; is it an image's root file system?")


def canonical_target(target: str) -> str:
    """The target with its scheme in lower case (`SSH://h` is `ssh://h`, as URL schemes are case-insensitive), so
    every `startswith("ssh://")` downstream sees it the same."""
    scheme, sep, rest = target.partition("://")
    return f"{scheme.lower()}{sep}{rest}" if sep and scheme.isascii() and scheme.isalpha() else target


def parse_target(target: str) -> tuple[str, TransportOptions]:
    """Check a target URL; return its default host name and transport options.

    `local` → "local"; `ssh://[user@]host[:port]` → host (host:port off port 22); `ssm://i-…[?region=…]` → instance id
    (options: region); `image:///abs/path` → the path (options: image_root); `ami://ami-…[?region=…]` → the AMI
    id (options: region). Raises InputError (no file).
    Control characters are refused everywhere (urlsplit would drop a newline silently), passwords in
    `ssh://user:password@host` are refused, and no message ever contains a password.
    """
    if not isinstance(target, str) or not target:
        raise InputError("target must be a non-empty string")
    if target == "local":
        return "local", NO_TRANSPORT_OPTIONS
    shown = safe_target(target)
    if _CONTROL.search(target):
        raise InputError(f"bad target {shown}: control characters (newline, tab, …) are not allowed")
    usage = "use local, ssh://[user@]host[:port], ssm://i-…[?region=…], image:///path or ami://ami-…[?region=…]"
    try:
        parts = urlsplit(target)
    except ValueError as exc:
        raise InputError(f"bad target {shown}: {exc}") from None
    if parts.scheme == "ssh":
        return _ssh_target(target, shown), NO_TRANSPORT_OPTIONS
    if parts.scheme in ("ssm", "ami"):
        pattern, example = ((_INSTANCE_ID, "ssm://i-0123456789abcdef0") if parts.scheme == "ssm"
                            else (_AMI_ID, "ami://ami-0123456789abcdef0"))
        if not pattern.match(parts.netloc) or parts.path not in ("", "/") or parts.fragment:
            raise InputError(f"bad {parts.scheme} target {shown}: use {example}[?region=us-east-1]")
        region: str | None = None
        try:
            query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
        except ValueError:
            raise InputError(f"bad query in {parts.scheme} target {shown}") from None
        for key, value in query:
            if key != "region":
                raise InputError(f"unknown option {key!r} in {parts.scheme} target {shown} (only region)")
            if not _REGION.match(value):
                raise InputError(f"bad region {value!r} in {parts.scheme} target {shown}")
            region = value
        return parts.netloc, TransportOptions(region=region)
    if parts.scheme == "image":
        path = _image_target(parts, shown)
        return path, TransportOptions(image_root=path)
    raise InputError(f"unknown target {shown}: {usage}{_target_hint(target)}")


def _target_hint(target: str) -> str:
    """What an unknown target most likely meant: an inventory file (`-i`), an image's root (`image://`)."""
    if target.endswith((".yaml", ".yml")):
        return f" (an inventory file? give it with -i {safe_target(target, quote=False)})"
    if os.path.isdir(target):
        return f" (did you mean {safe_target('image://' + os.path.abspath(target), quote=False)}?)"
    return ""


def targets_from_args(targets: list[str], check_paths: bool = False) -> list[HostSpec]:
    """HostSpecs for command-line targets; a name taken twice gets the port, else it's an error.

    With check_paths, image roots must exist and hold etc/ (commands pass it; syntax tests do not).
    """
    specs: list[HostSpec] = []
    seen: dict[str, str] = {}
    for target in map(canonical_target, targets):
        name, options = parse_target(target)
        if check_paths and options.image_root is not None:
            check_image_root(options.image_root, target)
        if name in seen and target.startswith("ssh://"):
            parts = urlsplit(target)
            name = f"{parts.hostname}:{parts.port or 22}"
        if name in seen:
            raise InputError(f"target {target!r} names the same host as {seen[name]!r}")
        seen[name] = target
        specs.append(HostSpec(name=name, target=target, options=options))
    return specs


def load_inventory(path: str | Path, check_paths: bool = False) -> list[HostSpec]:
    """Parse and validate an inventory file into HostSpecs (defaults merged into each host).

    With check_paths, image roots must exist and hold etc/ (errors name the file and line).
    """
    return [spec for spec, _ in inventory_hosts(path, check_paths)]


def inventory_hosts(path: str | Path, check_paths: bool = False) -> list[tuple[HostSpec, int | None]]:
    """load_inventory's HostSpecs, each with the line of its entry (for errors that span files)."""
    return _Inventory(Path(path), check_paths).specs()


class _Inventory:
    def __init__(self, path: Path, check_paths: bool = False):
        self.path = path
        self.check_paths = check_paths
        self.file = str(path)
        self.base = path.resolve().parent
        self.doc = load_yaml_file(path)

    def fail(self, message: str, node: Any = None, key: Any = None) -> InputError:
        return InputError(message, self.file, line_of(node, key) if node is not None else None)

    def specs(self) -> list[tuple[HostSpec, int | None]]:
        doc = self.doc
        if doc is None:
            raise self.fail("empty inventory: expected a mapping with `hosts:`")
        check(doc, INVENTORY_FORM, self.file)  # shapes, types, ports, user names: the declared format
        defaults = doc.get("defaults") or {}
        base_ssh = self.ssh_fields(defaults.get("ssh"), "defaults.ssh")
        base_labels = self.labels(defaults.get("labels"))
        out: list[tuple[HostSpec, int | None]] = []
        names: dict[str, int | None] = {}
        for index, host in enumerate(doc["hosts"]):
            spec = self.host(host, index, base_ssh, base_labels)
            if spec.name in names:
                raise self.fail(
                    f"duplicate host name {spec.name!r} (first at line {names[spec.name]})", host, "name"
                )
            names[spec.name] = line_of(host, "name")
            out.append((spec, line_of(host, "name" if "name" in host else "target")))
        return out

    def host(self, host: dict[str, Any], index: int, base_ssh: dict[str, Any], base_labels: dict[str, str]) -> HostSpec:
        """One host entry (its shape checked by the schema): the target parsed, defaults merged."""
        try:
            _, options = parse_target(host["target"])
            if self.check_paths and options.image_root is not None:
                check_image_root(options.image_root, host["target"])
        except InputError as exc:
            raise self.fail(exc.message, host, "target") from None
        ssh = {**base_ssh, **self.ssh_fields(host.get("ssh"), f"hosts[{index}].ssh")}
        labels = {**base_labels, **self.labels(host.get("labels"))}
        if len(labels) > MAX_HOST_LABELS:
            raise self.fail(f"host {host['name']!r} has {len(labels):,} labels with the defaults' (at most "
                            f"{MAX_HOST_LABELS:,})", host, "labels" if "labels" in host else "name")
        return HostSpec(name=host["name"], target=canonical_target(host["target"]), labels=labels,
                        ssh=SSHOptions(**ssh), options=options)

    def labels(self, value: dict[str, Any] | None) -> dict[str, str]:
        """Labels as text; a key YAML read as a number or boolean (JSON would see text) is refused, and so is a
        value YAML read as a number other than its text (`010` is 8: yamlload.as_text)."""
        for k in value or {}:
            if not isinstance(k, str):
                raise self.fail(f"label name {k!r} must be a string", value, k)
        return {k: as_text(value, k, self.file, f"label {k}") for k in value or {}}

    def ssh_fields(self, value: dict[str, Any] | None, what: str) -> dict[str, Any]:
        """SSHOptions fields present in `value` (only those given, for merging): paths resolved, no passwords."""
        out: dict[str, Any] = {}
        for k, v in (value or {}).items():
            if k == "proxy_jump" and v is not None and _has_password(v):
                raise self.fail(f"{what}.proxy_jump {redact_urls('ssh://' + v)[6:]!r}: passwords are refused; "
                                "use identity_file or ssh-agent", value, k)
            if k in _PATH_KEYS and v is not None:
                v = self.resolve(v)
            elif k == "connect_timeout":
                v = float(v)
            out[k] = v
        return out

    def resolve(self, path: str) -> str:
        """Relative paths are relative to the inventory's directory; `~…` is kept for later."""
        if path.startswith("~") or os.path.isabs(path):
            return path
        return str(self.base / path)


def _has_password(jump: str) -> bool:
    """A ProxyJump value `[ssh://][user[:password]@]host[:port][,…]` with a password in any hop."""
    for hop in jump.split(","):
        hop = hop.strip()
        hop = hop[6:] if hop[:6].lower() == "ssh://" else hop  # the scheme in any case
        userinfo, at, _ = hop.rpartition("@")
        if at and ":" in userinfo:
            return True
    return False
