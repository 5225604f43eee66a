#!/usr/bin/env bash
# The JUnit schema Jenkins' xUnit plugin validates reports against (junit-10.xsd, MIT, Gregory Boissinot), as
# pytest's source distribution ships it for its own JUnit tests (testing/example_scripts/junit-10.xsd; pytest's
# copy adds a `version` attribute and allows at most 3 decimals in times). Taken from the registry by package
# name, never committed: tests/unit/test_render_junit.py reads it from $AMI_AUDITOR_JUNIT_XSD or the path below.
# Idempotent: a schema already in place is kept.
set -euo pipefail
dest=${AMI_AUDITOR_JUNIT_XSD:-/var/cache/ami-auditor-ci/junit-10.xsd}
[ -s "$dest" ] && exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps --no-binary :all: "pytest==9.0.3" -d "$work" >/dev/null
tar -xzf "$work"/pytest-9.0.3.tar.gz -C "$work" pytest-9.0.3/testing/example_scripts/junit-10.xsd
mkdir -p "$(dirname "$dest")"
install -m 0644 "$work"/pytest-9.0.3/testing/example_scripts/junit-10.xsd "$dest"
