"""Hostile images against the clock: every image reader path ends at `--deadline`, through the real CLI.

Each image is a real directory tree built to make one reader path slow (a quadratic pattern, a
preset file of tens of thousands of globs, thousands of hard links to one 1 MB unit file or file list,
a huge dpkg database). The scan must return within the deadline plus a margin for start-up; an area
the reader could not finish is a failed area named in the report (exit 3), and what is linear now
(the URL and secret patterns, the preset lookup) finishes well inside the deadline with its facts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.paths import ROOT
from tests.unit.test_image_transport import make_root

DEADLINE_S = 3
MARGIN_S = 4.0  # interpreter start-up and imports (~1 s) on a shared, loaded machine


def scan(root: Path, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], float, dict]:
    """`ami-auditor scan image://ROOT --deadline 3` in a child process; (process, wall seconds, report).

    `--fail-on critical`: the small image's high findings would otherwise win over exit 3 (exitcodes.py)."""
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "auditor.cli", "scan", f"image://{root}", "--deadline", str(DEADLINE_S),
             "--binary", "kubelet", "--fail-on", "critical", "--format", "json", "--out", str(out), *extra],
            cwd=ROOT, capture_output=True, text=True, timeout=DEADLINE_S + MARGIN_S + 10, check=False)
    except subprocess.TimeoutExpired:  # killed by subprocess.run
        pytest.fail(f"scan still running {DEADLINE_S + MARGIN_S + 10} s after it started (--deadline {DEADLINE_S})")
    wall = time.monotonic() - started
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return proc, wall, report


