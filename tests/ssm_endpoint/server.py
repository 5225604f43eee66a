"""A local HTTP endpoint that speaks the SSM JSON protocol. It STANDS IN FOR AWS Systems Manager.

moto accepts SendCommand but runs nothing and implements neither ListCommandInvocations nor
DescribeInstanceInformation (FIELD-NOTES §8), so tests talk real HTTP (boto3, botocore's JSON protocol,
`X-Amz-Target: AmazonSSM.<Operation>`) to this server instead. It really runs the command's script —
on a test-fleet host (through `Fleet.exec`, as the SSM agent would run it as root on the instance) or
locally with /bin/sh — and enforces SSM's documented limits:
- SendCommand: ≤ 50 InstanceIds (ValidationException), or `Targets` (≤ 5 keys, ≤ 50 values each;
  `tag:KEY` resolved against the instance's registry tags, else its EC2 tags on the moto server;
  `InstanceIds`; `tag-key`) — never both; MaxConcurrency (never more invocations running at once;
  queued ones still bound by TimeoutSeconds → Delivery Timed Out) and MaxErrors (Failed and Execution
  Timed Out count, Undeliverable / Delivery Timed Out do not; once errors exceed it no further
  invocation is sent: they end Failed/"Terminated", as the API reference defines that detail);
  TimeoutSeconds 30…2592000, parameters checked
  against the document (`allowedPattern`, unknown names → InvalidParameters), unmanaged ids →
  InvalidInstanceId; `ENV_VAR` parameters exported as `SSM_<name>`, `{{ name }}` substituted;
- GetCommandInvocation: InvocationDoesNotExist for a window right after SendCommand; output empty
  until terminal; StandardOutputContent cut at 24,000 characters, StandardErrorContent at 8,000;
  full output uploaded to S3 (the moto server) when OutputS3BucketName is given;
- ListCommandInvocations: MaxResults ≤ 50 with NextToken; invocations not yet visible are left out;
  `Details=True` adds CommandPlugins (Output = stdout, the agent's ERROR mark and stderr, cut at 2,500
  characters; ResponseCode, start/finish times, StandardOutputUrl);
- ListCommands (by CommandId): Status terminal once every invocation is, TargetCount, counts;
- statuses per instance on demand: Undeliverable, delivery TimedOut, execution TimedOut (the script
  is really killed at executionTimeout), Terminated, Failed (a non-zero exit);
- PutComplianceItems: the request shapes and limits of the API reference (ResourceType ManagedInstance,
  ComplianceType `[A-Za-z0-9_-]\\w+` or `Custom:…` ≤ 100, ExecutionSummary.ExecutionTime required,
  ExecutionId ≤ 100, ≤ 10,000 Items with Severity/Status enums, Title ≤ 500, Details keys 1…64 and
  values ≤ 4,096, ItemContentHash ≤ 256: a repeat of the stored hash is ignored); only managed instances
  (InvalidResourceId); COMPLETE replaces the type's items, PARTIAL merges by Id;
  ListComplianceItems (ResourceIds, ResourceTypes, Filters, MaxResults ≤ 50 with NextToken) and
  ListComplianceSummaries (per ComplianceType: compliant / non-compliant resources by severity);
- ThrottlingException on demand; every call counted per operation.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STDOUT_CAP = 24_000
STDERR_CAP = 8_000
PLUGIN_OUTPUT_CAP = 2_500  # ListCommandInvocations(Details=True) CommandPlugins[].Output
PLUGIN_ERROR_MARK = "\n----------ERROR-------\n"
MAX_IDS = 50
MAX_TARGET_KEYS = 5
_RATE = re.compile(r"^([1-9][0-9]*|0|[1-9][0-9]?%|100%|0%)$")
TERMINAL = {"Success", "Failed", "TimedOut", "Cancelled"}
_REF = re.compile(r"\{\{\s*([A-Za-z0-9_.:-]+)\s*\}\}")

# Runner: (script, env, timeout_s) -> (stdout, stderr, exit status); raises subprocess.TimeoutExpired.
Runner = Callable[[str, dict[str, str], float], tuple[str, str, int]]

RUN_SHELL_SCRIPT = {
    "schemaVersion": "2.2",
    "description": "Run a shell script (stand-in for the AWS-owned document).",
    "parameters": {
        "commands": {"type": "StringList"},
        "workingDirectory": {"type": "String", "default": ""},
        "executionTimeout": {"type": "String", "default": "3600", "allowedPattern": r"^[0-9]{1,6}$"},
    },
    "mainSteps": [{"action": "aws:runShellScript", "name": "runShellScript",
                   "inputs": {"timeoutSeconds": "{{ executionTimeout }}", "runCommand": "{{ commands }}"}}],
}


def local_runner(shell: str = "/bin/sh") -> Runner:
    """Run the script on this machine, as the agent does: written to a file, run with sh."""

    def run(script: str, env: dict[str, str], timeout: float) -> tuple[str, str, int]:
        with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="ssm-endpoint-") as f:
            f.write(script)
            f.flush()
            proc = subprocess.run([shell, f.name], capture_output=True, text=True, timeout=timeout,
                                  env={**os.environ, **env}, errors="replace")
        return proc.stdout, proc.stderr, proc.returncode

    return run


def fleet_runner(fleet: Any, name: str) -> Runner:
    """Run the script inside test-fleet host `name` (its namespaces, as root), like the SSM agent."""

    def run(script: str, env: dict[str, str], timeout: float) -> tuple[str, str, int]:
        argv = ["env", *(f"{k}={v}" for k, v in env.items()), "/bin/sh", "-c", script]
        proc = fleet.exec(name, argv, timeout=timeout)
        return proc.stdout, proc.stderr, proc.returncode

    return run


_SCRIPT_NONCE = re.compile(r"^SSM_nonce='?([0-9a-f]{32})'?$", re.M)


def _with_command_nonce(stdout: str, script: str, env: dict[str, str]) -> str:
    """A recorded document output re-framed with the nonce this command carries (SSM_nonce, or set inline
    in AWS-RunShellScript mode), as a probe run for this command would have printed it."""
    import base64
    import gzip

    from auditor.collect import framing
    from auditor.transport.ssm_document import FOOTER, HEADER, decode_output
    from tests.framing_fixtures import renonce

    m = _SCRIPT_NONCE.search(script)
    nonce = env.get("SSM_nonce") or (m.group(1) if m else None)
    decoded = decode_output(stdout)
    recorded = next((framing.START_RE.match(line) for line in decoded.stdout.split("\n")
                     if framing.START_RE.match(line)), None)
    if not nonce or not decoded.framed or decoded.truncated or recorded is None:
        return stdout
    raw = renonce(decoded.stdout, recorded.group("nonce"), nonce) + f"@@AMI-AUDITOR-EXIT {decoded.exit_status}@@\n"
    payload = base64.b64encode(gzip.compress(raw.encode(), mtime=0)).decode()
    return f"{HEADER} gzip-base64\n{payload}\n{FOOTER}\n"


def canned_runner(stdout: str, stderr: str = "", status: int = 0) -> Runner:
    """Answer with a recorded output without running anything (benchmarks of the client side).

    A recorded ami-auditor document output is re-framed with each command's own nonce."""
    return lambda script, env, timeout: (_with_command_nonce(stdout, script, env), stderr, status)


