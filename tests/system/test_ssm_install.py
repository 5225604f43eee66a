"""`ami-auditor ssm install-document` against the local SSM endpoint (a stand-in for AWS SSM)."""

from __future__ import annotations

import io
import json

from auditor.cli import main
from auditor.collect.probe import probe_script
from auditor.context import Env
from auditor.transport.ssm_document import document_json, document_probe_sha256, probe_sha256
from tests.ssm_endpoint import AwsStandIns


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Env(out, err))
    return code, out.getvalue(), err.getvalue()


def test_install_creates_then_is_idempotent_then_updates_a_stale_document() -> None:
    with AwsStandIns() as aws:
        code, out, _ = _cli("ssm", "install-document", "--region", "us-east-1")
        assert code == 0 and out.startswith("created SSM document AmiAuditor-Probe version 1")
        code, out, _ = _cli("ssm", "install-document", "--region", "us-east-1")
        assert code == 0 and "is up to date" in out

        aws.ssm.create_document(Name="Stale", Content=document_json("echo old\n", []), DocumentType="Command",
                                DocumentFormat="JSON")
        code, out, _ = _cli("ssm", "install-document", "--region", "us-east-1", "--name", "Stale")
        assert code == 0 and "version 2, now the default" in out
        content = aws.ssm.get_document(Name="Stale")["Content"]
        assert document_probe_sha256(content) == probe_sha256(probe_script())
        assert aws.endpoint.default_version["Stale"] == 2


def test_print_document_is_json() -> None:
    code, out, _ = _cli("ssm", "document")
    assert code == 0 and json.loads(out)["mainSteps"][0]["name"] == "probe"


def test_bad_document_name_exits_2() -> None:
    code, _, err = _cli("ssm", "install-document", "--name", "bad name!")
    assert code == 2 and "bad SSM document name" in err
