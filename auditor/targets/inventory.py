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
Every error is an InputError naming the file and line. Relative paths (identity_file, known_hosts,
ssh_config) are resolved against the inventory's directory; `~` is left for the transport to expand.
"""

from __future__ import annotations

import os
import re
from dataclasses import fields
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..errors import InputError
from ..models import HostSpec, SSHOptions
from ..yamlload import line_of, load_yaml_file

TOP_KEYS = ("defaults", "hosts")
DEFAULT_KEYS = ("ssh", "labels")
HOST_KEYS = ("name", "target", "labels", "ssh")
SSH_KEYS = tuple(f.name for f in fields(SSHOptions))
_PATH_KEYS = ("identity_file", "known_hosts", "ssh_config")
_INSTANCE_ID = re.compile(r"^m?i-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
_REGION = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+$")
_BAD_NAME = re.compile(r"[\s\x00-\x1f\x7f]")


def parse_target(target: str) -> tuple[str, dict[str, Any]]:
    """Check a target URL; return its default host name and transport options.

    `local` → "local"; `ssh://[user@]host[:port]` → host; `ssm://i-…[?region=…]` → instance id
    (options: region); `image:///abs/path` → the path (options: path). Raises InputError (no file).
    """
    if not isinstance(target, str) or not target:
        raise InputError("target must be a non-empty string")
    if target == "local":
        return "local", {}
    usage = "use local, ssh://[user@]host[:port], ssm://i-…[?region=…] or image:///path"
    parts = urlsplit(target)
    if parts.scheme == "ssh":
        try:
            parts.port  # noqa: B018 - validates the port
        except ValueError:
            raise InputError(f"bad port in target {target!r}") from None
        if not parts.hostname or parts.password is not None:
            raise InputError(f"bad ssh target {target!r}: use ssh://[user@]host[:port]")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise InputError(f"bad ssh target {target!r}: no path, query or fragment allowed")
        return parts.hostname, {}
    if parts.scheme == "ssm":
        if not _INSTANCE_ID.match(parts.netloc) or parts.path not in ("", "/") or parts.fragment:
            raise InputError(f"bad ssm target {target!r}: use ssm://i-0123456789abcdef0[?region=us-east-1]")
        options: dict[str, Any] = {}
        try:
            query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
        except ValueError:
            raise InputError(f"bad query in ssm target {target!r}") from None
        for key, value in query:
            if key != "region":
                raise InputError(f"unknown option {key!r} in ssm target {target!r} (only region)")
            if not _REGION.match(value):
                raise InputError(f"bad region {value!r} in ssm target {target!r}")
            options["region"] = value
        return parts.netloc, options
    if parts.scheme == "image":
        if parts.netloc or not parts.path.startswith("/") or parts.query or parts.fragment:
            raise InputError(f"bad image target {target!r}: use image:///absolute/path")
        path = os.path.normpath(parts.path)
        return path, {"path": path}
    raise InputError(f"unknown target {target!r}: {usage}")


def targets_from_args(targets: list[str]) -> list[HostSpec]:
    """HostSpecs for command-line targets; a name taken twice gets the port, else it's an error."""
    specs: list[HostSpec] = []
    seen: dict[str, str] = {}
    for target in targets:
        name, options = parse_target(target)
        if name in seen and target.startswith("ssh://"):
            parts = urlsplit(target)
            name = f"{parts.hostname}:{parts.port or 22}"
        if name in seen:
            raise InputError(f"target {target!r} names the same host as {seen[name]!r}")
        seen[name] = target
        specs.append(HostSpec(name=name, target=target, options=options))
    return specs


def load_inventory(path: str | Path) -> list[HostSpec]:
    """Parse and validate an inventory file into HostSpecs (defaults merged into each host)."""
    return _Inventory(Path(path)).specs()


