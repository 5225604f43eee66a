"""Mistakes a newcomer makes get one line that says the fix, and exit 2 (bad input) — never a silent exit 0,
a Python list, or seven errors with exit 1. Each case is the real CLI, run in-process on real files."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.context import Env
from tests.unit.test_compare_groups import FLEET, HOSTS
from tests.unit.test_image_transport import make_root

SNAPSHOT = FLEET / "a1.json"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def one_error(argv: list[str]) -> str:
    """The run is bad input, said in one line on stderr; that line is returned."""
    code, out, err = run(*argv)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ami-auditor: error: "), err
    return lines[0]


def test_an_inventory_file_given_as_a_target_points_at_dash_i(tmp_path: Path) -> None:
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text("hosts:\n  - name: h1\n    target: local\n")
    line = one_error(["scan", str(inventory), "--no-store"])
    assert f"(an inventory file? give it with -i {inventory})" in line, line


def test_a_bare_directory_suggests_its_image_target(tmp_path: Path) -> None:
    root = make_root(tmp_path / "img")
    line = one_error(["scan", str(root), "--no-store"])
    assert f"(did you mean image://{root}?)" in line, line
    code, out, err = run("collect", f"image://{root}", "-o", str(tmp_path / "snaps"))  # and that works
    assert code == 0, err
    assert "did you mean" not in one_error(["scan", str(tmp_path / "nothing-here"), "--no-store"])


def test_the_target_help_names_ami_targets(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["scan", "--help"], Env(stdout=io.StringIO(), stderr=io.StringIO()))
    text = " ".join(capsys.readouterr().out.split())  # argparse prints help to the process's stdout
    assert "image:///path, ami://ami-…[?region=…]" in text, text


def snapshots(tmp_path: Path) -> Path:
    folder = tmp_path / "snaps"
    folder.mkdir()
    for host in HOSTS:
        shutil.copy(FLEET / f"{host}.json", folder / f"{host}.json")
    return folder


@pytest.mark.parametrize(("argv", "where"), [
    (["--group-by", "facts.kernel.relase"], "--group-by: "),
    (["--symptom", "facts.systemd.units[ecs.service].restart=3"], "--symptom: "),
])
def test_an_unknown_fact_path_gets_did_you_mean_and_how_to_list_them(tmp_path: Path, argv: list[str],
                                                                    where: str) -> None:
    line = one_error(["analyze", str(snapshots(tmp_path)), "--no-store", *argv])
    assert where + "unknown fact path" in line, line
    meant = "facts.kernel.release" if "relase" in argv[1] else "facts.systemd.units[ecs.service].restarts"
    assert f"(did you mean {meant}" in line and "`ami-auditor rules facts [PREFIX]`" in line, line
    code, out, err = run("rules", "facts", meant.split("[")[0].rsplit(".", 1)[0])
    assert code == 0 and any(ln.split()[0] == meant.replace("[ecs.service]", "[]") for ln in out.splitlines()), out


def test_a_baseline_with_an_unknown_fact_path_says_the_same(tmp_path: Path) -> None:
    baseline = tmp_path / "b.yaml"
    baseline.write_text("baseline: ami-auditor/baseline/1\nexpect:\n  facts.kernel.relase: '6.1'\n")
    line = one_error(["diff", str(baseline), str(SNAPSHOT)])
    assert "unknown fact path 'facts.kernel.relase' (did you mean facts.kernel.release" in line, line


def test_rules_facts_lists_paths_and_a_bad_prefix_is_said(tmp_path: Path) -> None:
    code, out, _ = run("rules", "facts", "facts.cgroups.memory")
    paths = [ln.split()[0] for ln in out.splitlines()[:-1]]
    assert code == 0 and "facts.cgroups.memory.dying" in paths and all(p.startswith("facts.cgroups.memory")
                                                                       for p in paths)
    assert out.splitlines()[-1] == f"{len(paths)} fact paths under facts.cgroups.memory"
    code, out, _ = run("rules", "facts", "--json")
    assert code == 0 and {"path": "facts.kernel.release", "type": "string", "volatile": False} .items() <= \
        next(r for r in json.loads(out) if r["path"] == "facts.kernel.release").items()
    line = one_error(["rules", "facts", "facts.cgrups.memory"])
    assert "no fact path starts with 'facts.cgrups.memory'" in line and "did you mean facts.cgroups.memory" in line


def store_with_scans(tmp_path: Path) -> Path:
    store = tmp_path / "h.sqlite3"
    code, _, err = run("analyze", str(snapshots(tmp_path)), "--store", str(store), "-q")
    assert code in (0, 1), err
    return store


@pytest.mark.parametrize(("fact", "kind"), [("facts.kernel.release", "a string"),
                                            ("facts.systemd.enabled_units", "a list"), ("facts.os", "an object")])
def test_history_trend_of_a_fact_that_is_no_number_says_so_in_one_line(tmp_path: Path, fact: str,
                                                                       kind: str) -> None:
    store = store_with_scans(tmp_path)
    line = one_error(["history", "trend", fact, "--store", str(store)])
    assert f"{fact} is {kind}, not a number: history trend charts numbers" in line, line
    code, out, err = run("history", "trend", "facts.cgroups.memory.dying", "--store", str(store))
    assert code == 0 and "min " in out, out + err  # a number still charts


def test_release_notes_markdown_code_spans_are_not_escaped(tmp_path: Path) -> None:
    import cmarkgfm

    a, b = make_root(tmp_path / "a"), make_root(tmp_path / "b")
    code, md, _ = run("diff", "--format", "md", f"image://{a}", f"image://{b}")
    title = md.splitlines()[0]
    assert title == f"# Release notes: `image://{a}` → `image://{b}`", title
    html = cmarkgfm.github_flavored_markdown_to_html(title)  # what GitHub shows
    assert f"<code>image://{a}</code>" in html and "\\" not in html, html


def test_the_same_directory_twice_names_the_duplicate_files(tmp_path: Path) -> None:
    folder = snapshots(tmp_path)
    line = one_error(["analyze", str(folder), str(folder) + "/", "--no-store"])
    assert f"{len(HOSTS)} snapshot files given twice" in line and f"{folder}/a1.json" in line, line
    assert "give each DIR once" in line


@pytest.mark.parametrize("option", ["--baseline", "diff"])
def test_a_report_where_a_baseline_is_expected_says_it_is_a_report(tmp_path: Path, option: str) -> None:
    folder = snapshots(tmp_path)
    code, _, err = run("analyze", str(folder), "--no-store", "--format", "json", "--out", str(tmp_path / "r"), "-q")
    assert code in (0, 1), err
    report = tmp_path / "r" / "report.json"
    argv = (["analyze", str(folder), "--no-store", "--baseline", str(report)] if option == "--baseline"
            else ["diff", str(report), str(SNAPSHOT)])
    line = one_error(argv)
    assert "this is a report" in line and ("not a baseline" in line or "not a snapshot" in line), line
    line = one_error(["analyze", str(folder), "--no-store", "--baseline", str(SNAPSHOT)])
    assert "this is a snapshot (ami-auditor/snapshot/1), not a baseline" in line, line


def test_history_import_of_a_folder_without_scans_is_bad_input_and_makes_no_store(tmp_path: Path) -> None:
    folder = snapshots(tmp_path)
    code, _, err = run("analyze", str(folder), "--no-store", "--format", "json", "--out", str(tmp_path / "r"), "-q")
    assert code in (0, 1), err
    store = tmp_path / "new.sqlite3"
    line = one_error(["history", "import", str(tmp_path / "r"), "--store", str(store)])
    assert "nothing to import: no scan-*.json scans here" in line and "it holds report.json" in line, line
    assert not store.exists()
    (tmp_path / "empty").mkdir()
    assert "nothing to import" in one_error(["history", "import", str(tmp_path / "empty"), "--store", str(store)])
    assert not store.exists() and sqlite3.sqlite_version  # nothing was made for nothing
