"""The one run driver (auditor/run/driver.py) gives one answer whatever the host source: the same snapshots
through `scan` (live hosts), `analyze` (files, 1 and 2 workers), `rules check --snapshot` (held snapshots)
and `diff` (each host against the baseline, a live side against its file) agree on findings, drift and exit
codes.

Hosts are reached through tests/unit/test_one_core.py's replay transport (recorded real probe output re-framed
with each run's nonce): the one part not under test here; collect, parse, judge, compare, render and the
driver are the real code."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from auditor import transport
from auditor.cli import main
from auditor.context import Env
from auditor.evaluate import files
from auditor.models import HostSpec
from auditor.run import live_hosts
from tests.unit.test_one_core import HOSTS, _report, _rows, _sections, replayed  # noqa: F401 - the fixture

COMPARE = ("--group-by", "az", "--format", "json", "--no-store")


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    assert code in (0, 1, 3), err.getvalue()
    return code, out.getvalue(), err.getvalue()


def _diff_rows(text: str) -> set[tuple[str, str]]:
    """(kind, path) of every difference `diff --json` printed."""
    return {(d["kind"], d["path"]) for d in json.loads(text)}


@pytest.fixture
def snaps(replayed: Path, tmp_path: Path) -> Path:  # noqa: F811
    out = tmp_path / "snaps"
    code, _, err = _run("collect", "-i", str(replayed), "-o", str(out))
    assert code == 0 and len(list(out.glob("*.json"))) == HOSTS, err
    return out


def test_scan_analyze_rules_check_and_diff_agree(replayed: Path, snaps: Path, tmp_path: Path,  # noqa: F811
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    baseline = tmp_path / "golden.yaml"
    _run("baseline", "capture", "--snapshot", str(snaps / "h00.json"), "-o", str(baseline))
    compare = ("--baseline", str(baseline), *COMPARE)
    scan_code, _, _ = _run("scan", "-i", str(replayed), *compare, "--out", str(tmp_path / "scan"))
    scan = _report(tmp_path / "scan")
    assert scan_code == scan["summary"]["exit_code"] == 1, "the recorded crash loop fails at --fail-on high"
    monkeypatch.setattr(files, "BATCH", 5)  # two workers over three batches: merged batches out of order
    for jobs in (1, 2):
        code, _, _ = _run("analyze", str(snaps), "--jobs", str(jobs), *compare, "--out", str(tmp_path / f"a{jobs}"))
        doc = _report(tmp_path / f"a{jobs}")
        assert code == scan_code and doc["summary"]["exit_code"] == scan_code, f"analyze --jobs {jobs}"
        assert _sections(doc) == _sections(scan), f"analyze --jobs {jobs}"
    code, checked, _ = _run("rules", "check", "rules",
                            *[a for i in range(HOSTS) for a in ("--snapshot", str(snaps / f"h{i:02d}.json"))])
    assert code == 0  # `rules check` judges the rules files; the findings are printed
    assert _rows(checked) == {(f["severity"].upper(), f["host"], f["rule"], f["item"] or "")
                              for f in scan["findings"]}
    drift: dict[str, set[tuple[str, str]]] = {}
    for row in scan["drift"]:
        drift.setdefault(row["host"], set()).add((row["kind"], row["path"]))
    assert drift and "h00" not in drift, "the baseline was captured from h00"
    for i in range(HOSTS):
        name = f"h{i:02d}"
        code, text, _ = _run("diff", str(baseline), str(snaps / f"{name}.json"), "--json")
        assert _diff_rows(text) == drift.get(name, set()), name
        assert code == (1 if name in drift else 0), name


def test_a_live_side_and_its_saved_snapshot_do_not_differ(replayed: Path, snaps: Path) -> None:  # noqa: F811
    """`diff` collects a live side as `scan` does: the host now (re-framed, a new nonce and time) against its
    own saved snapshot differs in nothing; against another OS's, it differs (exit 1)."""
    code, text, err = _run("diff", "-i", str(replayed), "h00", str(snaps / "h00.json"), "--json")
    assert (code, json.loads(text)) == (0, []), err
    code, text, _ = _run("diff", "-i", str(replayed), "h00", str(snaps / "h01.json"), "--json")
    assert code == 1 and json.loads(text)


def test_an_unread_host_is_incomplete_on_every_source(replayed: Path, snaps: Path, tmp_path: Path,  # noqa: F811
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """One host that cannot be had: scan (it is not reached), analyze (its file is not a snapshot) and diff
    (a live side not reached) all end incomplete, exit 3, when no finding fails the run."""
    replay = live_hosts.open_transport

    def open_transport(spec: HostSpec) -> Any:  # `gone` is really dialled: a closed loopback port
        return transport.open_transport(spec) if spec.name == "gone" else replay(spec)

    monkeypatch.setattr(live_hosts, "open_transport", open_transport)
    inventory: dict[str, Any] = {"hosts": [{"name": "h00", "target": "local", "labels": {"os": "al2"}},
                                           {"name": "gone", "target": "ssh://root@127.0.0.1:9", "labels": {}}]}
    inv = tmp_path / "one.yaml"
    inv.write_text(json.dumps(inventory))
    quiet = ("--no-builtin-rules", "--format", "json", "--no-store", "--deadline", "5")  # no finding fails
    code, _, _ = _run("scan", "-i", str(inv), *quiet, "--out", str(tmp_path / "scan"))
    scan = _report(tmp_path / "scan")
    assert [h["status"] for h in scan["hosts"]] == ["ok", "unreachable"]
    assert not scan["findings"]
    assert code == 3
    d = tmp_path / "one"
    d.mkdir()
    (d / "h00.json").write_text((snaps / "h00.json").read_text())
    (d / "gone.json").write_text("{not json")
    code, _, _ = _run("analyze", str(d), *quiet[:-2], "--out", str(tmp_path / "an"))
    assert [h["status"] for h in _report(tmp_path / "an")["hosts"]] == ["error", "ok"]
    assert code == 3
    code, _, err = _run("diff", "-i", str(inv), "gone", str(snaps / "h00.json"), "--deadline", "5")
    assert code == 3 and "gone: unreachable" in err
