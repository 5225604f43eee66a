"""What an image must not carry (rules/image.yaml): host keys, cloud-init state, histories, root's
authorized keys, credential files, package caches — as metadata only (paths, sizes, counts, kinds).

Lines are `key=value` or tab-separated records whose last field is a path (host text, kept whole).
A host key's fingerprint arrives as the hex SHA-256 of its public key blob and is shown the way
`ssh-keygen -l` prints it (`SHA256:` + unpadded base64)."""

from __future__ import annotations

import base64
import re

from ...facttypes import (
    Hygiene,
    HygienePackageCachesRow,
    HygieneRootAuthorizedKeysRow,
    HygieneShellHistoriesRow,
    HygieneSshHostKeysRow,
)
from ..sections import UnparsableOutput, kv_lines, to_int

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_KEY_TYPE = re.compile(r"^[a-z0-9-]{1,32}$")
MACHINE_ID_STATES = frozenset({"absent", "empty", "uninitialized", "populated"})
CREDENTIAL_KINDS = frozenset({"aws-credentials", "aws-access-key-id", "secret-variable", "netrc",
                              "git-credentials", "pgpass", "docker-auth"})


def fingerprint(hex_digest: str) -> str | None:
    """`SHA256:…` as ssh-keygen prints it, from the hex digest of the key blob (None when not one)."""
    if not _HEX64.match(hex_digest):
        return None
    return "SHA256:" + base64.b64encode(bytes.fromhex(hex_digest)).decode().rstrip("=")


def parse_hygiene(text: str) -> Hygiene:
    kv = kv_lines("\n".join(ln for ln in text.splitlines() if "\t" not in ln))
    keys: dict[str, HygieneSshHostKeysRow] = {}
    authorized: dict[str, HygieneRootAuthorizedKeysRow] = {}
    histories: dict[str, HygieneShellHistoriesRow] = {}
    credentials: dict[str, set[str]] = {}
    caches: dict[str, HygienePackageCachesRow] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition("\t")
        if kind in ("key", "credential") or kind in ("authorized", "history", "cache"):
            fields = rest.split("\t", 2 if kind == "key" else 1)
            if len(fields) < (3 if kind == "key" else 2) or not fields[-1].startswith("/"):
                continue
            path = fields[-1]
            if kind == "key":
                key_type = fields[0] if _KEY_TYPE.match(fields[0]) else "unknown"
                if fields[1] not in ("", "-") and fingerprint(fields[1]) is None:  # `-`: no usable .pub
                    raise UnparsableOutput(f"sha256sum printed {fields[1][:60]!r} for {path}.pub, not a digest")
                keys[path] = {"path": path, "type": key_type, "fingerprint": fingerprint(fields[1])}
            elif kind == "authorized":
                authorized[path] = {"path": path, "keys": to_int(fields[0])}
            elif kind == "history":
                histories[path] = {"path": path, "bytes": to_int(fields[0])}
            elif kind == "cache":
                kb = to_int(fields[0])
                if kb is None and fields[0]:
                    raise UnparsableOutput(f"du printed {fields[0][:60]!r} for {path}, not a size")
                caches[path] = {"path": path, "mb": None if kb is None else round(kb / 1024, 1)}
            elif fields[0] in CREDENTIAL_KINDS:
                credentials.setdefault(path, set()).add(fields[0])
    return {
        "image": kv.get("image") == "1",
        "cloud_init_instances": to_int(kv.get("cloud_instances")),
        "machine_id_state": kv.get("machine_id_state") if kv.get("machine_id_state") in MACHINE_ID_STATES else None,
        "ssh_host_keys": [keys[p] for p in sorted(keys)],
        "root_authorized_keys": [authorized[p] for p in sorted(authorized)],
        "shell_histories": [histories[p] for p in sorted(histories)],
        "credential_files": [{"path": p, "kinds": sorted(credentials[p])} for p in sorted(credentials)],
        "package_caches": [caches[p] for p in sorted(caches)],
    }
