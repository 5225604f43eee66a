"""The known-bad table on a real fleet host: dummy .deb packages with the listed versions, built offline with
dpkg-deb inside the host and installed with dpkg -i, are scanned over SSH with the real CLI; every known.* rule fires
naming package and version, and the stock host scanned beside it gets none. Then the fixed versions go in over them
and the same scan passes; the dummies are purged at the end (other tests share the host). Two scans in all."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.reportdoc import validate_report
from tests.fleet import Fleet
from tests.fleet.fleet import combined_inventory

HOST = "a1"
STOCK = "a2"  # scanned beside it, untouched
EXTRA = "ami-auditor-kb-extra"  # a package only the user's own row (known-bad.extra) lists
BAD = {
    "runc": "1.0.0~rc93+ds1-5",  # Debian's rc93: both runc rules (rc93, and the fd leak added in rc93)
    "libnvidia-container1": "1.16.1-1",  # what minikube's base image shipped (minikube#19725)
    "containerd": "1.7.20~ds1-1",
    "datadog-agent": "1:7.38.0-1",  # Datadog's packages carry epoch 1
    EXTRA: "0.9-1",
}
FIXED = {"runc": "1.1.12-1", "libnvidia-container1": "1.17.8-1", "containerd": "1.7.22~ds1-1",
         "datadog-agent": "1:7.38.2-1", EXTRA: "1.0-1"}
EXPECTED = {  # rule → the package it names
    "known.runc-cve-2024-21626": "runc", "known.runc-rc93": "runc",
    "known.nvidia-container-toolkit-cve": "libnvidia-container1", "known.containerd-lost-exit-events": "containerd",
    "known.datadog-agent-zombie-leak": "datadog-agent", "known.listed-version": EXTRA,
}
EXTRA_ROW = [{"id": "ours", "packages": [EXTRA], "versions": "< 1.0", "advisory": "our own advisory"}]
# a package's tree: DEBIAN/control, and for runc the key binary, so facts.binaries names its owner and version
BUILD = r"""set -eu
dir=/tmp/ami-auditor-kb/$1_$2; rm -rf "$dir"; mkdir -p "$dir/DEBIAN"
{ echo "Package: $1"; echo "Version: $2"; echo "Architecture: all"
  echo "Maintainer: ami-auditor tests <tests@example.invalid>"; echo "Description: ami-auditor known-bad dummy"
} > "$dir/DEBIAN/control"
if [ "$1" = runc ]; then
  mkdir -p "$dir/usr/sbin"; printf '#!/bin/sh\necho "runc version %s"\n' "$2" > "$dir/usr/sbin/runc"
  chmod 755 "$dir/usr/sbin/runc"
fi
dpkg-deb --root-owner-group --build "$dir" "$dir.deb" >/dev/null
"""


def _install(fleet: Fleet, versions: dict[str, str]) -> None:
    debs = []
    for name, version in versions.items():
        done = fleet.exec(HOST, ["sh", "-c", BUILD, "build", name, version], timeout=60)
        assert done.returncode == 0, done.stderr
        debs.append(f"/tmp/ami-auditor-kb/{name}_{version}.deb")
    done = fleet.exec(HOST, ["dpkg", "-i", *debs], timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = fleet.exec(HOST, ["dpkg-query", "-W", *versions], check=True).stdout
    assert dict(line.split("\t") for line in shown.splitlines()) == versions


def _scan(inventory: Path, out: Path) -> dict[str, Any]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["scan", "-i", str(inventory), "--set", f"known-bad.extra={json.dumps(EXTRA_ROW)}", "--format",
                 "json", "--out", str(out)], Env(stdout=stdout, stderr=stderr))
    assert code in (0, 1), stderr.getvalue()
    doc = json.loads((out / "report.json").read_text())
    validate_report(doc)
    assert {h["name"]: h["status"] for h in doc["hosts"]} == {HOST: "ok", STOCK: "ok"}, stderr.getvalue()
    assert {r["id"] for r in doc["rules"]} >= set(EXPECTED)
    return doc


def _known(doc: dict[str, Any], host: str = HOST) -> dict[str, dict[str, Any]]:
    found = [f for f in doc["findings"] if f["rule"].startswith("known.") and f["host"] == host]
    assert len({f["rule"] for f in found}) == len(found), found  # one finding per rule: one package each
    return {f["rule"]: f for f in found}


@pytest.mark.fleet
def test_known_bad_versions_fire_on_a_real_host_and_pass_once_fixed(fleet: Fleet, tmp_path: Path) -> None:
    inventory = combined_inventory(tmp_path / "inventory.yaml", [(fleet, HOST), (fleet, STOCK)])
    try:
        _install(fleet, BAD)
        doc = _scan(inventory, tmp_path / "bad")
        assert _known(doc, STOCK) == {}  # the stock host: no known-bad package
        bad = _known(doc)
        assert {rule: f["item"] for rule, f in bad.items()} == EXPECTED
        for rule, f in bad.items():
            package, version = EXPECTED[rule], BAD[EXPECTED[rule]]
            assert f["host"] == HOST and f["title"].startswith(f"{package} {version}"), f["title"]
            assert (f["evidence"]["package"], f["evidence"]["version"], f["evidence"]["manager"]) == (
                package, version, "dpkg")
        runc = bad["known.runc-cve-2024-21626"]
        assert runc["severity"] == "critical" and "CVE-2024-21626" in runc["title"]
        assert (runc["evidence"]["binary"], runc["evidence"]["path"]) == ("runc", "/usr/sbin/runc")  # facts.binaries
        assert bad["known.nvidia-container-toolkit-cve"]["severity"] == "critical"
        assert "CVE-2024-0132" in bad["known.nvidia-container-toolkit-cve"]["title"]
        assert bad["known.listed-version"]["title"] == f"{EXTRA} 0.9-1: our own advisory"

        _install(fleet, FIXED)
        doc = _scan(inventory, tmp_path / "fixed")
        assert _known(doc) == {} and _known(doc, STOCK) == {}
    finally:
        fleet.exec(HOST, ["dpkg", "--purge", *BAD], timeout=120)
        fleet.exec(HOST, ["rm", "-rf", "/tmp/ami-auditor-kb"])
    left = fleet.exec(HOST, ["dpkg-query", "-W", "-f", "${db:Status-Abbrev}${Package}\n", *BAD]).stdout
    assert [line for line in left.splitlines() if line.startswith("ii")] == []

