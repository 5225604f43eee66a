"""`ami-auditor ssm document` prints the SSM document; `ami-auditor ssm install-document` creates or
updates it in the account (new version made the default) so `--via ssm` scans can run it."""

from __future__ import annotations

import argparse

from .. import exitcodes
from ..aws.api import clients as aws_clients
from ..aws.api import error_for_aws
from ..collect.probe import DEFAULT_BINARIES, probe_script
from ..context import Env
from ..errors import AuditorError
from ..transport.ssm_document import DOCUMENT_NAME as DEFAULT_NAME
from ..transport.ssm_document import document_json, probe_sha256
from .aws_options import DOC_NAME_RE, REGION_RE, checked


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ssm", help="the SSM document that runs the probe (print, install)")
    ssm_sub = p.add_subparsers(dest="ssm_command", metavar="SUBCOMMAND")
    ssm_sub.required = True
    doc = ssm_sub.add_parser("document", help="print the SSM document (JSON) that embeds the probe")
    doc.set_defaults(func=print_document)
    inst = ssm_sub.add_parser("install-document", help="create or update the document in the account")
    inst.add_argument("--name", type=checked(DOC_NAME_RE, "SSM document name"), default=DEFAULT_NAME,
                      help=f"document name (default {DEFAULT_NAME})")
    inst.add_argument("--region", type=checked(REGION_RE, "region"), help="AWS region")
    inst.add_argument("--profile", metavar="NAME", help="AWS profile")
    inst.set_defaults(func=install_document)


def print_document(args: argparse.Namespace, env: Env) -> int:
    env.write(document_json(probe_script(), list(DEFAULT_BINARIES)))
    return exitcodes.OK


def install_document(args: argparse.Namespace, env: Env) -> int:
    """CreateDocument, or UpdateDocument + UpdateDocumentDefaultVersion when it exists already."""
    content = document_json(probe_script(), list(DEFAULT_BINARIES))
    digest = probe_sha256(probe_script())[:12]
    (ssm,) = aws_clients(args.region, args.profile, "ssm")
    try:
        desc = ssm.create_document(Name=args.name, Content=content, DocumentType="Command",
                                   DocumentFormat="JSON")["DocumentDescription"]
        env.out(f"created SSM document {args.name} version {desc.get('DocumentVersion')} (probe sha256:{digest})")
        return exitcodes.OK
    except Exception as exc:  # noqa: BLE001
        if "DocumentAlreadyExists" not in str(exc):
            raise AuditorError(str(error_for_aws(exc, "CreateDocument"))) from None
    try:
        desc = ssm.update_document(Name=args.name, Content=content, DocumentVersion="$LATEST",
                                   DocumentFormat="JSON")["DocumentDescription"]
    except Exception as exc:  # noqa: BLE001
        if "DuplicateDocumentContent" not in str(exc):
            raise AuditorError(str(error_for_aws(exc, "UpdateDocument"))) from None
        current = ssm.get_document(Name=args.name, DocumentFormat="JSON")
        if current.get("Content", "").strip() != content.strip():
            raise AuditorError(f"SSM document {args.name}: this content exists as an older version that is not "
                               "the default; make it the default with UpdateDocumentDefaultVersion") from None
        env.out(f"SSM document {args.name} is up to date (probe sha256:{digest})")
        return exitcodes.OK
    version = desc["DocumentVersion"]
    try:
        ssm.update_document_default_version(Name=args.name, DocumentVersion=version)
    except Exception as exc:  # noqa: BLE001
        raise AuditorError(str(error_for_aws(exc, "UpdateDocumentDefaultVersion"))) from None
    env.out(f"updated SSM document {args.name} to version {version}, now the default (probe sha256:{digest})")
    return exitcodes.OK
