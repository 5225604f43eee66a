"""Same input, same output, across processes: judge, drift, AZ comparison, symptom ranking, baseline
capture and every renderer, run in two interpreters with different string-hash seeds (set and dict
orders of str keys differ between them, so any output that leans on them differs too)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT
from tests.unit.test_compare_stage import capture_golden

PIPELINE = r"""
import io, json, sys
from pathlib import Path
from auditor.cli import main
from auditor.context import Env
from auditor.reportdoc import report_to_dict
from auditor.render import RENDERERS
from tests.unit.test_compare_stage import FLEET, run

golden = Path(sys.argv[1])  # captured once by the parent: its header records the capture time
doc = report_to_dict(run("--baseline", str(golden), "--group-by", "az", "--symptom",
                         "systemd.unit-crash-looping", "--top", "10"))
out = {"baseline": golden.read_text(encoding="utf-8"), "report": doc}
for fmt, (render, *_rest) in sorted(RENDERERS.items()):
    out[fmt] = render(doc)
diff = io.StringIO()
main(["diff", str(FLEET / "a2.json"), str(FLEET / "b3.json")], Env(stdout=diff, stderr=io.StringIO()))
out["diff"] = diff.getvalue()
check = io.StringIO()
main(["rules", "check", str(Path("rules")), "--snapshot", str(FLEET / "b1.json")],
     Env(stdout=check, stderr=io.StringIO()))
out["rules_check"] = check.getvalue()
json.dump(out, sys.stdout, sort_keys=True)
"""


def run_with_seed(seed: str, golden: Path) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    proc = subprocess.run([sys.executable, "-c", PIPELINE, str(golden)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_two_processes_with_different_hash_seeds_give_byte_identical_results(tmp_path: Path) -> None:
    golden = capture_golden(tmp_path)
    first, second = run_with_seed("1", golden), run_with_seed("4242", golden)
    assert '"findings"' in first and "systemd.unit-crash-looping" in first  # the pipeline really ran
    assert hashlib.sha256(first.encode()).hexdigest() == hashlib.sha256(second.encode()).hexdigest(), (
        "output depends on the hash seed: " + next(
            (f"first difference at char {i}: {first[max(0, i - 80):i + 80]!r} vs {second[max(0, i - 80):i + 80]!r}"
             for i, (a, b) in enumerate(zip(first, second)) if a != b), "lengths differ"))
