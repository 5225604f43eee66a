"""Where shipped data lives: built-in rule packs (top-level rules/) and report templates (reports/).

In a wheel they are the data-only (namespace) packages auditor.builtin_rules / auditor.report_templates;
in a source checkout (editable install) they are the top-level folders beside the package.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent


def _data_dir(package: str, folder: str) -> Path:
    try:
        spec = importlib.util.find_spec(package)
    except ModuleNotFoundError:
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec else []
    candidates: list[str | Path] = [*(str(loc) for loc in locations), _REPO / folder]
    for location in candidates:
        if Path(location).is_dir():
            return Path(location)
    raise FileNotFoundError(f"ami-auditor is installed without its {folder}/ data ({package})")


def builtin_rules_dir() -> Path:
    """Folder holding the built-in YAML rule packs."""
    return _data_dir("auditor.builtin_rules", "rules")


def report_templates_dir() -> Path:
    """Folder holding the jinja2 report templates."""
    return _data_dir("auditor.report_templates", "reports")