@dataclass
class Instance:
    """A managed instance: how its script runs and how SSM treats it."""

    instance_id: str
    runner: Runner
    ping: str = "Online"
    behaviour: str = "run"  # run | undeliverable | offline (delivery times out) | terminated
    delay_s: float = 0.0  # time the script takes before it really runs (counts against executionTimeout)
    tags: dict[str, str] | None = None  # tags SSM resolves Targets against; None: the EC2 (moto) tags
    s3_write: bool = True  # False: the agent's S3 upload fails (no s3:PutObject), output only in SSM


@dataclass
class Invocation:
    command_id: str
    instance_id: str
    document: str
    visible_at: float
    status: str = "Pending"
    details: str = "Pending"
    response_code: int = -1
    stdout: str = ""
    stderr: str = ""
    stdout_url: str = ""
    started: float = 0.0
    ended: float = 0.0
    not_yet_gets: int = 0
    step: str = ""
    s3_bucket: str = ""
    s3_prefix: str = ""


@dataclass
class Command:
    """A sent command's rate controls and the state its dispatcher keeps."""

    command_id: str
    ids: list[str]
    max_concurrency: int
    max_errors: int
    delivery_timeout: int
    sent_at: float
    request: dict[str, Any]
    running: int = 0
    peak: int = 0
    errors: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)


def rate(value: str, total: int, default: str, at_least: int) -> int:
    """MaxConcurrency / MaxErrors (`N` or `N%` of the targets) as a count."""
    value = value or default
    if not _RATE.match(value):
        raise ApiError("ValidationException", f"'{value}' failed to satisfy the rate-control pattern")
    n = total * int(value[:-1]) // 100 if value.endswith("%") else int(value)
    return max(at_least, n)


class ApiError(Exception):
    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


