"""Start moto's server (EC2, S3) and the SSM endpoint on 127.0.0.1 and point boto3 at them.

Everything is real HTTP: boto3 → botocore → sockets. Credentials are dummies; botocore's standard
`AWS_ENDPOINT_URL_<SERVICE>` variables route each service to its local stand-in.
"""

from __future__ import annotations

import os
import urllib.request
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from .server import SSMEndpoint

REGION = "us-east-1"
ENV_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION",
            "AWS_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_EC2_METADATA_DISABLED", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SSM", "AWS_ENDPOINT_URL_EC2",
            "AWS_ENDPOINT_URL_S3")


class AwsStandIns:
    """`with AwsStandIns() as aws:` — aws.ec2 / aws.s3 clients (moto), aws.ssm (the endpoint)."""

    def __init__(self, **endpoint_options: Any):
        self.endpoint_options = endpoint_options
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> AwsStandIns:
        self.moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.moto.start()
        host, port = self.moto.get_host_and_port()
        self.moto_url = f"http://{host}:{port}"
        self.reset_moto()  # moto's backends are process-wide: start from nothing, whatever ran before
        self._saved = {k: os.environ.get(k) for k in ENV_KEYS}
        os.environ.update({
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": "/nonexistent/aws-config", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-creds",
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL_EC2": self.moto_url,
            "AWS_ENDPOINT_URL_S3": self.moto_url,
        })
        for key in ("AWS_SESSION_TOKEN", "AWS_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
            os.environ.pop(key, None)
        self.ec2 = boto3.client("ec2", region_name=REGION)
        self.s3 = boto3.client("s3", region_name=REGION)
        self.endpoint = SSMEndpoint(region=REGION, s3=self.s3, ec2=self.ec2, **self.endpoint_options)
        os.environ["AWS_ENDPOINT_URL_SSM"] = self.endpoint.start()
        self.ssm = boto3.client("ssm", region_name=REGION)
        return self

    def install_probe_document(self, bucket: str | None = None) -> None:
        """Create the purpose-built SSM document our scans send (and `bucket`, for its S3 outputs)."""
        from auditor.collect.probe import DEFAULT_BINARIES, probe_script
        from auditor.transport.ssm_document import DOCUMENT_NAME, document_json

        self.ssm.create_document(Name=DOCUMENT_NAME, Content=document_json(probe_script(), list(DEFAULT_BINARIES)),
                                 DocumentType="Command", DocumentFormat="JSON")
        if bucket is not None:
            self.s3.create_bucket(Bucket=bucket)

    def reset_moto(self) -> None:
        """Empty every moto backend (its documented reset endpoint)."""
        with urllib.request.urlopen(urllib.request.Request(f"{self.moto_url}/moto-api/reset", method="POST"),
                                    timeout=30) as response:
            response.read()

    def __exit__(self, *exc: object) -> None:
        self.endpoint.stop()
        self.reset_moto()
        self.moto.stop()
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
