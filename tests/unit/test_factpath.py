"""FactPath: one parser for the schema, row and read dialects, checked over every path the auditor really
writes (facts.yaml, the built-in rules' reads, baselines captured from the recorded fleet, the fuzz seed,
the golden reports) and, property-style, against the ad-hoc splits it replaced (kept here as oracles)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from auditor import factpath
from auditor.collect.schema import fact_paths
from auditor.compare.capture import capture
from auditor.compare.normalize import normalize
from auditor.factpath import FactPath, area_of, parse
from auditor.judge import rules as rules_mod
from tests.paths import SEEDS, TESTS

FLEET = TESTS / "data" / "compare" / "fleet"

# The parsers FactPath replaced, verbatim, as oracles: normalize.split_path's pattern, the area splits of
# drift/capture/baseline, rules._area_keys' and shapes._add's dot splits.
_OLD_ROW = re.compile(r"^(?P<coll>.*?)\[(?P<key>[^\]]*)\](?:\.(?P<field>[^\[]+))?$")


def old_split(path: str) -> tuple[str | None, str | None, str]:
    m = _OLD_ROW.match(path)
    return (None, None, path) if not m else (m["coll"], m["key"], m["field"] or "")


def old_area(path: str) -> str:
    return path.split(".")[1].split("[")[0]


def old_segments(path: str) -> list[tuple[str, bool]]:
    return [(s[:-2], True) if s.endswith("[]") else (s, False) for s in path.split(".")]


def check(path: str) -> FactPath:
    """Every property the replaced parsers gave, for one real path."""
    fp = parse(path)
    assert fp.format() == path == str(fp)
    assert (fp.collection, fp.key, fp.field) == old_split(path)
    if path.startswith("facts."):
        assert fp.area == area_of(path) == old_area(path)
        assert fp.root == "facts"
    return fp


def test_every_declared_fact_round_trips_and_any_row_is_an_empty_key() -> None:
    paths = list(fact_paths())
    assert len(paths) > 200
    for path in paths:
        fp = check(path)
        assert list(fp.steps()) == old_segments(path)
        if "[]" in path:  # the schema's any row
            assert fp.key == "" and fp.collection == path.rsplit("[]", 1)[0]
    units = parse("facts.systemd.units[].restarts")
    assert (units.area, units.collection, units.key, units.field) == ("systemd", "facts.systemd.units", "", "restarts")
    nested = parse("facts.binaries[].evidence[].file")
    assert (nested.collection, nested.field) == ("facts.binaries[].evidence", "file")


def test_every_path_the_builtin_rules_read_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    """The paths come from the real rule compiler: a spy around _area_keys records what each rule reads."""
    seen: set[str] = set()
    real = rules_mod._area_keys

    def spy(reads: rules_mod.Reads, areas: set[str]) -> tuple[tuple[str, str | None], ...]:
        seen.update(reads.paths | reads.bases)
        return real(reads, areas)

    monkeypatch.setattr(rules_mod, "_area_keys", spy)
    loaded = rules_mod.load_rules().rules
    assert len(loaded) > 20 and len(seen) > 50
    for path in sorted(seen):
        fp = check(path)
        assert list(fp.steps()) == old_segments(path)
    assert {parse(p).area for p in seen if p.startswith("facts.")} >= {"systemd", "cgroups", "binaries", "kernel"}


def baseline_paths() -> list[str]:
    """Paths of the baselines the tests use: captured from every recorded fleet host, and the fuzz seed."""
    paths: set[str] = set()
    for snap in sorted(FLEET.glob("*.json")):
        doc = json.loads(snap.read_text())
        paths.update(capture(doc)[1])
        paths.update(normalize(doc).flat)
    seed = yaml.safe_load((SEEDS / "baseline.yaml").read_text())
    paths.update(seed["expect"])
    paths.update(seed["complete"])
    paths.update(seed["ignore"])
    return sorted(paths)


def test_every_baseline_and_normalized_path_round_trips() -> None:
    paths = baseline_paths()
    assert len(paths) > 500
    rows = [check(p) for p in paths]
    assert {fp.key for fp in rows if fp.collection == "facts.kernel.sysctls"} >= {"vm.swappiness"}
    swap = parse("facts.kernel.sysctls[vm.swappiness]")
    assert (swap.area, swap.collection, swap.key, swap.field) == ("kernel", "facts.kernel.sysctls", "vm.swappiness", "")
    stats = parse("facts.network.interfaces[eth0].stats[tx_timeout]")
    assert (stats.area, stats.collection, stats.key) == (
        "network", "facts.network.interfaces[eth0].stats", "tx_timeout")
    plain = parse("facts.os.id")
    assert (plain.collection, plain.key, plain.field, plain.is_row) == (None, None, "facts.os.id", False)


def test_every_path_in_the_golden_reports_round_trips() -> None:
    paths: set[str] = set()
    for report in (TESTS / "data" / "reports").glob("*.json"):
        doc = json.loads(report.read_text())
        paths.update(d["path"] for d in doc.get("drift") or [])
        paths.update(split["path"] for split in (doc.get("comparison") or {}).get("splits") or [])
    assert paths
    for path in paths:
        check(path)


_NAMES = st.sampled_from(["facts", "systemd", "units", "kernel", "sysctls", "binaries", "stats", "a", ""])
_KEYS = st.text(alphabet="ab.[]-_/ \n", max_size=6)


@st.composite
def row_paths(draw: st.DrawFn) -> str:
    """Paths as normalize writes them, with hostile keys (dots, brackets, newlines), and mangled ones."""
    out = "facts." + draw(_NAMES)
    for _ in range(draw(st.integers(0, 3))):
        out += draw(st.sampled_from([f".{draw(_NAMES)}", f"[{draw(_KEYS)}]"]))
    return out


@given(row_paths())
def test_parse_splits_exactly_as_the_old_parsers_on_any_path(path: str) -> None:
    fp = parse(path)
    assert (fp.collection, fp.key, fp.field) == old_split(path)
    assert fp.format() == path
    assert fp.area == old_area(path)


@given(st.text(alphabet="ab.[]\n", max_size=12))
def test_format_inverts_parse_on_any_text(text: str) -> None:
    fp = parse(text)
    assert fp.format() == text
    if fp.collection is not None and fp.key is not None:
        assert factpath.row(fp.collection, fp.key, fp.field) == fp


def test_tokens_are_strict_for_hand_written_paths() -> None:
    assert parse("facts.binaries[kubelet].sha256").tokens() == (("binaries", None), (None, "kubelet"), ("sha256", None))
    assert parse("facts.binaries[].sha256").tokens() is None  # an empty key is no row a host has
    assert parse("facts.binaries[a[b].sha256").tokens() is None
    assert parse("host.az").tokens() == (("az", None),)
    assert parse("facts").tokens() is None


_OLD_SERIES_TOKEN = re.compile(r"\.?([^.\[\]]+)|\[([^\]]*)\]")


def old_series_steps(path: str) -> list[tuple[str, bool]] | int:
    """history/series.parse_path's tokenizer as it was: the steps, or the failing position."""
    steps: list[tuple[str, bool]] = []
    pos = 0
    while pos < len(path):
        m = _OLD_SERIES_TOKEN.match(path, pos)
        if m is None or m.end() == pos:
            return pos
        steps.append((m[1], False) if m[1] is not None else (m[2], True))
        pos = m.end()
    return steps


def old_root_key(path: str) -> str:
    return path.partition(".")[2].split(".")[0].split("[")[0]


@given(st.one_of(row_paths(), st.text(alphabet="ab.[]", max_size=10)))
def test_selector_steps_and_root_keys_match_the_old_splits(path: str) -> None:
    want = old_series_steps(path)
    try:
        got: list[tuple[str, bool]] | int = factpath.selector_steps(path)
    except ValueError as exc:
        got = exc.args[0]
    assert got == want
    first = path.split(".")[0]
    if parse(path).steps()[0] == (first, False):
        assert parse(path).area == old_root_key(path)


def test_the_area_is_read_from_the_whole_text_as_before() -> None:
    for path in ("[.]", "facts[a.b].c", "host.az", "facts.binaries[kube.let].sha256"):
        assert parse(path).area == area_of(path) == old_root_key(path)


def test_selector_steps_of_a_history_path() -> None:
    assert factpath.selector_steps("facts.systemd.units[ecs.service].restarts") == [
        ("facts", False), ("systemd", False), ("units", False), ("ecs.service", True), ("restarts", False)]
    with pytest.raises(ValueError) as exc:
        factpath.selector_steps("facts.a]")
    assert exc.value.args == (7,)