@dataclass
class SSMEndpoint:
    """The stand-in for AWS SSM. `start()` returns its URL (for AWS_ENDPOINT_URL_SSM)."""

    region: str = "us-east-1"
    s3: Any = None  # a boto3 S3 client (the moto server) for OutputS3BucketName uploads
    ec2: Any = None  # a boto3 EC2 client (the moto server): instance tags for tag Targets
    visibility_lag_s: float = 0.3  # InvocationDoesNotExist window after SendCommand
    not_yet_gets: int = 0  # extra InvocationDoesNotExist answers per invocation (eventual consistency)
    workers: int = 8
    s3_direct: bool = False  # write outputs into the in-process moto server's S3 backend (benchmarks at scale)
    instances: dict[str, Instance] = field(default_factory=dict)
    documents: dict[str, list[str]] = field(default_factory=dict)  # name -> versions' content
    default_version: dict[str, int] = field(default_factory=dict)
    invocations: dict[tuple[str, str], Invocation] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)
    command_info: dict[str, Command] = field(default_factory=dict)
    executed: Counter = field(default_factory=Counter)  # instance id → scripts really started
    calls: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    sent_commands: list[dict[str, Any]] = field(default_factory=list)
    throttles: Counter = field(default_factory=Counter)
    compliance: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (resource, type) → state

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = False
        self._pool = ThreadPoolExecutor(max_workers=self.workers)
        self._server: ThreadingHTTPServer | None = None

    # -- test controls --------------------------------------------------------------------------

    def add_instance(self, instance_id: str, runner: Runner, **kw: Any) -> Instance:
        inst = Instance(instance_id, runner, **kw)
        self.instances[instance_id] = inst
        return inst

    def throttle(self, operation: str, times: int) -> None:
        """The next `times` calls of `operation` fail with ThrottlingException."""
        self.throttles[operation] += times

    def start(self) -> str:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, doc = endpoint.handle(self.headers.get("X-Amz-Target", ""), body)
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._stopped = True
        for cmd in list(self.command_info.values()):
            with cmd.cond:
                cmd.cond.notify_all()
        if self._server:
            self._server.shutdown()
            self._server.server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- protocol -------------------------------------------------------------------------------

    def handle(self, target: str, body: bytes) -> tuple[int, dict[str, Any]]:
        op = target.rpartition(".")[2]
        with self._lock:
            self.calls[op] += 1
            throttled = self.throttles[op] > 0
            if throttled:
                self.throttles[op] -= 1
        try:
            if throttled:
                raise ApiError("ThrottlingException", "Rate exceeded")
            handler = getattr(self, f"op_{op}", None)
            if handler is None:
                raise ApiError("UnknownOperationException", f"{op} is not implemented by the test endpoint")
            return 200, handler(json.loads(body or b"{}"))
        except ApiError as exc:
            with self._lock:
                self.errors[(op, exc.code)] += 1
            return exc.status, {"__type": exc.code, "message": exc.message}

    # documents

    def _document(self, name: str, version: str | None = None) -> tuple[dict[str, Any], int]:
        if name == "AWS-RunShellScript":
            return RUN_SHELL_SCRIPT, 1
        if name not in self.documents:
            raise ApiError("InvalidDocument", f"Document with name {name} does not exist.")
        versions = self.documents[name]
        if version in (None, "", "$DEFAULT"):
            number = self.default_version[name]
        elif version == "$LATEST":
            number = len(versions)
        elif str(version).isdigit() and 1 <= int(version) <= len(versions):
            number = int(version)
        else:
            raise ApiError("InvalidDocumentVersion", f"version {version} of {name} does not exist")
        return json.loads(versions[number - 1]), number

    @staticmethod
    def _validate_content(content: str) -> None:
        if len(content.encode()) > 64 * 1024:
            raise ApiError("MaxDocumentSizeExceeded", "document content exceeds 64 KB")
        try:
            doc = json.loads(content)
        except ValueError as exc:
            raise ApiError("InvalidDocumentContent", f"not JSON: {exc}") from None
        if doc.get("schemaVersion") != "2.2" or not doc.get("mainSteps"):
            raise ApiError("InvalidDocumentContent", "schemaVersion 2.2 with mainSteps required")
        params = doc.get("parameters") or {}
        for name, spec in params.items():
            if "allowedPattern" in spec:
                re.compile(spec["allowedPattern"])
            if spec.get("interpolationType") not in (None, "ENV_VAR"):
                raise ApiError("InvalidDocumentContent", f"bad interpolationType for {name}")
        for ref in _REF.findall(json.dumps(doc.get("mainSteps"))):
            if not ref.startswith("ssm:") and ref not in params:
                raise ApiError("InvalidDocumentContent", f"parameter {ref} is referenced but not defined")

    def _description(self, name: str) -> dict[str, Any]:
        versions = self.documents[name]
        return {"Name": name, "DocumentType": "Command", "DocumentFormat": "JSON", "Status": "Active",
                "SchemaVersion": "2.2", "DocumentVersion": str(len(versions)),
                "LatestVersion": str(len(versions)), "DefaultVersion": str(self.default_version[name])}

    def op_CreateDocument(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        name = req["Name"]
        if name in self.documents or name.startswith("AWS-"):
            raise ApiError("DocumentAlreadyExists", f"Document with name {name} already exists.")
        self._validate_content(req["Content"])
        self.documents[name] = [req["Content"]]
        self.default_version[name] = 1
        return {"DocumentDescription": self._description(name)}

    def op_UpdateDocument(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        name = req["Name"]
        if name not in self.documents:
            raise ApiError("InvalidDocument", f"Document with name {name} does not exist.")
        self._validate_content(req["Content"])
        if req["Content"] in self.documents[name]:
            raise ApiError("DuplicateDocumentContent", "The content of the association document matches another "
                                                       "document. Change the content of the document and try again.")
        self.documents[name].append(req["Content"])
        return {"DocumentDescription": self._description(name)}

    def op_UpdateDocumentDefaultVersion(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        _, number = self._document(req["Name"], req["DocumentVersion"])
        self.default_version[req["Name"]] = number
        return {"Description": {"Name": req["Name"], "DefaultVersion": str(number)}}

    def op_GetDocument(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        doc, number = self._document(req["Name"], req.get("DocumentVersion"))
        raw = self.documents[req["Name"]][number - 1] if req["Name"] in self.documents else json.dumps(doc)
        return {"Name": req["Name"], "DocumentVersion": str(number), "Status": "Active",
                "Content": raw, "DocumentType": "Command", "DocumentFormat": "JSON"}

    def op_DescribeDocument(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        self._document(req["Name"])
        return {"Document": self._description(req["Name"])}

    # instances

    def op_DescribeInstanceInformation(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        max_results = int(req.get("MaxResults", 50))
        if not 5 <= max_results <= 50:
            raise ApiError("ValidationException", "MaxResults must be between 5 and 50")
        wanted = None
        for f in req.get("Filters") or []:
            if f["Key"] == "InstanceIds":
                wanted = set(f["Values"])
        # the filter's ids (≤ 50 in AWS) looked up, not the whole registry scanned and sorted per call:
        # a 100,000-instance registry answered 2,000 such calls in O(fleet) each
        ids = sorted(self.instances) if wanted is None else sorted(i for i in wanted if i in self.instances)
        start = int(req.get("NextToken") or 0)
        page = ids[start:start + max_results]
        out: dict[str, Any] = {"InstanceInformationList": [
            {"InstanceId": i, "PingStatus": self.instances[i].ping, "PlatformType": "Linux",
             "PlatformName": "Debian GNU/Linux", "AgentVersion": "3.3.2746.0", "ResourceType": "EC2Instance"}
            for i in page]}
        if start + max_results < len(ids):
            out["NextToken"] = str(start + max_results)
        return out

    # commands

    def _resolve(self, targets: list[dict[str, Any]]) -> list[str]:
        """The managed instances matching every target (values of one key OR-ed), sorted."""
        if len(targets) > MAX_TARGET_KEYS:
            raise ApiError("ValidationException", f"1 validation error detected: Value at 'targets' failed to satisfy "
                                                  f"constraint: Member must have length less than or equal to "
                                                  f"{MAX_TARGET_KEYS}")
        for t in targets:
            key, values = t.get("Key") or "", t.get("Values") or []
            if not values or len(values) > MAX_IDS:
                raise ApiError("ValidationException", f"target {key}: 1 to {MAX_IDS} values")
            if not (key.startswith("tag:") and len(key) > 4) and key not in ("InstanceIds", "tag-key"):
                raise ApiError("InvalidTarget", f"target key {key} is not supported for Run Command")
        ec2_tags: dict[str, dict[str, str]] = {}
        if self.ec2 is not None and any(i.tags is None for i in self.instances.values()):
            for page in self.ec2.get_paginator("describe_instances").paginate():
                for r in page["Reservations"]:
                    for i in r["Instances"]:
                        ec2_tags[i["InstanceId"]] = {t["Key"]: t["Value"] for t in i.get("Tags") or []}

        def matches(iid: str, inst: Instance) -> bool:
            tags = inst.tags if inst.tags is not None else ec2_tags.get(iid, {})
            for t in targets:
                key, values = t["Key"], t["Values"]
                if key == "InstanceIds":
                    ok = iid in values
                elif key == "tag-key":
                    ok = any(v in tags for v in values)
                else:
                    ok = tags.get(key[4:]) in values
                if not ok:
                    return False
            return True

        return [iid for iid, inst in sorted(self.instances.items()) if matches(iid, inst)]

    def op_SendCommand(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        ids = req.get("InstanceIds") or []
        if req.get("Targets") and ids:
            raise ApiError("ValidationException", "specify InstanceIds or Targets, not both")
        if not ids and not req.get("Targets"):
            raise ApiError("ValidationException", "InstanceIds or Targets required")
        if len(ids) > MAX_IDS:
            raise ApiError("ValidationException", f"1 validation error detected: Value '{ids}' at 'instanceIds' "
                                                  "failed to satisfy constraint: Member must have length less "
                                                  f"than or equal to {MAX_IDS}")
        timeout = int(req.get("TimeoutSeconds", 3600))
        if not 30 <= timeout <= 2592000:
            raise ApiError("ValidationException", "TimeoutSeconds must be between 30 and 2592000")
        doc, version = self._document(req["DocumentName"], req.get("DocumentVersion"))
        targeted = self._resolve(req["Targets"]) if req.get("Targets") else None  # request shape first
        script, env, exec_timeout = self._render(doc, req.get("Parameters") or {})
        unknown = [i for i in ids if i not in self.instances]
        if unknown:
            raise ApiError("InvalidInstanceId", f"Instances {unknown} not in a valid state for account")
        if targeted is not None:
            ids = targeted
        command_id = str(uuid.uuid4())
        now = time.monotonic()
        cmd = Command(command_id, list(ids), rate(req.get("MaxConcurrency", ""), len(ids), "50", 1),
                      rate(req.get("MaxErrors", ""), len(ids), "0", 0), timeout, now, req)
        s3 = (req.get("OutputS3BucketName"), req.get("OutputS3KeyPrefix") or "")
        step = doc["mainSteps"][0]["name"]
        invs = []
        with self._lock:
            self.sent_commands.append(req)
            self.commands[command_id] = list(ids)
            self.command_info[command_id] = cmd
            for iid in ids:
                inv = Invocation(command_id, iid, req["DocumentName"], now + self.visibility_lag_s,
                                 not_yet_gets=self.not_yet_gets, step=step, s3_bucket=s3[0] or "",
                                 s3_prefix=s3[1])
                self.invocations[(command_id, iid)] = inv
                invs.append(inv)
        threading.Thread(target=self._dispatch, args=(cmd, invs, script, env, exec_timeout, s3, step),
                         daemon=True).start()
        return {"Command": {"CommandId": command_id, "DocumentName": req["DocumentName"],
                            "DocumentVersion": str(version), "InstanceIds": req.get("InstanceIds") or [],
                            "Targets": req.get("Targets") or [], "Status": "Pending", "TimeoutSeconds": timeout,
                            "TargetCount": len(ids), "MaxConcurrency": req.get("MaxConcurrency", "50"),
                            "MaxErrors": req.get("MaxErrors", "0")}}

    def _dispatch(self, cmd: Command, invs: list[Invocation], script: str, env: dict[str, str],
                  exec_timeout: float, s3: tuple[str | None, str], step: str) -> None:
        """Send the invocations in order, ≤ MaxConcurrency at once; stop sending once errors exceed MaxErrors."""
        for inv in invs:
            with cmd.cond:
                cmd.cond.wait_for(lambda: cmd.running < cmd.max_concurrency or self._stopped)
                if self._stopped:
                    return
                if inv.status in TERMINAL:  # cancelled before it was sent
                    continue
                if cmd.errors > cmd.max_errors:
                    self._finish(inv, "Failed", "Terminated", -1)
                    continue
                if time.monotonic() - cmd.sent_at > cmd.delivery_timeout:
                    self._finish(inv, "TimedOut", "Delivery Timed Out", -1)
                    continue
                cmd.running += 1
                cmd.peak = max(cmd.peak, cmd.running)
            self._pool.submit(self._run_one, cmd, inv, script, env, exec_timeout, s3, step)

    def _run_one(self, cmd: Command, inv: Invocation, script: str, env: dict[str, str], exec_timeout: float,
                 s3: tuple[str | None, str], step: str) -> None:
        try:
            self._execute(inv, script, env, exec_timeout, cmd.delivery_timeout, s3, step)
        finally:
            with cmd.cond:
                counts = inv.status == "Failed" and inv.details not in ("Undeliverable", "Terminated")
                if counts or inv.details == "Execution Timed Out":
                    cmd.errors += 1
                cmd.running -= 1
                cmd.cond.notify_all()

    def _render(self, doc: dict[str, Any], given: dict[str, list[str]]) -> tuple[str, dict[str, str], float]:
        params = doc.get("parameters") or {}
        values: dict[str, Any] = {}
        for name, value in given.items():
            if name not in params:
                raise ApiError("InvalidParameters", f"Parameter {name} is not defined in the document")
            values[name] = value if params[name]["type"] == "StringList" else (value[0] if value else "")
        for name, spec in params.items():
            values.setdefault(name, spec.get("default", [] if spec["type"] == "StringList" else ""))
            pattern = spec.get("allowedPattern")
            items = values[name] if isinstance(values[name], list) else [values[name]]
            if pattern and any(not re.search(pattern, str(v)) for v in items):
                raise ApiError("InvalidParameters", f"Parameter {name} fails to match allowedPattern {pattern}")
        inputs = doc["mainSteps"][0]["inputs"]
        lines = inputs["runCommand"]
        if isinstance(lines, str):  # "{{ commands }}"
            lines = values[_REF.fullmatch(lines.strip()).group(1)]

        def sub(m: re.Match[str]) -> str:
            return str(values[m.group(1)]) if m.group(1) in values else m.group(0)

        script = "\n".join(_REF.sub(sub, line) for line in lines) + "\n"
        env = {f"SSM_{n}": str(values[n]) for n, s in params.items() if s.get("interpolationType") == "ENV_VAR"}
        exec_timeout = float(_REF.sub(sub, str(inputs.get("timeoutSeconds", "3600"))))
        return script, env, exec_timeout

    def _finish(self, inv: Invocation, status: str, details: str, code: int, out: str = "", err: str = "") -> None:
        with self._lock:
            if inv.status in TERMINAL:  # cancelled meanwhile
                return
            inv.status, inv.details, inv.response_code = status, details, code
            inv.stdout, inv.stderr, inv.ended = out, err, time.monotonic()

    def _execute(self, inv: Invocation, script: str, env: dict[str, str], exec_timeout: float,
                 delivery_timeout: int, s3: tuple[str | None, str], step: str) -> None:
        inst = self.instances[inv.instance_id]
        time.sleep(max(0.0, inv.visible_at - time.monotonic()))
        if inst.behaviour == "undeliverable" or inst.ping != "Online":
            return self._finish(inv, "Failed", "Undeliverable", -1,
                                err="The command could not be delivered to the instance.")
        if inst.behaviour == "offline":
            time.sleep(delivery_timeout)
            return self._finish(inv, "TimedOut", "Delivery Timed Out", -1)
        if inst.behaviour == "terminated":
            return self._finish(inv, "Failed", "Terminated", -1)
        with self._lock:
            if inv.status in TERMINAL:  # cancelled while queued
                return None
            inv.status, inv.details, inv.started = "InProgress", "In Progress", time.monotonic()
            self.executed[inv.instance_id] += 1
        try:
            if inst.delay_s >= exec_timeout:
                time.sleep(exec_timeout)
                raise subprocess.TimeoutExpired(script, exec_timeout)
            time.sleep(inst.delay_s)
            out, err, code = inst.runner(script, env, exec_timeout - inst.delay_s)
        except subprocess.TimeoutExpired:
            return self._finish(inv, "TimedOut", "Execution Timed Out", -1,
                                err=f"failed to run commands: command timed out after {exec_timeout:.0f}s")
        bucket, prefix = s3
        if bucket and self.s3 is not None and inst.s3_write:
            key = "/".join(p for p in (prefix.strip("/"), inv.command_id, inv.instance_id, "awsrunShellScript",
                                       step, "stdout") if p)
            try:
                self._upload(bucket, key, out)
                inv.stdout_url = f"https://s3.{self.region}.amazonaws.com/{bucket}/{key}"
            except Exception:  # noqa: BLE001 - as the agent: a failed upload leaves the output inline only
                pass
        self._finish(inv, "Success" if code == 0 else "Failed", "Success" if code == 0 else "Failed", code,
                     out[:STDOUT_CAP], err[:STDERR_CAP])

    def _upload(self, bucket: str, key: str, out: str) -> None:
        if self.s3_direct:  # the same moto S3, through its backend: no client-side HTTP cost per output
            from moto.core import DEFAULT_ACCOUNT_ID
            from moto.s3.models import s3_backends

            s3_backends[DEFAULT_ACCOUNT_ID]["global"].put_object(bucket, key, out.encode())
        else:
            self.s3.put_object(Bucket=bucket, Key=key, Body=out.encode())

    def _visible(self, command_id: str, instance_id: str) -> Invocation:
        inv = self.invocations.get((command_id, instance_id))
        if inv is None or time.monotonic() < inv.visible_at:
            raise ApiError("InvocationDoesNotExist", "")
        return inv

    def op_GetCommandInvocation(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        with self._lock:
            inv = self._visible(req["CommandId"], req["InstanceId"])
            if inv.not_yet_gets > 0:
                inv.not_yet_gets -= 1
                raise ApiError("InvocationDoesNotExist", "")
            done = inv.status in TERMINAL
            elapsed = (inv.ended or time.monotonic()) - inv.started if inv.started else 0.0
            return {
                "CommandId": inv.command_id, "InstanceId": inv.instance_id, "DocumentName": inv.document,
                "PluginName": "probe", "ResponseCode": inv.response_code, "Status": inv.status,
                "StatusDetails": inv.details, "ExecutionElapsedTime": f"PT{elapsed:.3f}S",
                "StandardOutputContent": inv.stdout if done else "",
                "StandardErrorContent": inv.stderr if done else "",
                "StandardOutputUrl": inv.stdout_url if done else "",
                "StandardErrorUrl": "",
            }

    def op_ListCommandInvocations(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        max_results = int(req.get("MaxResults", 50))
        if not 1 <= max_results <= 50:
            raise ApiError("ValidationException", "MaxResults must be between 1 and 50")
        command_id = req.get("CommandId")
        if command_id not in self.commands:
            raise ApiError("InvalidCommandId", f"{command_id}")
        now = time.monotonic()
        with self._lock:
            rows = [self.invocations[(command_id, i)] for i in self.commands[command_id]]
            rows = [r for r in rows if r.visible_at <= now
                    and (not req.get("InstanceId") or r.instance_id == req["InstanceId"])]
            start = int(req.get("NextToken") or 0)
            page = rows[start:start + max_results]
            out: dict[str, Any] = {"CommandInvocations": [
                {"CommandId": r.command_id, "InstanceId": r.instance_id, "DocumentName": r.document,
                 "Status": r.status, "StatusDetails": r.details,
                 **({"CommandPlugins": [self._plugin(r)]} if req.get("Details") else {})} for r in page]}
        if start + max_results < len(rows):
            out["NextToken"] = str(start + max_results)
        return out

    def _plugin(self, inv: Invocation) -> dict[str, Any]:
        """A ListCommandInvocations(Details=True) plugin row: `Output` is the first 2,500 characters of
        stdout, then the agent's ERROR mark and stderr (as the API reference caps it); times in epoch seconds."""
        done = inv.status in TERMINAL
        output = inv.stdout + (PLUGIN_ERROR_MARK + inv.stderr if inv.stderr else "") if done else ""
        wall = time.time() - time.monotonic()
        row: dict[str, Any] = {"Name": inv.step, "Status": inv.status, "StatusDetails": inv.details,
                               "ResponseCode": inv.response_code, "Output": output[:PLUGIN_OUTPUT_CAP],
                               "StandardOutputUrl": inv.stdout_url if done else "", "StandardErrorUrl": "",
                               "OutputS3BucketName": inv.s3_bucket, "OutputS3KeyPrefix": inv.s3_prefix}
        if inv.started:
            row["ResponseStartDateTime"] = inv.started + wall
        if inv.ended and inv.started:
            row["ResponseFinishDateTime"] = inv.ended + wall
        return row

    def op_ListCommands(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        command_id = req.get("CommandId")
        if command_id not in self.commands:
            raise ApiError("InvalidCommandId", f"{command_id}")
        cmd = self.command_info[command_id]
        with self._lock:
            rows = [self.invocations[(command_id, i)] for i in cmd.ids]
            done = [r for r in rows if r.status in TERMINAL]
            if len(done) < len(rows):
                status = details = "InProgress" if any(r.status != "Pending" for r in rows) else "Pending"
            elif not rows:
                status, details = "Success", "No Instances In Tag"
            elif all(r.status == "Success" for r in rows):
                status = details = "Success"
            elif any(r.status == "Cancelled" for r in rows):
                status = details = "Cancelled"
            else:
                status, details = "Failed", "Failed" if cmd.errors > cmd.max_errors else "Incomplete"
        req_ = cmd.request
        return {"Commands": [{
            "CommandId": command_id, "DocumentName": req_["DocumentName"], "Status": status,
            "StatusDetails": details, "TargetCount": len(rows), "CompletedCount": len(done),
            "ErrorCount": cmd.errors, "MaxConcurrency": req_.get("MaxConcurrency", "50"),
            "MaxErrors": req_.get("MaxErrors", "0"), "Targets": req_.get("Targets") or [],
            "InstanceIds": req_.get("InstanceIds") or [], "TimeoutSeconds": cmd.delivery_timeout}]}

    def op_CancelCommand(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        command_id = req["CommandId"]
        if command_id not in self.commands:
            raise ApiError("InvalidCommandId", command_id)
        for iid in req.get("InstanceIds") or self.commands[command_id]:
            inv = self.invocations.get((command_id, iid))
            if inv is not None:
                self._finish(inv, "Cancelled", "Cancelled", -1)
        return {}

    # compliance

    def op_PutComplianceItems(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        for key in ("ResourceId", "ResourceType", "ComplianceType", "ExecutionSummary", "Items"):
            if key not in req:
                raise ApiError("ValidationException", f"{key} is required")
        if req["ResourceType"] != "ManagedInstance":
            raise ApiError("InvalidResourceType", "ResourceType must be ManagedInstance")
        if req["ResourceId"] not in self.instances:
            raise ApiError("InvalidResourceId", f"{req['ResourceId']} is not a managed instance")
        kind = req["ComplianceType"]
        if len(kind) > 100 or not re.fullmatch(r"[A-Za-z0-9_\-]\w+|Custom:[a-zA-Z0-9_\-]\w+", kind):
            raise ApiError("ValidationException", f"ComplianceType {kind!r} fails its pattern or length")
        summary = req["ExecutionSummary"]
        if "ExecutionTime" not in summary or len(summary.get("ExecutionId", "")) > 100 or \
                len(summary.get("ExecutionType", "")) > 50:
            raise ApiError("ValidationException", "ExecutionSummary: ExecutionTime required, ExecutionId <= 100")
        entries = req["Items"]
        if len(entries) > 10_000:
            raise ApiError("ItemSizeLimitExceededException", "at most 10,000 items per call")
        if len(req.get("ItemContentHash", "")) > 256 or req.get("UploadType", "COMPLETE") not in ("COMPLETE",
                                                                                                   "PARTIAL"):
            raise ApiError("ValidationException", "ItemContentHash <= 256; UploadType COMPLETE or PARTIAL")
        for item in entries:
            if item.get("Severity") not in ("CRITICAL", "HIGH", "MEDIUM", "LOW", "INFORMATIONAL", "UNSPECIFIED"):
                raise ApiError("ValidationException", f"item {item.get('Id')}: bad Severity")
            if item.get("Status") not in ("COMPLIANT", "NON_COMPLIANT"):
                raise ApiError("ValidationException", f"item {item.get('Id')}: bad Status")
            if len(item.get("Title", "")) > 500:
                raise ApiError("ValidationException", f"item {item.get('Id')}: Title over 500 characters")
            for k, v in (item.get("Details") or {}).items():
                if not 1 <= len(k) <= 64 or len(v) > 4096:
                    raise ApiError("ValidationException", f"item {item.get('Id')}: Details {k!r} too long")
        key = (req["ResourceId"], kind)
        state = self.compliance.get(key)
        if state and req.get("ItemContentHash") and state["hash"] == req["ItemContentHash"]:
            return {}  # documented: a matching content hash means the request is ignored
        kept = {} if req.get("UploadType", "COMPLETE") == "COMPLETE" or not state else dict(state["items"])
        kept.update({i.get("Id", str(n)): i for n, i in enumerate(entries)})
        self.compliance[key] = {"items": kept, "summary": summary, "hash": req.get("ItemContentHash", "")}
        return {}

    def _compliance_rows(self, req: dict[str, Any]) -> list[dict[str, Any]]:
        rows = []
        for (rid, kind), state in sorted(self.compliance.items()):
            if req.get("ResourceIds") and rid not in req["ResourceIds"]:
                continue
            for iid, item in sorted(state["items"].items()):
                rows.append({"ComplianceType": kind, "ResourceType": "ManagedInstance", "ResourceId": rid, "Id": iid,
                             "Title": item.get("Title", ""), "Status": item["Status"], "Severity": item["Severity"],
                             "ExecutionSummary": state["summary"], "Details": item.get("Details") or {}})
        for f in req.get("Filters") or []:
            if not 1 <= len(f.get("Values") or []) <= 20:
                raise ApiError("ValidationException", "a filter takes 1 to 20 values")
            if f.get("Type", "EQUAL") != "EQUAL":
                raise ApiError("ValidationException", "the test endpoint filters with EQUAL only")
            rows = [r for r in rows if str(r.get(f["Key"])) in f["Values"]]
        return rows

    @staticmethod
    def _page(rows: list[dict[str, Any]], req: dict[str, Any], key: str) -> dict[str, Any]:
        max_results = int(req.get("MaxResults", 50))
        if not 1 <= max_results <= 50:
            raise ApiError("ValidationException", "MaxResults must be between 1 and 50")
        start = int(req.get("NextToken") or 0)
        out: dict[str, Any] = {key: rows[start:start + max_results]}
        if start + max_results < len(rows):
            out["NextToken"] = str(start + max_results)
        return out

    def op_ListComplianceItems(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        if req.get("ResourceTypes") not in (None, ["ManagedInstance"]):
            raise ApiError("ValidationException", "ResourceTypes: ManagedInstance")
        return self._page(self._compliance_rows(req), req, "ComplianceItems")

    def op_ListComplianceSummaries(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        kinds: dict[str, dict[str, Counter]] = {}
        for (_, kind), state in sorted(self.compliance.items()):
            worst = [i for i in state["items"].values() if i["Status"] == "NON_COMPLIANT"]
            side = "NonCompliant" if worst else "Compliant"
            severity = (worst or list(state["items"].values()) or [{"Severity": "UNSPECIFIED"}])[0]["Severity"]
            kinds.setdefault(kind, {"Compliant": Counter(), "NonCompliant": Counter()})[side][severity] += 1
        rows = [{"ComplianceType": kind,
                 "CompliantSummary": {"CompliantCount": sum(c["Compliant"].values()),
                                      "SeveritySummary": _severity_summary(c["Compliant"])},
                 "NonCompliantSummary": {"NonCompliantCount": sum(c["NonCompliant"].values()),
                                         "SeveritySummary": _severity_summary(c["NonCompliant"])}}
                for kind, c in sorted(kinds.items())]
        for f in req.get("Filters") or []:
            rows = [r for r in rows if str(r.get(f["Key"])) in f["Values"]]
        return self._page(rows, req, "ComplianceSummaryItems")


def _severity_summary(counts: Counter) -> dict[str, int]:
    return {f"{name.capitalize()}Count": counts[name] for name in ("CRITICAL", "HIGH", "MEDIUM", "LOW")} | {
        "InformationalCount": counts["INFORMATIONAL"], "UnspecifiedCount": counts["UNSPECIFIED"]}