class _Inventory:
    def __init__(self, path: Path):
        self.path = path
        self.file = str(path)
        self.base = path.resolve().parent
        self.doc = load_yaml_file(path)

    def fail(self, message: str, node: Any = None, key: Any = None) -> InputError:
        return InputError(message, self.file, line_of(node, key) if node is not None else None)

    def mapping(self, value: Any, what: str, parent: Any, key: Any) -> dict:
        if not isinstance(value, dict):
            raise self.fail(f"{what} must be a mapping, not {_kind(value)}", parent, key)
        return value

    def check_keys(self, node: dict, allowed: tuple[str, ...], what: str) -> None:
        for key in node:
            if key not in allowed:
                raise self.fail(
                    f"unknown key {key!r} in {what} (allowed: {', '.join(allowed)})", node, key
                )

    def specs(self) -> list[HostSpec]:
        doc = self.doc
        if doc is None:
            raise self.fail("empty inventory: expected a mapping with `hosts:`")
        doc = self.mapping(doc, "the inventory", doc, None)
        self.check_keys(doc, TOP_KEYS, "the inventory")
        defaults = doc.get("defaults")
        defaults = {} if defaults is None else self.mapping(defaults, "defaults", doc, "defaults")
        self.check_keys(defaults, DEFAULT_KEYS, "defaults")
        base_ssh = self.ssh_fields(defaults.get("ssh"), defaults, "ssh", "defaults.ssh")
        base_labels = self.labels(defaults.get("labels"), defaults, "labels")
        if "hosts" not in doc:
            raise self.fail("missing `hosts:` (a list of hosts)", doc)
        hosts = doc["hosts"]
        if not isinstance(hosts, list):
            raise self.fail(f"hosts must be a list, not {_kind(hosts)}", doc, "hosts")
        if not hosts:
            raise self.fail("hosts is empty", doc, "hosts")
        out: list[HostSpec] = []
        names: dict[str, int | None] = {}
        for index, host in enumerate(hosts):
            spec = self.host(host, hosts, index, base_ssh, base_labels)
            if spec.name in names:
                raise self.fail(
                    f"duplicate host name {spec.name!r} (first at line {names[spec.name]})", host, "name"
                )
            names[spec.name] = line_of(host, "name")
            out.append(spec)
        return out

    def host(
        self, host: Any, hosts: list, index: int, base_ssh: dict[str, Any], base_labels: dict[str, str]
    ) -> HostSpec:
        host = self.mapping(host, f"hosts[{index}]", hosts, index)
        self.check_keys(host, HOST_KEYS, f"hosts[{index}]")
        for key in ("name", "target"):
            if key not in host:
                raise self.fail(f"hosts[{index}] has no {key!r}", host)
            if not isinstance(host[key], str) or not host[key].strip():
                raise self.fail(f"{key} must be a non-empty string, not {_kind(host[key])}", host, key)
        name = host["name"]
        if _BAD_NAME.search(name):
            raise self.fail(f"host name {name!r} contains whitespace or control characters", host, "name")
        try:
            _, options = parse_target(host["target"])
        except InputError as exc:
            raise self.fail(exc.message, host, "target") from None
        ssh = {**base_ssh, **self.ssh_fields(host.get("ssh"), host, "ssh", f"hosts[{index}].ssh")}
        labels = {**base_labels, **self.labels(host.get("labels"), host, "labels")}
        return HostSpec(name=name, target=host["target"], labels=labels, ssh=SSHOptions(**ssh), options=options)

    def labels(self, value: Any, parent: Any, key: str) -> dict[str, str]:
        if value is None:
            return {}
        value = self.mapping(value, "labels", parent, key)
        out: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise self.fail(f"label name {k!r} must be a string", value, k)
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                hint = " (quote it)" if isinstance(v, bool) else ""
                raise self.fail(f"label {k!r} must be a string, not {_kind(v)}{hint}", value, k)
            out[k] = str(v)
        return out

    def ssh_fields(self, value: Any, parent: Any, key: str, what: str) -> dict[str, Any]:
        """Validated SSHOptions fields present in `value` (only those given, for merging)."""
        if value is None:
            return {}
        value = self.mapping(value, what, parent, key)
        self.check_keys(value, SSH_KEYS, what)
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k == "port":
                ok = v is None or (isinstance(v, int) and not isinstance(v, bool) and 0 < v < 65536)
                expect = "an integer 1-65535"
            elif k == "connect_timeout":
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                expect = "a positive number of seconds"
            elif k == "trust_on_first_use":
                ok = isinstance(v, bool)
                expect = "true or false"
            elif k == "sudo":
                ok = v is None or isinstance(v, bool)
                expect = "true, false or null (automatic)"
            else:  # user, proxy_jump and the paths
                ok = v is None or (isinstance(v, str) and bool(v.strip()))
                expect = "a non-empty string"
            if not ok:
                raise self.fail(f"{what}.{k} must be {expect}, not {_kind(v)} {v!r}", value, k)
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


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    for typ, word in ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
                      (list, "a list"), (dict, "a mapping")):
        if isinstance(value, typ):
            return word
    return type(value).__name__
