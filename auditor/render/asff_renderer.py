"""ASFF: the report's findings as a JSON array of AWS Security Finding Format documents.

The same documents `--notify securityhub` imports (auditor/notify/asff.py), for another pipeline to
send (`aws securityhub batch-import-findings --findings file://report.asff.json`). Offline no account is
known: `AwsAccountId`, the `ProductArn` and EC2 ARNs carry the placeholder account 000000000000 and
region us-east-1, for that pipeline to set.
"""

from __future__ import annotations

from ..notify.asff import documents
from ..reporttypes import ReportDoc
from . import json_renderer


def render(doc: ReportDoc) -> str:
    """Every finding (waived ones SUPPRESSED) as an ASFF array; control characters escaped as in JSON."""
    return json_renderer.render_value(documents(doc))
