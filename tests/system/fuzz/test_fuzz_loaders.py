"""Fuzz every loader through the real CLI on mutated valid files (text- and structure-level mutations).

Seeds: the built-in rule packs (rules/), tests/data (snapshots, saved reports) and tests/data/seeds
(waivers, inventory, baseline, rules config). Commands are the ones that load a file without touching a
host: `rules check`, `rules list`, `diff`, `report`, `baseline capture --snapshot`.

Contract: exit 0, 1 or 2 (never a traceback, never 4 = internal error); exit 2 names the file.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from auditor.cli import build_parser, main
from auditor.context import Env
from tests.paths import ROOT, SEEDS
from tests.system.fuzz import fuzz_settings, ran
from tests.system.fuzz.strategies import (
    HOSTILE_VALUES,
    JSON_TOKENS,
    YAML_TOKENS,
    mutated_doc,
    mutated_text,
)

REPO = ROOT
SNAPSHOT = REPO / "tests" / "data" / "snapshots" / "fleet-b1.json"
GOLDEN = REPO / "tests" / "data" / "snapshots" / "fleet-golden.json"
RULE_PACKS = sorted((REPO / "rules").glob("*.yaml"))
REPORTS = sorted((REPO / "tests" / "data" / "reports").glob("*.json"))
SNAPSHOTS = [SNAPSHOT, GOLDEN]


@cache
def debug_flag() -> list[str]:
    """`--debug` (the traceback of an internal error, shown when an example fails) where the CLI has it."""
    return ["--debug"] if "--debug" in build_parser().format_help() else []


def cli(argv: list[str]) -> tuple[int, str, str]:
    """The real CLI in-process; an exception escaping main() is a crash and fails the example."""
    out, err = io.StringIO(), io.StringIO()
    code = main([*debug_flag(), *argv], Env(out, err))
    return code, out.getvalue(), err.getvalue()


def assert_clean_exit(code: int, err: str, path: Path, allowed: tuple[int, ...] = (0, 1, 2)) -> None:
    assert code in allowed, f"exit {code} (a crash?): {err[-3000:]}"
    assert "Traceback" not in err, err[-3000:]
    if code == 2:
        assert path.name in err, f"exit 2 without naming {path.name}: {err[-1000:]}"


@cache
def seed_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def seed_doc(path: Path) -> Any:
    text = seed_text(path)
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def dump(doc: Any, suffix: str) -> str:
    if suffix == ".json":
        return json.dumps(doc, default=str)
    try:
        return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False, width=200)
    except (yaml.YAMLError, TypeError, ValueError):  # PyYAML cannot write it: JSON is YAML too
        return json.dumps(doc, default=str)


@st.composite
def mutated_file(draw: Callable, seed: Path) -> str:
    """Text of `seed` mutated as text (lines, bytes, numbers, format-hostile tokens) or as a document."""
    tokens = JSON_TOKENS if seed.suffix == ".json" else YAML_TOKENS
    if draw(st.booleans()):
        return draw(mutated_text(seed_text(seed), tokens=tokens), label="text")
    return dump(draw(mutated_doc(seed_doc(seed)), label="doc"), seed.suffix)


class Scratch:
    """A fresh directory per example (hypothesis reuses function-scoped fixtures across examples)."""

    def __enter__(self) -> Path:
        self.path = Path(tempfile.mkdtemp(prefix="ami-fuzz-"))
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_bytes(text.encode("utf-8", "surrogatepass"))  # a lone surrogate becomes invalid UTF-8 on disk
    return path


@given(seed=st.sampled_from(RULE_PACKS), data=st.data())
@fuzz_settings(60)
def test_rule_packs(seed: Path, data: st.DataObject) -> None:
    """A mutated rule pack, checked and then run on a real snapshot (the judge sees the mutated rules)."""
    ran("loaders.rule_pack")
    with Scratch() as tmp:
        path = write(tmp, seed.name, data.draw(mutated_file(seed)))
        code, _, err = cli(["rules", "check", str(path), "--no-builtin-rules", "--snapshot", str(SNAPSHOT)])
        assert_clean_exit(code, err, path, (0, 2))


@given(data=st.data())
@fuzz_settings(40)
def test_waivers(data: st.DataObject) -> None:
    ran("loaders.waivers")
    with Scratch() as tmp:
        path = write(tmp, "waivers.yaml", data.draw(mutated_file(SEEDS / "waivers.yaml")))
        code, _, err = cli(["rules", "check", str(REPO / "rules"), "--waivers", str(path)])
        assert_clean_exit(code, err, path, (0, 2))


@given(data=st.data())
@fuzz_settings(40)
def test_baselines(data: st.DataObject) -> None:
    ran("loaders.baseline")
    with Scratch() as tmp:
        path = write(tmp, "baseline.yaml", data.draw(mutated_file(SEEDS / "baseline.yaml")))
        code, _, err = cli(["diff", str(path), str(GOLDEN)])
        assert_clean_exit(code, err, path)


@given(data=st.data())
@fuzz_settings(40)
def test_inventories(data: st.DataObject) -> None:
    """The inventory is loaded (and every target parsed) before `diff` reads its two snapshot files."""
    ran("loaders.inventory")
    with Scratch() as tmp:
        path = write(tmp, "fleet.yaml", data.draw(mutated_file(SEEDS / "inventory.yaml")))
        code, _, err = cli(["diff", "-i", str(path), str(SNAPSHOT), str(GOLDEN)])
        assert_clean_exit(code, err, path)


@given(data=st.data())
@fuzz_settings(40)
def test_rules_configs(data: st.DataObject) -> None:
    ran("loaders.rules_config")
    with Scratch() as tmp:
        path = write(tmp, "rules-config.yaml", data.draw(mutated_file(SEEDS / "rules-config.yaml")))
        code, _, err = cli(["rules", "list", "--rules-config", str(path)])
        assert_clean_exit(code, err, path, (0, 2))


@given(pack_param=st.sampled_from(["cgroups.dying_warn", "kernel.thp_allowed", "kernel.sysctl_expected",
                                   "cpu.average_system_below", "provenance.allowed_source_hosts", "x.y", "cgroups."]),
       value=st.one_of(st.sampled_from(YAML_TOKENS), st.text(max_size=30),
                       st.sampled_from(HOSTILE_VALUES).map(lambda v: dump(v, ".yaml").strip())))
@fuzz_settings(40)
def test_set_values(pack_param: str, value: str) -> None:
    ran("loaders.set")
    code, _, err = cli(["rules", "list", "--set", f"{pack_param}={value}"])
    assert code in (0, 2), f"exit {code}: {err[-3000:]}"
    assert "Traceback" not in err


@given(seed=st.sampled_from(REPORTS), fmt=st.sampled_from(["json", "html", "md", "junit"]), data=st.data())
@fuzz_settings(50)
def test_saved_reports(seed: Path, fmt: str, data: st.DataObject) -> None:
    ran("loaders.report")
    with Scratch() as tmp:
        path = write(tmp, "scan.json", data.draw(mutated_file(seed)))
        code, _, err = cli(["report", str(path), "--format", fmt])
        assert_clean_exit(code, err, path, (0, 2))


@given(seed=st.sampled_from(SNAPSHOTS), command=st.sampled_from(["diff", "baseline", "rules"]), data=st.data())
@fuzz_settings(50)
def test_snapshots(seed: Path, command: str, data: st.DataObject) -> None:
    """A mutated snapshot diffed against golden, captured as a baseline, or judged by the built-in rules."""
    ran("loaders.snapshot")
    with Scratch() as tmp:
        path = write(tmp, "host.json", data.draw(mutated_file(seed)))
        argv = {"diff": ["diff", str(path), str(GOLDEN)],
                "baseline": ["baseline", "capture", "--snapshot", str(path), "-o", "-"],
                "rules": ["rules", "check", str(REPO / "rules"), "--snapshot", str(path)]}[command]
        code, _, err = cli(argv)
        assert_clean_exit(code, err, path)


# ---- the crashes this fuzzer found, kept as fixed examples (each exited 4 before its fix) ----------------

def _pack(when: str) -> str:
    return ("pack: fz\nrules:\n  - id: fz.r\n    name: r\n    title: t\n    severity: low\n"
            f"    when: '{when}'\n")


def _report_with_list_severity() -> str:
    doc = json.loads(seed_text(REPORTS[0]))
    doc["rules"][0]["severity"] = ["high"]
    return json.dumps(doc)


FOUND: list[tuple[str, str, Callable[[Path], list[str]], int]] = [
    ("baseline.yaml", "baseline: !!timestamp x\n", lambda p: ["diff", str(p), str(GOLDEN)], 2),
    ("baseline.yaml", "baseline: !!int x\n", lambda p: ["diff", str(p), str(GOLDEN)], 2),
    ("rules-config.yaml", "kernel:\n  thp_allowed: [2026-01-01]\n",
     lambda p: ["rules", "list", "--rules-config", str(p)], 0),
    ("pack.yaml", _pack("facts.cgroups.memory.dying > " + "9" * 5000),
     lambda p: ["rules", "check", str(p), "--no-builtin-rules"], 2),
    ("pack.yaml", _pack("(" * 3000 + "facts.cgroups.memory.dying" + ")" * 3000),
     lambda p: ["rules", "check", str(p), "--no-builtin-rules"], 2),
    ("scan.json", _report_with_list_severity(), lambda p: ["report", str(p), "--format", "html"], 2),
]


@pytest.mark.parametrize(("name", "text", "argv", "expected"), FOUND, ids=range(len(FOUND)))
def test_loader_crashes_found_by_fuzzing_stay_fixed(name: str, text: str, argv: Callable[[Path], list[str]],
                                                    expected: int) -> None:
    with Scratch() as tmp:
        path = write(tmp, name, text)
        code, _, err = cli(argv(path))
        assert code == expected, err
        assert_clean_exit(code, err, path)


@pytest.mark.parametrize("value", ["!!timestamp x", "!!int x", "!!float x", "!!bool x"])
def test_set_tag_crashes_found_by_fuzzing_stay_fixed(value: str) -> None:
    code, _, err = cli(["rules", "list", "--set", f"cgroups.dying_warn={value}"])
    assert code == 2 and "Traceback" not in err, err
