"""Where shipped data lives: built-in rule packs (top-level rules/) and report templates (reports/).

In a wheel they are the data packages auditor.builtin_rules / auditor.report_templates; in a source
checkout (editable install) they are the top-level folders beside the package.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent


def _data_dir(package: str, folder: str) -> Path:
    try:
        return Path(str(resources.files(package)))
    except ModuleNotFoundError:
        return _REPO / folder


def builtin_rules_dir() -> Path:
    """Folder holding the built-in YAML rule packs."""
    return _data_dir("auditor.builtin_rules", "rules")


def report_templates_dir() -> Path:
    """Folder holding the jinja2 report templates."""
    return _data_dir("auditor.report_templates", "reports")
