"""Run an AWSTOE component document's steps as AWSTOE does, on a fleet host (no AWSTOE binary runs here).

What is AWSTOE's behaviour (its action-module documentation): `{{ Name }}` is replaced by the parameter's
value (its default when not given; a parameter without a default must be given); phases run in document
order, steps in order, and the first failing step fails the phase and stops the run (onFailure: Abort);
S3Download fetches each `source` object to its `destination` file; ExecuteBash writes its commands, one a
line, into a script file and runs it with bash as root, the script's exit status being the step's.
The S3 object comes from a real S3 endpoint (moto's server on loopback) through boto3.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PARAM = re.compile(r"\{\{\s*(\w+)\s*\}\}")


@dataclass(frozen=True)
class StepResult:
    phase: str
    name: str
    action: str
    exit_code: int
    output: str


def parameters(doc: Mapping[str, Any], given: Mapping[str, str]) -> dict[str, str]:
    """The document's parameter values: given ones, else defaults; a missing required one is an error."""
    values: dict[str, str] = {}
    for entry in doc.get("parameters") or []:
        [(name, spec)] = entry.items()
        if name in given:
            values[name] = given[name]
        elif "default" in spec:
            values[name] = str(spec["default"])
        else:
            raise ValueError(f"parameter {name} has no default and was not given")
    unknown = set(given) - set(values)
    if unknown:
        raise ValueError(f"parameters not declared by the document: {sorted(unknown)}")
    return values


def _substitute(value: Any, params: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return PARAM.sub(lambda m: params[m.group(1)], value)
    if isinstance(value, list):
        return [_substitute(v, params) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, params) for k, v in value.items()}
    return value


def run_component(path: Path, given: Mapping[str, str], root: Path, s3: Any,
                  bash: Callable[[str], subprocess.CompletedProcess[str]]) -> list[StepResult]:
    """Run every phase of the component at `path` on the host whose root filesystem is `root`.

    `s3`: a boto3 S3 client; `bash(script_path)` runs bash on that script inside the host as root.
    Returns the steps that ran, the failed one last."""
    doc = yaml.safe_load(path.read_text())
    params = parameters(doc, given)
    results: list[StepResult] = []
    for phase in doc["phases"]:
        for step in phase["steps"]:
            inputs = _substitute(step["inputs"], params)
            if step["action"] == "S3Download":
                code, output = _s3_download(inputs, root, s3)
            elif step["action"] == "ExecuteBash":
                script = f"/var/tmp/awstoe/{phase['name']}/{step['name']}/input.sh"
                (root / script.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
                (root / script.lstrip("/")).write_text("\n".join(inputs["commands"]) + "\n")
                done = bash(script)
                code, output = done.returncode, done.stdout + done.stderr
            else:
                raise NotImplementedError(f"action {step['action']} is not emulated")
            results.append(StepResult(phase["name"], step["name"], step["action"], code, output))
            if code != 0:
                return results
    return results


def _s3_download(inputs: list[dict[str, str]], root: Path, s3: Any) -> tuple[int, str]:
    for item in inputs:
        match = re.fullmatch(r"s3://([^/]+)/(.+)", item["source"])
        if not match:
            return 1, f"S3Download: not an s3:// object URI: {item['source']}"
        dest = root / item["destination"].lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(match[1], match[2], str(dest))
    return 0, ""
