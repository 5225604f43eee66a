"""The gate in real build tools: contrib/packer (a real `packer build`, Debian's packer, null builder with an
SSH communicator to a fleet host) and contrib/image-builder (an AWSTOE component, validated for structure)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.paths import ROOT

TEMPLATE = ROOT / "contrib/packer/ami-gate.json"
COMPONENT = ROOT / "contrib/image-builder/ami-auditor-gate.yaml"
AUDITOR = [sys.executable, "-c", "import sys; from auditor.cli import main; sys.exit(main())"]


def packer_build(fleet, name: str, tmp_path: Path) -> tuple[int, str, Path]:
    """`packer build` of the gate template against fleet host `name`; (exit status, output, report dir)."""
    packer = shutil.which("packer")
    if packer is None:
        pytest.skip("packer is not installed (Debian package `packer`; .ci/run installs it)")
    h = fleet.host(name)
    report = tmp_path / f"report-{name}"
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "CHECKPOINT_DISABLE": "1", "PACKER_NO_COLOR": "1", "HOME": str(home),
           "PACKER_CACHE_DIR": str(tmp_path / "packer_cache"), "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    variables = {"host": h.address, "port": "22", "user": "root", "private_key_file": str(fleet.identity_file),
                 "known_hosts": str(fleet.known_hosts), "labels": json.dumps(h.labels),
                 "audit_args": json.dumps(["--fail-on", "high"]), "audit_bin": json.dumps(AUDITOR),
                 "report_dir": str(report)}
    argv = [packer, "build", "-color=false"]
    for key, value in variables.items():
        argv += ["-var", f"{key}={value}"]
    done = subprocess.run([*argv, str(TEMPLATE)], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout + done.stderr, report


@pytest.mark.fleet
def test_packer_build_passes_on_an_az_a_host_and_fails_on_an_az_b_host(fleet, tmp_path: Path) -> None:
    code, out, report = packer_build(fleet, "a1", tmp_path)
    assert code == 0, out
    assert "gate: ami-auditor exited 0: pass" in out and "Build 'null' finished" in out
    assert json.loads((report / "report.json").read_text())["summary"]["exit_code"] == 0

    code, out, report = packer_build(fleet, "b1", tmp_path)
    assert code != 0, out
    assert "gate: ami-auditor exited 1: FAIL" in out and "Build 'null' errored" in out
    findings = json.loads((report / "report.json").read_text())["findings"]
    assert any(f["rule"] == "systemd.ecs-enabled-without-cluster" and f["host"] == "build-instance"
               for f in findings)
    assert (report / "report.html").is_file()


def test_packer_template_is_valid_json_with_the_null_builder_and_no_plugins(tmp_path: Path) -> None:
    doc = json.loads(TEMPLATE.read_text())
    [builder] = doc["builders"]
    assert builder["type"] == "null" and builder["communicator"] == "ssh"
    [prov] = doc["provisioners"]
    assert prov["type"] == "shell-local" and prov["inline"] == ['exec python3 "$AUDIT_GATE"']
    used = set(re.findall(r"\{\{user `(\w+)`\}\}", TEMPLATE.read_text()))
    assert used == set(doc["variables"])  # every variable declared is used, none undeclared
    if shutil.which("packer"):
        env = {**os.environ, "CHECKPOINT_DISABLE": "1"}
        key = tmp_path / "id"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        done = subprocess.run(["packer", "validate", "-var", "host=127.0.0.1", "-var", f"private_key_file={key}",
                               str(TEMPLATE)], capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


REQUIRED_PACKER_VARIABLES = ("host", "private_key_file")  # no sensible default: the build instance and its key


def test_packer_names_a_missing_required_variable(tmp_path: Path) -> None:
    """JSON templates mark a required variable with a `null` default: `packer validate` then names it, where
    an empty default let it through to a communicator error about something else."""
    doc = json.loads(TEMPLATE.read_text())
    assert {k for k, v in doc["variables"].items() if v is None} == set(REQUIRED_PACKER_VARIABLES)
    if shutil.which("packer") is None:
        pytest.skip("packer is not installed (Debian package `packer`; .ci/run installs it)")
    env = {**os.environ, "CHECKPOINT_DISABLE": "1"}
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    given = {"host": "127.0.0.1", "private_key_file": str(key)}
    for missing in REQUIRED_PACKER_VARIABLES:
        argv = [a for k, v in given.items() if k != missing for a in ("-var", f"{k}={v}")]
        done = subprocess.run(["packer", "validate", *argv, str(TEMPLATE)], capture_output=True, text=True, env=env,
                              timeout=60)
        assert done.returncode != 0
        assert f"required variable not set: {missing}" in done.stdout + done.stderr, done.stdout + done.stderr


AWSTOE_ACTIONS = {"ExecuteBash", "S3Download", "S3Upload", "CreateFile", "Reboot", "UpdateOS", "WebDownload",
                  "ExecuteBinary", "MoveFile", "CopyFile", "DeleteFile", "Assert"}


def test_image_builder_component_structure() -> None:
    """AWSTOE document rules: name, schemaVersion 1.0, phases build/validate/test, named steps with a known
    action and inputs, `{{ Param }}` only for declared string parameters; the bash steps parse."""
    doc = yaml.safe_load(COMPONENT.read_text())
    assert set(doc) == {"name", "description", "schemaVersion", "parameters", "phases"}
    assert doc["schemaVersion"] == 1.0 and re.fullmatch(r"[A-Za-z0-9-]+", doc["name"])
    params = {}
    for entry in doc["parameters"]:
        [(pname, spec)] = entry.items()
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", pname) and spec["type"] == "string" and spec["description"]
        params[pname] = spec.get("default")
    assert params["WheelS3Uri"] is None and params["FailOn"] == "high"
    assert {p["name"] for p in doc["phases"]} <= {"build", "validate", "test"}
    names = []
    for phase in doc["phases"]:
        for step in phase["steps"]:
            assert re.fullmatch(r"[A-Za-z0-9]+", step["name"]) and step["action"] in AWSTOE_ACTIONS
            assert step["inputs"]
            names.append(step["name"])
            text = json.dumps(step["inputs"])
            assert set(re.findall(r"\{\{\s*(\w+)\s*\}\}", text)) <= set(params)
            if step["action"] == "ExecuteBash":
                script = "\n".join(step["inputs"]["commands"])
                script = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: params[m.group(1)] or "s3://bucket/x", script)
                subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    assert len(names) == len(set(names)) and names[-1] == "RunGate"
