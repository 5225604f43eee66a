#!/usr/bin/env python3
"""Packer gate: audit the build instance with `ami-auditor scan`; a non-zero exit fails the build.

Run by the template's shell-local provisioner with AUDIT_* environment variables (values are passed as
data — an inventory file and an argument list — never as shell text):
  AUDIT_HOST, AUDIT_PORT, AUDIT_USER      the build instance over SSH
  AUDIT_IDENTITY, AUDIT_KNOWN_HOSTS       private key file; known_hosts (empty: trust on first use)
  AUDIT_LABELS                            JSON object of labels for the host (e.g. {"az": "us-east-1a"})
  AUDIT_ARGS                              JSON list of extra `scan` arguments (--baseline, --rules, --fail-on …)
  AUDIT_BIN                               JSON list: the command that runs ami-auditor
  AUDIT_OUT                               where the JSON and HTML reports go
Exit status is ami-auditor's: 0 passes; 1 (findings at or above --fail-on), 2, 3 and 4 fail the build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile


def _json(name: str, default: str, kind: type) -> object:
    value = json.loads(os.environ.get(name) or default)
    if not isinstance(value, kind):
        raise SystemExit(f"gate: {name} must be a JSON {kind.__name__}")
    return value


def main() -> int:
    host = os.environ.get("AUDIT_HOST", "")
    if not host:
        raise SystemExit("gate: AUDIT_HOST is empty")
    port = int(os.environ.get("AUDIT_PORT") or 22)
    user = os.environ.get("AUDIT_USER") or "root"
    ssh: dict[str, object] = {"user": user}
    if os.environ.get("AUDIT_IDENTITY"):
        ssh["identity_file"] = os.environ["AUDIT_IDENTITY"]
    if os.environ.get("AUDIT_KNOWN_HOSTS"):
        ssh["known_hosts"] = os.environ["AUDIT_KNOWN_HOSTS"]
    else:
        ssh["trust_on_first_use"] = True  # a fresh build instance: no key is known yet
    labels = _json("AUDIT_LABELS", "{}", dict)
    args = _json("AUDIT_ARGS", "[]", list)
    command = _json("AUDIT_BIN", '["ami-auditor"]', list)
    out = os.environ.get("AUDIT_OUT") or "ami-auditor-report"
    target = f"ssh://{user}@{host}:{port}" if ":" not in host else f"ssh://{user}@[{host}]:{port}"
    with tempfile.TemporaryDirectory(prefix="ami-auditor-gate-") as tmp:
        inventory = os.path.join(tmp, "inventory.json")  # JSON is YAML: the inventory loader reads it
        if "known_hosts" not in ssh:
            ssh["known_hosts"] = os.path.join(tmp, "known_hosts")
        with open(inventory, "w", encoding="utf-8") as f:
            json.dump({"hosts": [{"name": "build-instance", "target": target, "labels": labels, "ssh": ssh}]}, f)
        argv = [*map(str, command), "scan", "-i", inventory, *map(str, args), "--format", "json,html", "--out", out]
        print("gate: " + " ".join(argv), flush=True)
        code = subprocess.run(argv, check=False).returncode
    print(f"gate: ami-auditor exited {code}: {'pass' if code == 0 else 'FAIL — the image is not released'}",
          flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
