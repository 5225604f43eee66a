"""ami-auditor: audit Linux cloud hosts and AMIs for configuration drift."""

__version__ = "0.1.0"

SNAPSHOT_SCHEMA = "ami-auditor/snapshot/1"
REPORT_SCHEMA = "ami-auditor/report/1"
