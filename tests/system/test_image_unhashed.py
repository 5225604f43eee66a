"""A key binary the image reader leaves unhashed (over HASH_CAP, unreadable) fails its row: the binaries
area is failed for that binary and the host incomplete (exit 3), never `complete: true`, exit 0.

The image reader emits one `failed=<reason>` line per failure in the binary's block (the convention the
probe shares); the parser turns it into the row's error. Real files: a 100 GB sparse kubelet (truncate),
and a kubelet this scanner cannot read — the CLI run as root without CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH (setpriv), so the file's mode really refuses the open, as it would for a non-root scan.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.collect import framing
from auditor.image.fs import ImageFS
from auditor.image.sections import HASH_CAP, ImageSections
from tests.paths import ROOT
from tests.unit.test_image_transport import make_root

HUGE = 100 * 10**9  # the 100 GB kubelet
NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all"]


def huge_kubelet(root: Path) -> None:
    with open(root / "usr/local/bin/kubelet", "r+b") as f:
        f.truncate(HUGE)  # sparse: no 100 GB written


def unreadable_kubelet(root: Path) -> None:
    kubelet = root / "usr/local/bin/kubelet"
    os.chown(kubelet, 65534, 65534)
    kubelet.chmod(0o111)  # executable, so it is the binary found; unreadable for anyone without DAC override


def body(root: Path) -> list[str]:
    with ImageFS(root) as fs:
        return ImageSections(fs, framing.new_nonce(), ["kubelet"]).binaries_body().splitlines()


def test_the_reader_says_why_an_oversized_binary_is_not_hashed(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    huge_kubelet(root)
    lines = body(root)
    assert "sha256=" in lines
    assert f"failed=sha256 not computed: {HUGE} bytes is over the {HASH_CAP}-byte hash cap" in lines


def scan(root: Path, out: Path, prefix: list[str] = []) -> tuple[subprocess.CompletedProcess[str], dict]:  # noqa: B006
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "auditor.cli", "scan", f"image://{root}", "--binary", "kubelet",
         "--fail-on", "critical", "--format", "json", "--out", str(out)],  # only the exit 3 is asked about
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return proc, report


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_the_reader_says_why_an_unreadable_binary_is_not_hashed(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    unreadable_kubelet(root)
    code = ("import sys; from pathlib import Path; from tests.system.test_image_unhashed import body; "
            "print('\\n'.join(body(Path(sys.argv[1]))))")
    proc = subprocess.run([*NO_DAC, sys.executable, "-c", code, str(root)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "failed=sha256 not computed: Permission denied" in proc.stdout.splitlines(), proc.stdout


@pytest.mark.parametrize("case", ["over the hash cap", "unreadable"])
def test_an_unhashed_key_binary_makes_the_host_incomplete(case: str, tmp_path: Path) -> None:
    """The outcome through the CLI: binaries failed (for kubelet), host incomplete, exit 3, the reason in the
    report. Needs the parser's `failed=` handling (collect/parsers/binaries.py), which lands separately."""
    if case == "unreadable" and (os.geteuid() != 0 or not shutil.which("setpriv")):
        pytest.skip("needs root and setpriv")
    root = make_root(tmp_path / "root")
    (huge_kubelet if case == "over the hash cap" else unreadable_kubelet)(root)
    proc, report = scan(root, tmp_path / "out", NO_DAC if case == "unreadable" else [])
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (host,) = report["hosts"]
    assert host["status"] == "ok" and not host["complete"] and "binaries" in host["failed_areas"], host
    reason = "over the 1073741824-byte hash cap" if case == "over the hash cap" else "Permission denied"
    assert "kubelet" in host["collector_errors"]["binaries"] and reason in host["collector_errors"]["binaries"]
