"""`--notify`: only findings first seen in this scan, retried, never changing the exit code.

Real HTTP on loopback: a local webhook server (it fails the first POST, to prove the retry), and
moto's server for SNS, whose topic delivers into an SQS queue the test reads back.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from auditor.cli import main
from auditor.context import Env

REGION = "us-east-1"


def scan(store: Path, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "local", "--binary", "sh", "--store", str(store), *extra], Env(out, err))
    return code, out.getvalue(), err.getvalue()


class Hook:
    """A webhook receiver on 127.0.0.1 that answers 500 to the first `fail_first` POSTs."""

    def __init__(self, fail_first: int = 1):
        self.bodies: list[dict[str, Any]] = []
        self.attempts = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.attempts += 1
                if hook.attempts <= fail_first:
                    self.send_response(500)
                else:
                    hook.bodies.append(json.loads(body))
                    self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T000/SECRET"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


def test_webhook_gets_only_new_findings_after_a_retry(tmp_path: Path, hook: Hook) -> None:
    store = tmp_path / "h.sqlite3"
    code, _, err = scan(store, "--notify", f"webhook:{hook.url}", "--format", "json", "--out", str(tmp_path / "r"))
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert code == doc["summary"]["exit_code"] in (0, 1)
    assert hook.attempts == 2 and len(hook.bodies) == 1  # the first POST got a 500: retried once
    body = hook.bodies[0]
    assert body["new_findings"] == len([f for f in doc["findings"] if not f["waived"]]) > 0
    assert {(f["host"], f["rule"]) for f in body["findings"]} == {(f["host"], f["rule"]) for f in doc["findings"]}
    assert body["text"].startswith("ami-auditor: ") and body["scan_id"] == 1
    assert "SECRET" not in err  # the URL's secret path is never echoed
    # The second time only what is new is sent (on this shared machine a kernel-wide counter can move
    # between the two scans and make a finding new: it must then be the only thing sent).
    code, _, err = scan(store, "--notify", f"webhook:{hook.url}", "--format", "json", "--out", str(tmp_path / "r2"))
    again = json.loads((tmp_path / "r2" / "report.json").read_text())
    assert code == again["summary"]["exit_code"]
    new = {(f["host"], f["rule"], f["item"]) for f in again["findings"]
           if not f["waived"] and f["first_seen"] == again["generated_at"]}
    old = {(f["host"], f["rule"], f["item"]) for f in doc["findings"]}
    assert not new & old
    if new:
        assert {(f["host"], f["rule"], f["item"]) for f in hook.bodies[-1]["findings"]} == new
    else:
        assert len(hook.bodies) == 1 and "no new findings" in err


def test_an_unreachable_webhook_never_changes_the_result(tmp_path: Path) -> None:
    hook = Hook()
    url = hook.url
    hook.close()  # nothing listens there any more
    code, out, err = scan(tmp_path / "h.sqlite3", "--notify", f"webhook:{url}", "--format", "json",
                          "--out", str(tmp_path / "r"))
    assert code == json.loads((tmp_path / "r" / "report.json").read_text())["summary"]["exit_code"] in (0, 1)
    assert "not delivered after 3 attempt(s)" in err and "SECRET" not in err + out


@pytest.fixture
def moto_sns() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_SNS",
            "AWS_ENDPOINT_URL_SQS", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_PROFILE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL_SNS": f"http://{host}:{port}",
                       "AWS_ENDPOINT_URL_SQS": f"http://{host}:{port}", "AWS_CONFIG_FILE": "/nonexistent",
                       "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"})
    os.environ.pop("AWS_PROFILE", None)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_sns_topic_receives_the_new_findings(tmp_path: Path, moto_sns: str) -> None:
    sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
    topic = sns.create_topic(Name="ami-auditor-alerts")["TopicArn"]
    queue = sqs.create_queue(QueueName="alerts")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    code, _, err = scan(tmp_path / "h.sqlite3", "--notify", f"sns:{topic}")
    assert code in (0, 1) and "sent" in err, err
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=2).get("Messages", [])
    assert len(messages) == 1
    body = json.loads(messages[0]["Body"])
    assert body["new_findings"] >= 1 and body["findings"][0]["host"] == "local"


@pytest.mark.parametrize(("target", "needle"), [
    ("mail:ops@example.com", "--notify"), ("sns:not-an-arn", "topic ARN"), ("webhook:ftp://x/y", "http(s)"),
    ("webhook:https://user:pw@hooks.example/x", "user or password"),
])
def test_bad_notify_targets_are_bad_input_before_any_host(tmp_path: Path, target: str, needle: str) -> None:
    code, out, err = scan(tmp_path / "h.sqlite3", "--notify", target)
    assert code == 2 and needle in err and "pw@" not in err
    assert not (tmp_path / "h.sqlite3").exists()


def test_notify_without_the_store_is_refused(tmp_path: Path) -> None:
    code, _, err = scan(tmp_path / "h.sqlite3", "--no-store", "--notify", "webhook:http://127.0.0.1:9/x")
    assert code == 2 and "--no-store" in err


@pytest.mark.parametrize(("url", "needle"), [
    ("http://hooks.example:abc/services/SECRET", "port"),
    ("http://hooks.example:99999/services/SECRET", "port"),
    ("http://hooks.example:0/services/SECRET", "port"),
    ("http://[::1/services/SECRET", "URL"),
    ("http://hooks.example/services/SE CRET", "whitespace"),
    ("http://hooks.example/services/SECRET\x01", "control"),
    ("http://hooks.example/services/SECRET\x7f", "control"),
    ("http://hooks.example/services/SECRET\u00e9", "non-ASCII"),
    ("http:///services/SECRET", "host"),
    ("http://:8080/services/SECRET", "host"),
    ("http://ho$ts.example/services/SECRET", "host"),
])
def test_bad_webhook_urls_exit_2_before_any_host_and_never_show_the_secret(
        tmp_path: Path, url: str, needle: str) -> None:
    """Before: the port ones scanned and recorded the host, then exit 4 from urlsplit().port; the space
    one printed its path in the delivery error."""
    code, out, err = scan(tmp_path / "h.sqlite3", "--notify", f"webhook:{url}", "--format", "json",
                          "--out", str(tmp_path / "r"))
    assert code == 2, err
    assert needle in err and "internal error" not in err
    assert "SECRET" not in err and "SE CRET" not in err and "services" not in err
    assert out == "" and not (tmp_path / "h.sqlite3").exists() and not (tmp_path / "r").exists()


def test_a_delivery_error_never_echoes_the_url_path(tmp_path: Path) -> None:
    from auditor.notify.send import Target, deliver

    def boom(target: Target, body: dict) -> None:
        raise ValueError(f"cannot POST {target.address} (/services/T0/SECRET?k=SECRET2)")

    target = Target("webhook", "http://127.0.0.1:9/services/T0/SECRET?k=SECRET2")
    from auditor.notify import send
    saved = send.SENDERS["webhook"]
    send.SENDERS["webhook"] = boom  # a sender that fails with the URL in its message (as http.client's do)
    try:
        problem = deliver(target, {}, attempts=1)
    finally:
        send.SENDERS["webhook"] = saved
    assert problem and "SECRET" not in problem and "127.0.0.1:9" in problem