def hard_links(source: Path, directory: Path, names: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        os.link(source, directory / name)


def many_globs(root: Path) -> None:
    """200,000 preset globs that all need matching (no literal prefix or suffix rules them out)."""
    presets = root / "usr/lib/systemd/system-preset"
    presets.mkdir(parents=True)
    for f in range(5):
        (presets / f"{f}0-x.preset").write_text("".join(f"disable *{f}x{i}?.service\n" for i in range(40_000)))


def big_unit_files(root: Path) -> None:
    """3,000 unit files, each a hard link to one 1 MB unit whose [Install] section names 55,000 targets."""
    one = root / "big.service"
    one.write_text("[Install]\n" + "WantedBy=a.target\n" * 55_000)
    hard_links(one, root / "usr/lib/systemd/system", [f"u{i}.service" for i in range(3000)])


def big_file_lists(root: Path) -> None:
    """3,000 dpkg file lists, each a hard link to one 8 MB list (24 GB to read)."""
    one = root / "big.list"
    one.write_text("".join(f"/usr/share/doc/pkg/file{i}\n" for i in range(300_000)))
    hard_links(one, root / "var/lib/dpkg/info", [f"p{i}.list" for i in range(3000)])


def big_status(root: Path) -> None:
    """A 100 MB dpkg status database: one package whose paragraph has 25 million fields."""
    with open(root / "var/lib/dpkg/status", "wb") as f:
        f.write(b"Package: p\nStatus: install ok installed\nVersion: 1\n" + b"a:b\n" * 25_000_000)


def quadratic_url_line(root: Path) -> None:
    """The issue's case: a 400 KB line of repeated `s3://` that names the binary (quadratic with backtracking)."""
    with open(root / "var/log/cloud-init-output.log", "a") as f:
        f.write("s3://" * 80_000 + " kubelet\n")


def quadratic_secret_line(root: Path) -> None:
    """A 1 MB profile.d line of repeated SECRET without `=` (quadratic for the secret-variable pattern)."""
    (root / "etc/profile.d").mkdir(parents=True)
    (root / "etc/profile.d/x.sh").write_text("SECRET" * 170_000 + "\n")


def issue_presets(root: Path) -> None:
    """The issue's case: 60,000 preset glob lines and a few dozen unit files (116 s with --deadline 5). In
    two files, each under the reader's 1 MiB cap: a cut preset file is a named failure of its own."""
    presets = root / "usr/lib/systemd/system-preset"
    presets.mkdir(parents=True)
    for half in range(2):
        (presets / f"9{half}-x.preset").write_text("".join(f"disable foo{i}*[a-z]?.service\n"
                                                         for i in range(half * 30_000, (half + 1) * 30_000)))
    (presets / "99-y.preset").write_text("disable u7.service\n")
    for i in range(40):
        (root / f"usr/lib/systemd/system/u{i}.service").write_text("[Install]\nWantedBy=multi-user.target\n")


# builder, the area the deadline cuts (None: the reader is linear now and finishes with its facts)
CASES: dict[str, tuple[Callable[[Path], None], str | None]] = {
    "preset-globs": (many_globs, "systemd"),
    "unit-files": (big_unit_files, "systemd"),
    "dpkg-file-lists": (big_file_lists, "binaries"),
    "dpkg-status": (big_status, "packages"),
    "url-line": (quadratic_url_line, None),
    "secret-line": (quadratic_secret_line, None),
    "issue-presets": (issue_presets, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_image_reader_path_ends_at_the_deadline(case: str, tmp_path: Path) -> None:
    build, cut = CASES[case]
    root = make_root(tmp_path / "root")
    build(root)
    proc, wall, report = scan(root, tmp_path / "out")
    assert wall < DEADLINE_S + MARGIN_S, f"{case}: {wall:.1f} s with --deadline {DEADLINE_S}"
    (host,) = report["hosts"]
    assert host["status"] == "ok", host  # what was read before the deadline is kept
    if cut is None:
        assert proc.returncode == 0, proc.stderr
        assert host["complete"] and not host["failed_areas"], host
    else:
        assert proc.returncode == 3, proc.stderr
        assert cut in host["failed_areas"], host
        assert "timed out" in host["collector_errors"][cut], host
        assert "os" not in host["failed_areas"]  # areas read before the deadline keep their facts


def test_linear_patterns_find_what_they_found_before(tmp_path: Path) -> None:
    """The URL search (grep -ohE semantics: leftmost-longest, at most 5 per file) and the preset lookup
    give the same answers on ordinary input after the hostile line."""
    root = make_root(tmp_path / "root")
    issue_presets(root)
    quadratic_url_line(root)
    with open(root / "var/log/cloud-init-output.log", "a") as f:
        f.write("x https://a.example/b/kubelet.sha256 s3://bucket/kubelet\"http://c.example/kubelet\n")
    quadratic_secret_line(root)
    (root / "etc/profile.d/y.sh").write_text("export MY_API_KEY=abc\n")
    from auditor.models import HostSpec
    from auditor.run.live_hosts import collect_host

    result = collect_host(HostSpec("img", f"image://{root}"), binaries=["kubelet"], deadline_s=30)
    assert result.snapshot is not None, result.error
    facts = result.snapshot["facts"]
    (kubelet,) = facts["binaries"]
    urls = [e["url"] for e in kubelet["evidence"]]
    assert urls == ["https://dl.k8s.io/release/v1.29.3/bin/linux/amd64/kubelet", "https://a.example/b/kubelet.sha256",
                    "s3://bucket/kubelet", "http://c.example/kubelet"], urls
    presets = {u["name"]: u["preset"] for u in facts["systemd"]["unit_files"]}
    assert presets["u7.service"] == "disabled" and presets["u8.service"] == "enabled", presets
    assert "/etc/profile.d/y.sh" in json.dumps(facts["hygiene"]["credential_files"])


def test_preset_index_picks_the_rule_a_linear_fnmatch_scan_picks() -> None:
    """The indexed lookup (exact names, literal prefix/suffix, compiled once) against systemd's rule: the
    first rule whose glob matches the unit, or whose template lists the instance, wins; no rule: enabled."""
    import fnmatch
    import random

    from auditor.image.units import _Presets, _template

    def linear(rules: list[tuple[str, str, list[str]]], name: str) -> str:
        template = _template(name)
        for verb, pattern, instances in rules:
            hit = fnmatch.fnmatchcase(name, pattern) or bool(
                template and instances and pattern == template
                and name[name.find("@") + 1: name.rfind(".")] in instances)
            if hit:
                return {"enable": "enabled", "disable": "disabled"}.get(verb, "ignored")
        return "enabled"

    rng = random.Random(19)
    for _ in range(5000):
        rules = [(rng.choice(["enable", "disable", "ignore"]), "".join(rng.choices("ab@.*?[]!s", k=rng.randint(1, 8))),
                  rng.choice([[], ["x"], ["a", "b"]])) for _ in range(rng.randint(1, 5))]
        presets = _Presets(rules, lambda: None)
        for name in ["a.service", "ab@.service", "ab@x.service", "b]a.service", "[a].service", "ab@a.s",
                     "".join(rng.choices("ab@.s]", k=rng.randint(1, 7)))]:
            assert presets.state(name) == linear(rules, name), (rules, name)
