"""The known-bad table (rules/known-bad.yaml) and its function `known_bad()`: rows matched against installed packages
and key binaries' owning packages by the manager's version rules, on recorded and synthetic snapshots."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import jmespath
import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.errors import InputError
from auditor.judge.functions import OPTIONS
from auditor.judge.params import parse_set
from auditor.judge.rules import load_rules
from auditor.models import Finding
from tests.system.test_known_bad_fleet import BAD, BUILD, EXPECTED, EXTRA_ROW, FIXED
from tests.unit.test_image_transport import make_root
from tests.unit.test_rules_builtin import judge, recorded

KNOWN = ("known.runc-cve-2024-21626", "known.runc-rc93", "known.nvidia-container-toolkit-cve",
         "known.containerd-lost-exit-events", "known.datadog-agent-zombie-leak", "known.listed-version")
TABLE = [
    {"id": "runc-cve", "packages": ["runc"], "versions": ">= 1.0.0~rc93 < 1.1.12",
     "fixed": ["1.1.5+ds1-1+deb12u1", "1.1.11-1.amzn2"], "advisory": "CVE-2024-21626", "refs": ["https://a"]},
    {"id": "dd", "packages": ["datadog-agent"], "versions": ["7.38.0", "7.38.1"], "advisory": "zombies",
     "refs": ["https://b"]},
    {"id": "ctk-0132", "packages": ["libnvidia-container1"], "versions": "<= 1.16.1", "advisory": "CVE-2024-0132",
     "refs": ["https://c"]},
    {"id": "ctk-23266", "packages": ["libnvidia-container1"], "versions": "< 1.17.8", "advisory": "CVE-2025-23266",
     "refs": ["https://c", "https://d"]},
    {"id": "by-binary", "binary": "kubelet", "versions": "< 1.25", "advisory": "old kubelet"},
]


def known_bad(packages: Any, binaries: Any = None, table: Any = TABLE, ids: str = "*") -> list[dict[str, Any]]:
    doc = {"p": packages, "b": binaries, "t": table, "i": ids}
    return jmespath.search("known_bad(p, b, t, i)", doc, options=OPTIONS)  # type: ignore[no-any-return]


def pkgs(manager: str, *rows: tuple[str, str]) -> dict[str, Any]:
    items = [{"name": n, "version": v, "arch": "amd64"} for n, v in rows]
    return {"manager": manager, "count": len(rows), "items": items}


def test_dpkg_rows_match_by_the_managers_order_not_as_strings() -> None:
    got = known_bad(pkgs("dpkg", ("runc", "1.1.11-1"), ("datadog-agent", "1:7.38.1-1"), ("bash", "5.2.15-2+b2"),
                         ("libnvidia-container1:amd64", "1.16.1-1")))
    assert [(m["package"], m["version"], [r["id"] for r in m["rows"]]) for m in got] == [
        ("datadog-agent", "1:7.38.1-1", ["dd"]),
        ("libnvidia-container1", "1.16.1-1", ["ctk-0132", "ctk-23266"]),  # one match, both advisories
        ("runc", "1.1.11-1", ["runc-cve"]),
    ]
    ctk = got[1]
    assert ctk["advisory"] == "CVE-2024-0132; CVE-2025-23266" and ctk["refs"] == ["https://c", "https://d"]
    assert ctk["rows"][0]["versions"] == "<= 1.16.1" and ctk["manager"] == "dpkg" and ctk["arch"] == "amd64"
    # past each range, and a string comparison would have said otherwise ("1.1.9" > "1.1.12" as text)
    assert known_bad(pkgs("dpkg", ("runc", "1.1.12-1"), ("datadog-agent", "1:7.38.2-1"),
                          ("libnvidia-container1", "1.17.10-1"))) == []
    assert [m["package"] for m in known_bad(pkgs("dpkg", ("runc", "1.1.9-1")))] == ["runc"]
    assert known_bad(pkgs("dpkg", ("runc", "1.0.0~rc92+ds1-1"))) == []  # before the leak was added


def test_a_distro_backport_listed_as_fixed_is_not_reported() -> None:
    assert known_bad(pkgs("dpkg", ("runc", "1.1.5+ds1-1+deb12u1"))) == []
    assert [m["version"] for m in known_bad(pkgs("dpkg", ("runc", "1.1.5+ds1-1+b1")))] == ["1.1.5+ds1-1+b1"]


def test_an_rpm_snapshot_is_compared_by_rpms_rules() -> None:
    got = known_bad(pkgs("rpm", ("runc", "1.1.11-1.amzn2"), ("libnvidia-container1", "1.17.7-1"),
                         ("datadog-agent", "7.38.0-1")))
    assert [(m["package"], m["manager"], [r["id"] for r in m["rows"]]) for m in got] == [
        ("datadog-agent", "rpm", ["dd"]), ("libnvidia-container1", "rpm", ["ctk-23266"])]
    assert [m["package"] for m in known_bad(pkgs("rpm", ("runc", "1.1.11-0.1.amzn2")))] == ["runc"]


def test_a_key_binary_names_its_path_and_a_binary_row_reads_its_owners_version() -> None:
    binaries = [
        {"name": "runc", "found": True, "path": "/usr/sbin/runc", "package": "runc", "package_version": "1.1.11-1",
         "package_manager": "dpkg"},
        {"name": "kubelet", "found": True, "path": "/usr/bin/kubelet", "package": "kubelet",
         "package_version": "1.24.17-00", "package_manager": "dpkg"},
        {"name": "dockerd", "found": True, "path": "/usr/bin/dockerd", "package": None, "package_version": None},
        {"name": "containerd", "found": False},
    ]
    got = {m["package"]: m for m in known_bad(pkgs("dpkg", ("runc", "1.1.11-1")), binaries)}
    assert set(got) == {"runc", "kubelet"}
    assert (got["runc"]["binary"], got["runc"]["path"], got["runc"]["arch"]) == ("runc", "/usr/sbin/runc", "amd64")
    assert [r["id"] for r in got["kubelet"]["rows"]] == ["by-binary"]  # kubelet is no installed package row here
    # packages not collected: a key binary's owning package is still judged
    assert [m["package"] for m in known_bad(None, binaries[:1], ids="runc-*")] == ["runc"]


def test_rows_are_chosen_by_a_glob_of_ids() -> None:
    p = pkgs("dpkg", ("runc", "1.1.11-1"), ("libnvidia-container1", "1.16.1-1"))
    assert [m["package"] for m in known_bad(p, ids="ctk-*")] == ["libnvidia-container1"]
    assert [m["package"] for m in known_bad(p, ids="runc-cve")] == ["runc"]
    assert known_bad(p, ids="nothing") == [] and known_bad(p, table=[]) == []


@pytest.mark.parametrize(("row", "message"), [
    ("not a row", "expected a mapping"),
    ({"id": "x", "packages": ["p"], "versions": "< 1", "advisory": "a", "typo": 1}, "unknown keys ['typo']"),
    ({"id": "x", "versions": "< 1", "advisory": "a"}, "needs `packages`"),
    ({"id": "x", "packages": "runc", "versions": "< 1", "advisory": "a"}, "`packages` must be a list"),
    ({"id": "x", "packages": ["p"], "versions": "=> 1", "advisory": "a"}, "cannot read version constraint"),
    ({"id": "x", "packages": ["p"], "versions": [], "advisory": "a"}, "`versions` must be"),
    ({"id": "x", "packages": ["p"], "versions": "< 1"}, "`id` and `advisory` must be strings"),
    ({"id": "x", "packages": ["p"], "versions": "< 1", "advisory": "a", "fixed": "1-1"}, "`fixed` must be a list"),
])
def test_a_bad_table_row_is_an_error_naming_it(row: Any, message: str) -> None:
    with pytest.raises(Exception, match="known-bad table row 1") as info:
        known_bad(pkgs("dpkg", ("p", "0.1")), table=[row])
    assert message in str(info.value)


def test_an_unreadable_installed_version_of_a_listed_package_is_an_error_not_a_pass() -> None:
    with pytest.raises(Exception, match="runc 1 1: not a dpkg version"):
        known_bad(pkgs("dpkg", ("runc", "1 1")))
    assert known_bad(pkgs("dpkg", ("unlisted", "1 1"))) == []  # only listed packages are read


def findings(snapshot: dict[str, Any], *overrides: str) -> list[Finding]:
    return [f for f in judge(snapshot, *overrides) if f.rule.startswith("known.")]


def with_packages(base: str, manager: str, *rows: tuple[str, str]) -> dict[str, Any]:
    snap = recorded(base)
    snap["facts"]["packages"] = pkgs(manager, *rows)
    return snap


def test_the_built_in_rules_fire_with_package_version_and_advisory_in_title_and_evidence() -> None:
    snap = with_packages("fleet-a1", "dpkg", ("runc", "1.1.11-1"), ("libnvidia-container1", "1.16.1-1"),
                         ("containerd", "1.7.20~ds1-1"), ("datadog-agent", "1:7.38.0-1"), ("bash", "5.2.15-2+b2"))
    got = {f.rule: f for f in findings(snap)}
    assert set(got) == {"known.runc-cve-2024-21626", "known.nvidia-container-toolkit-cve",
                        "known.containerd-lost-exit-events", "known.datadog-agent-zombie-leak"}
    runc = got["known.runc-cve-2024-21626"]
    assert runc.severity == "critical" and runc.item == "runc"
    assert runc.title.startswith("runc 1.1.11-1 is affected by CVE-2024-21626 (GHSA-xr7r-f8xq-vfvv")
    assert runc.evidence["package"] == "runc" and runc.evidence["version"] == "1.1.11-1"
    assert runc.evidence["matched"][0]["versions"] == ">= 1.0.0-0.1.20210225 < 1.1.12"
    assert any("GHSA-xr7r-f8xq-vfvv" in r for r in runc.evidence["refs"])
    ctk = got["known.nvidia-container-toolkit-cve"]
    assert "CVE-2024-0132" in ctk.title and "CVE-2025-23266" in ctk.title and ctk.severity == "critical"
    assert got["known.datadog-agent-zombie-leak"].title.startswith("datadog-agent 1:7.38.0-1: ")


def test_runc_rc93_by_debian_and_amazon_linux_versions() -> None:
    deb = findings(with_packages("fleet-a1", "dpkg", ("runc", "1.0.0~rc93+ds1-5")))
    assert {f.rule for f in deb} == {"known.runc-rc93", "known.runc-cve-2024-21626"}
    al2 = findings(with_packages("al2", "rpm", ("runc", "1.0.0-0.3.20210225.git12644e6.amzn2")))
    assert [f.rule for f in al2 if f.rule == "known.runc-rc93"] == ["known.runc-rc93"]
    assert findings(with_packages("al2", "rpm", ("runc", "1.0.0-0.1.20200826.gitff819c7.amzn2"))) == []  # rc92
    assert findings(with_packages("fleet-a1", "dpkg", ("runc", "1.0.0~rc92+ds1-1"))) == []
    # the final 1.0.0 on either manager: past rc93, before 1.1.12
    for manager, version in (("dpkg", "1.0.0-1"), ("rpm", "1.0.0-1.amzn2")):
        got = findings(with_packages("al2", manager, ("runc", version)))
        assert [f.rule for f in got] == ["known.runc-cve-2024-21626"], (manager, version)


def test_recorded_hosts_get_no_known_finding() -> None:
    # AL2 and AL2023 run runc 1.1.11 builds that carry the CVE-2024-21626 fix (listed as `fixed`), the DLAMI
    # containerd.io 1.6.28, the fleet hosts none of the listed packages
    for name in ("al2", "al2023", "ubuntu2004-dlami", "fleet-golden", "fleet-a1", "fleet-b1"):
        assert findings(recorded(name)) == [], name


def test_users_extend_the_table_with_extra_rows() -> None:
    row = {"id": "mine", "packages": ["bash"], "versions": "< 5.3", "advisory": "our bash advisory"}
    snap = recorded("fleet-a1")
    got = findings(snap, f"known-bad.extra={json.dumps([row])}")
    assert [(f.rule, f.item, f.title) for f in got] == [
        ("known.listed-version", "bash", f"bash {_version(snap, 'bash')}: our bash advisory")]


def test_a_bad_extra_row_is_reported_as_an_error_finding_not_a_silent_pass() -> None:
    row = "{id: mine, packages: [bash], versions: '=> 1', advisory: a}"
    got = findings(recorded("fleet-a1"), f"known-bad.extra=[{row}]")
    assert [(f.rule, f.evidence.get("status")) for f in got] == [("known.listed-version", "error")]
    assert "known-bad table row 1 (mine): cannot read version constraint" in got[0].title


def test_the_table_has_the_types_set_checks() -> None:
    with pytest.raises(InputError, match="expected a list"):
        load_rules(overrides=[parse_set("known-bad.extra={a: 1}")])


def test_an_rpm_manager_snapshot_through_the_rules() -> None:
    snap = with_packages("al2023", "rpm", ("containerd", "1.7.20-1.amzn2023.0.1"), ("runc", "1.1.11-1.amzn2023.0.1"),
                         ("nvidia-container-toolkit", "1.17.7-1"))
    got = {f.rule: f for f in findings(snap)}
    assert set(got) == {"known.containerd-lost-exit-events", "known.nvidia-container-toolkit-cve"}
    assert got["known.containerd-lost-exit-events"].evidence["manager"] == "rpm"
    assert got["known.nvidia-container-toolkit-cve"].title == (
        "nvidia-container-toolkit 1.17.7-1 is affected by CVE-2025-23266 (NVIDIA bulletin 5659): a container hook "
        "runs attacker code with host privileges")


def test_every_known_rule_cites_sources_and_every_table_row_has_a_rule() -> None:
    rules = load_rules()
    pack = rules.packs["known-bad"]
    assert sorted(r.id for r in rules.rules if r.pack == "known-bad") == sorted(KNOWN)
    unreported = {row["id"] for row in pack.params["table"]}
    for node in pack.raw_rules:
        if node["id"] != "known.listed-version":
            assert node["refs"] and all(str(u).startswith("https://") for u in node["refs"]), node["id"]
            glob = node["select"].rsplit("'", 2)[1]
            unreported = {i for i in unreported if not fnmatchcase(i, glob)}
    assert unreported == set()
    assert all(row["refs"] and all(u.startswith("https://") for u in row["refs"]) for row in pack.params["table"])


def _version(snap: dict[str, Any], name: str) -> str:
    return next(i["version"] for i in snap["facts"]["packages"]["items"] if i["name"] == name)


@pytest.mark.skipif(shutil.which("dpkg") is None or shutil.which("dpkg-deb") is None, reason="needs dpkg")
def test_an_image_root_is_judged_before_launch(tmp_path: Path) -> None:
    """The same dummy packages, installed by the real dpkg into an unbooted root (`dpkg --root`), scanned as
    image://: every known.* rule fires; with the fixed versions installed over them, none does."""
    root = make_root(tmp_path / "root")
    for name in ("updates", "triggers"):
        (root / "var/lib/dpkg" / name).mkdir()
    (root / "var/lib/dpkg/available").write_text("")
    debs = tmp_path / "debs"

    def install(versions: dict[str, str]) -> None:
        built = []
        for name, version in versions.items():
            script = BUILD.replace("/tmp/ami-auditor-kb", str(debs))
            subprocess.run(["sh", "-c", script, "build", name, version], check=True, capture_output=True)
            built.append(str(debs / f"{name}_{version}.deb"))
        subprocess.run(["dpkg", f"--root={root}", "--force-not-root", "--log=/dev/null", "-i", *built], check=True,
                       capture_output=True)

    def scan(out: Path) -> dict[str, Any]:
        err = io.StringIO()
        code = main(["scan", f"image://{root}", "--set", f"known-bad.extra={json.dumps(EXTRA_ROW)}", "--format",
                     "json", "--out", str(out)], Env(stdout=io.StringIO(), stderr=err))
        assert code in (0, 1), err.getvalue()
        doc = json.loads((out / "report.json").read_text())
        return {f["rule"]: f for f in doc["findings"] if f["rule"].startswith("known.")}

    install(BAD)
    found = scan(tmp_path / "bad")
    assert {rule: f["item"] for rule, f in found.items()} == EXPECTED
    runc = found["known.runc-cve-2024-21626"]
    assert runc["title"].startswith(f"runc {BAD['runc']} is affected by CVE-2024-21626")
    assert (runc["evidence"]["binary"], runc["evidence"]["path"]) == ("runc", "/usr/sbin/runc")
    install(FIXED)
    assert scan(tmp_path / "fixed") == {}
