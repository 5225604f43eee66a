"""The installed wheel carries the probe, the fact schema, the JSON Schemas, the rule packs and templates."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_carries_data_files(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    wheel = next(tmp_path.glob("ami_auditor-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for rule in (ROOT / "rules").glob("*.yaml"):
        assert f"auditor/builtin_rules/{rule.name}" in names
    for template in (ROOT / "reports").iterdir():
        assert f"auditor/report_templates/{template.name}" in names
    for data in ("auditor/collect/probe.sh", "auditor/collect/facts.yaml", "auditor/schemas/report.schema.json",
                 "auditor/schemas/snapshot.schema.json"):
        assert data in names
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)
