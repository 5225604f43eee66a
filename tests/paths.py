"""Where the tests find the checkout and its recorded data, whichever tier (tests/unit, tests/system) they sit in."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout
TESTS = ROOT / "tests"
DATA = TESTS / "data"  # recorded probe output, snapshots, saved reports, real captures
GOLDEN = TESTS / "golden"  # golden renderer output, tests/unit/test_render_golden.py
CONSUMERS = TESTS / "consumers"  # npm consumers (axe-core, yaml-language-server), .ci/setup.d/50-consumers.sh
SEEDS = DATA / "seeds"  # valid input files (waivers, inventory, baseline, rules config) the fuzzers mutate
