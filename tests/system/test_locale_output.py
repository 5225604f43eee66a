"""A terminal in a non-UTF-8 locale (LC_ALL=en_US.ISO-8859-1, generated here with localedef): the CLI replaces
what the terminal cannot show instead of crashing with exit 4, and the files it writes stay UTF-8."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

SNAPSHOTS = ROOT / "tests/data/snapshots"
LOCALE = "en_US.ISO-8859-1"


@pytest.fixture(scope="module")
def latin1_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a process whose locale is Latin-1 (a real locale compiled into a private LOCPATH)."""
    localedef = shutil.which("localedef")
    if localedef is None:
        pytest.skip("localedef is missing: cannot generate a Latin-1 locale")
    locales = tmp_path_factory.mktemp("locales")
    subprocess.run([localedef, "-i", "en_US", "-f", "ISO-8859-1", str(locales / LOCALE)], check=True,
                   capture_output=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_") and k not in ("LANG", "PYTHONIOENCODING")}
    env.update(LOCPATH=str(locales), LC_ALL=LOCALE, PYTHONPATH=str(ROOT), PYTHONUTF8="0")
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.stdout.encoding)"], env=env,
                           capture_output=True, text=True, check=True, timeout=60)
    assert probe.stdout.strip() == "iso8859-1", probe  # the locale really took effect
    return env


def run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", *argv], cwd=ROOT, env=env, capture_output=True,
                          timeout=300, check=False)


def shown(proc: subprocess.CompletedProcess[bytes], code: int | tuple[int, ...]) -> str:
    """The process's terminal output, after checking it exited with `code` and did not crash."""
    codes = (code,) if isinstance(code, int) else code
    assert proc.returncode in codes, proc.stderr.decode("latin-1")[-2000:]
    assert b"internal error" not in proc.stderr and b"Traceback" not in proc.stderr
    return proc.stdout.decode("latin-1") + proc.stderr.decode("latin-1")  # anything is valid Latin-1


def test_diff_text_and_markdown(latin1_env: dict[str, str]) -> None:
    golden, host = str(SNAPSHOTS / "fleet-golden.json"), str(SNAPSHOTS / "fleet-a1.json")
    assert "fleet" in shown(run(latin1_env, "diff", golden, host), (0, 1))
    text = shown(run(latin1_env, "diff", "--format", "md", golden, host), (0, 1))
    assert "\\u2192" in text  # `→` replaced, not a crash


def test_analyze_markdown_and_its_summary(latin1_env: dict[str, str], tmp_path: Path) -> None:
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    for path in SNAPSHOTS.glob("*.json"):
        shutil.copy(path, snaps)
    out = tmp_path / "out"
    text = shown(run(latin1_env, "analyze", "--format", "md", str(snaps)), 1)
    assert "\\u" in text
    shown(run(latin1_env, "analyze", "--format", "md,json", "--out", str(out), str(snaps)), 1)
    markdown = (out / "report.md").read_bytes().decode("utf-8")  # the file is UTF-8 whatever the locale
    assert any(ord(c) > 0xFF for c in markdown) and "\\u2026" not in markdown  # not replaced in files


def test_scan_summary_markdown_and_history_trend(latin1_env: dict[str, str], tmp_path: Path) -> None:
    latin1_env = {**latin1_env, "XDG_DATA_HOME": str(tmp_path / "data")}
    shown(run(latin1_env, "scan", "local", "--binary", "sh"), (0, 1, 3))
    text = shown(run(latin1_env, "scan", "local", "--binary", "sh", "--format", "md"), (0, 1, 3))
    assert "\\u" in text
    trend = shown(run(latin1_env, "history", "trend", "facts.cgroups.memory.dying"), 0)
    assert "\\u2026" in trend or "\\u2192" in trend


def test_json_on_stdout_stays_valid_json_with_the_same_strings(latin1_env: dict[str, str], tmp_path: Path) -> None:
    """What Latin-1 cannot hold is written as JSON's own `\\uXXXX` escape (a surrogate pair above U+FFFF), not
    Python's `\\U0001f600`, which no JSON parser reads."""
    name = "host-\U0001F600-\u2192"
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    snapshot = json.loads((SNAPSHOTS / "fleet-a1.json").read_text(encoding="utf-8"))
    (snaps / "a.json").write_text(json.dumps({**snapshot, "name": name}), encoding="utf-8")
    proc = run(latin1_env, "analyze", str(snaps), "--no-store", "--format", "json")
    shown(proc, 0)  # fleet-a1 (a container: no time-sync finding) has only a medium one
    doc = json.loads(proc.stdout.decode("latin-1"))
    assert [h["name"] for h in doc["hosts"]] == [name]
