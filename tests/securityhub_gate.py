"""moto's server for Security Hub and STS, behind a loopback gate that adds what moto leaves out.

moto stores findings (BatchImportFindings, GetFindings) but does not enforce the API's documented limit
of 100 findings per BatchImportFindings call, never throttles and never refuses one finding of a batch.
The gate, a real HTTP server in front of moto, records every import's size, answers a batch over 100
with InvalidInputException (400, as Security Hub does), throttles on demand (429
TooManyRequestsException) and refuses chosen Ids in FailedFindings; everything else is forwarded.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's account
ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION,
       "AWS_CONFIG_FILE": "/nonexistent/aws-config", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-creds",
       "AWS_EC2_METADATA_DISABLED": "true"}
DROPPED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL")


class Gate:
    def __init__(self, moto_url: str):
        self.moto_url = moto_url
        self.import_sizes: list[int] = []
        self.throttle_next = 0
        self.refuse: set[str] = set()
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.startswith("/findings/import"):
                    status, answer = gate.imports(body)
                    if answer is not None:
                        return self.reply(status, answer)
                self.forward(body)

            def do_GET(self) -> None:  # noqa: N802
                self.forward(b"")

            def reply(self, status: int, doc: dict[str, Any], error: str | None = None) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status >= 400:
                    self.send_header("x-amzn-ErrorType", doc["__type"])
                self.end_headers()
                self.wfile.write(data)

            def forward(self, body: bytes) -> None:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                request = urllib.request.Request(gate.moto_url + self.path, data=body or None, headers=headers,
                                                 method=self.command)
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        status, data, kinds = response.status, response.read(), dict(response.headers)
                except urllib.error.HTTPError as exc:
                    status, data, kinds = exc.code, exc.read(), dict(exc.headers)
                if self.path.startswith("/findings/import") and status == 200 and gate.refuse:
                    data = gate.add_refusals(body, data)
                self.send_response(status)
                for key in ("Content-Type", "x-amzn-ErrorType", "x-amzn-RequestId"):
                    if key in kinds:
                        self.send_header(key, kinds[key])
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def imports(self, body: bytes) -> tuple[int, dict[str, Any] | None]:
        """(status, answer) when the gate answers itself; (0, None) to forward."""
        findings = json.loads(body).get("Findings") or []
        if self.throttle_next > 0:
            self.throttle_next -= 1
            return 429, {"__type": "TooManyRequestsException", "Message": "Rate exceeded"}
        self.import_sizes.append(len(findings))
        if not 1 <= len(findings) <= 100:
            return 400, {"__type": "InvalidInputException", "Message": "Findings: 1 to 100 per call"}
        return 0, None

    def add_refusals(self, body: bytes, data: bytes) -> bytes:
        """moto stored every finding; report the refused ones failed (and take them back out)."""
        ids = [f["Id"] for f in json.loads(body)["Findings"] if f["Id"] in self.refuse]
        answer = json.loads(data)
        answer["FailedCount"] = len(ids)
        answer["SuccessCount"] -= len(ids)
        answer["FailedFindings"] = [{"Id": i, "ErrorCode": "InvalidInput", "ErrorMessage": "refused by the gate"}
                                    for i in ids]
        return json.dumps(answer).encode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def security_hub() -> Iterator[tuple[Gate, Any]]:
    """(the gate, a boto3 Security Hub client straight to moto for checking what it holds)."""
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    moto_url = f"http://{host}:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=30).read()
    gate = Gate(moto_url)
    keys = (*ENV, *DROPPED, "AWS_ENDPOINT_URL_SECURITYHUB", "AWS_ENDPOINT_URL_STS")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(ENV)
    for key in DROPPED:
        os.environ.pop(key, None)
    os.environ["AWS_ENDPOINT_URL_SECURITYHUB"] = gate.url
    os.environ["AWS_ENDPOINT_URL_STS"] = moto_url
    try:
        hub = boto3.client("securityhub", region_name=REGION, endpoint_url=moto_url)
        hub.enable_security_hub()
        yield gate, hub
    finally:
        gate.close()
        moto.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def all_findings(hub: Any) -> dict[str, dict[str, Any]]:
    """Every finding moto holds, by Id (GetFindings, paged)."""
    out: dict[str, dict[str, Any]] = {}
    for page in hub.get_paginator("get_findings").paginate(PaginationConfig={"PageSize": 100}):
        for f in page["Findings"]:
            assert f["Id"] not in out, f"duplicate {f['Id']}"
            out[f["Id"]] = f
    return out
