"""Fuzz every probe parser and build_snapshot on random text and on mutated real probe output.

Contract: a parser never raises, and what it returns validates against its part of the snapshot JSON
Schema and serialises as strict JSON (no NaN/Infinity). build_snapshot never raises; every area has
facts or an error entry, and no error entry is a swallowed parser exception.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from functools import cache
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from auditor.collect import sections as sections_mod
from auditor.collect import snapshot as snapshot_mod
from auditor.collect.collectors import COLLECTORS
from auditor.collect.parsers.identity import parse_host
from auditor.collect.schema import snapshot_json_schema
from auditor.collect.sections import Section
from auditor.models import CommandResult, HostSpec
from tests.paths import DATA
from tests.system.fuzz import fuzz_settings, ran
from tests.system.fuzz.strategies import mutated_text

PROBE_DATA = DATA / "probe"
RECORDED = sorted(p.parent.name for p in PROBE_DATA.glob("*/raw.txt"))
# Start/end markers with or without the per-run nonce (collect/framing.py), so the seeds read either way.
_START = re.compile(r"^@@AMI-AUDITOR-SECTION (?:(?P<nonce>[0-9a-f]{32}) )?(?P<name>[a-z_]+)@@$")
_END = re.compile(r"^@@AMI-AUDITOR-END (?:[0-9a-f]{32} )?(?P<name>[a-z_]+) rc=\d+@@$")
_MARKER = re.compile(r"^(@@AMI-AUDITOR-(?:SECTION|END|DONE))(?: [0-9a-f]{32})?(?=[ @])", re.M)
NONCE = "0123456789abcdef0123456789abcdef"
TAMPERED: type[Exception] = getattr(sections_mod, "TamperedOutput", ())  # type: ignore[assignment]
UNPARSABLE: type[Exception] = getattr(sections_mod, "UnparsableOutput", ())  # type: ignore[assignment]


@cache
def raw(os_name: str) -> str:
    return (PROBE_DATA / os_name / "raw.txt").read_text(encoding="utf-8")


@cache
def bodies(os_name: str) -> dict[str, str]:
    """Section bodies of a recorded probe run (parsers' real inputs), read without sections.py."""
    out: dict[str, str] = {}
    name, lines = None, []
    for line in raw(os_name).splitlines():
        if name is None:
            m = _START.match(line)
            if m:
                name, lines = m.group("name"), []
        elif (m := _END.match(line)) and m.group("name") == name:
            out[name] = "\n".join(lines)
            name = None
        else:
            lines.append(line)
    return out


@cache
def area_validator(area: str) -> jsonschema.protocols.Validator:
    schema = snapshot_json_schema()
    sub = schema["properties"]["host"] if area == "host" else schema["properties"]["facts"]["properties"][area]
    return jsonschema.Draft202012Validator(sub)


def assert_valid(area: str, value: Any) -> None:
    """`value` validates against the area's schema and is strict JSON (a snapshot must be writable)."""
    error = next(iter(area_validator(area).iter_errors(value)), None)
    assert error is None, f"{area}: {'/'.join(map(str, error.absolute_path))}: {error.message}"
    json.dumps(value, allow_nan=False)


def parse_area(area: str, texts: list[str]) -> Any:
    """The area's parser on `texts`; TamperedOutput (a repeated key only a forger prints) and UnparsableOutput
    (a command's answer that is not its format) are the parsers' documented error signals, which
    run_collector turns into a failed area: it returns None here."""
    collector = COLLECTORS[area]
    try:
        return collector.parse(*texts[: len(collector.required) + len(collector.optional)])
    except (TAMPERED, UNPARSABLE):
        return None


def section_names(area: str) -> tuple[str, ...]:
    return COLLECTORS[area].required + COLLECTORS[area].optional


@given(area=st.sampled_from(sorted(COLLECTORS)), data=st.data())
@fuzz_settings(150)
def test_parsers_on_random_text(area: str, data: st.DataObject) -> None:
    ran("parsers.random_text")
    texts = [data.draw(st.text(max_size=300), label=name) for name in section_names(area)]
    value = parse_area(area, texts)
    if value is not None:
        assert_valid(area, value)


@given(area=st.sampled_from(sorted(COLLECTORS)), os_name=st.sampled_from(RECORDED), data=st.data())
@fuzz_settings(200)
def test_parsers_on_mutated_probe_output(area: str, os_name: str, data: st.DataObject) -> None:
    ran("parsers.mutated")
    texts = []
    for name in section_names(area):
        seed = bodies(os_name).get(name, "")
        texts.append(data.draw(st.one_of(st.just(seed), mutated_text(seed)), label=name))
    value = parse_area(area, texts)
    if value is not None:
        assert_valid(area, value)


@given(os_name=st.sampled_from(RECORDED), data=st.data())
@fuzz_settings(80)
def test_host_identity_on_mutated_probe_output(os_name: str, data: st.DataObject) -> None:
    ran("parsers.host")
    sections = {}
    for name in ("identity", "cloudinit", "imds"):
        body = data.draw(st.one_of(mutated_text(bodies(os_name).get(name, "")), st.text(max_size=200)), label=name)
        sections[name] = Section(name, body, 0)
    assert_valid("host", parse_host(sections))


TIMES = "0m0.12s 0m0.03s\n0m0.15s 0m0.02s"  # the shell's `times` output (the probe's cost section)


@given(text=st.one_of(mutated_text(TIMES), st.text(alphabet="0123456789ms. \n-", max_size=60)))
@fuzz_settings(300)
def test_probe_cost_on_mutated_times(text: str) -> None:
    ran("parsers.cost")
    cpu_s = snapshot_mod.probe_cpu_seconds(text)
    assert cpu_s is None or (isinstance(cpu_s, float) and math.isfinite(cpu_s) and cpu_s >= 0)


# ---- build_snapshot end to end, through whatever framing signature is on disk ----------------------------

def _wants_nonce() -> bool:
    """Whether this checkout's build_snapshot (or split_sections) takes the per-run nonce."""
    build = inspect.signature(snapshot_mod.build_snapshot).parameters
    split = inspect.signature(snapshot_mod.split_sections).parameters
    return "nonce" in build or "nonce" in split


def framed(text: str) -> str:
    """Recorded output re-framed for this checkout: markers carry NONCE when framing has nonces."""
    return _MARKER.sub(lambda m: f"{m.group(1)} {NONCE}" if _wants_nonce() else m.group(1), text)


def build(stdout: str) -> dict[str, Any]:
    """Call build_snapshot as the signature on disk wants (nonce as a keyword, or on the result)."""
    spec = HostSpec("fuzz", "ssh://fuzz")
    params = inspect.signature(snapshot_mod.build_snapshot).parameters
    result_fields = inspect.signature(CommandResult).parameters
    kwargs: dict[str, Any] = {"collected_at": "2026-01-01T00:00:00Z"}
    if "nonce" in params:
        kwargs["nonce"] = NONCE
    result_kwargs = {"nonce": NONCE} if "nonce" in result_fields else {}
    return snapshot_mod.build_snapshot(spec, CommandResult(stdout, "", 0, 1.0, **result_kwargs), **kwargs)


@cache
def snapshot_validator() -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator(snapshot_json_schema())


def assert_snapshot_contract(snap: dict[str, Any]) -> None:
    error = next(iter(snapshot_validator().iter_errors(snap)), None)
    assert error is None, f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
    json.dumps(snap, allow_nan=False)
    for area in COLLECTORS:
        assert snap["facts"][area] is not None or area in snap["errors"], area
    crashed = {a: e for a, e in snap["errors"].items() if e.startswith("parser error")}
    assert not crashed, crashed


def test_recorded_output_reframed_builds_a_clean_snapshot() -> None:
    """The seeds themselves (no mutation) give complete snapshots: the adapter frames them right."""
    for os_name in RECORDED:
        snap = build(framed(raw(os_name)))
        assert_snapshot_contract(snap)
        assert snap["errors"] == {}, (os_name, snap["errors"])


@given(os_name=st.sampled_from(RECORDED), data=st.data())
@fuzz_settings(60)
def test_build_snapshot_on_mutated_probe_output(os_name: str, data: st.DataObject) -> None:
    ran("snapshot.mutated")
    stdout = data.draw(mutated_text(framed(raw(os_name)), max_ops=6), label="stdout")
    assert_snapshot_contract(build(stdout))


@given(stdout=st.text(max_size=2000))
@fuzz_settings(40)
def test_build_snapshot_on_random_text(stdout: str) -> None:
    ran("snapshot.random_text")
    snap = build(stdout)
    assert_snapshot_contract(snap)
    assert set(snap["errors"]) >= set(COLLECTORS)  # nothing framed: every area is an explicit unknown


# ---- the crashes this fuzzer found, kept as fixed examples (each raised before its fix) -----------------

FOUND = [
    ("network", ["@ \ninfo driver: ena", ""]),  # IndexError: an interface header with no name
    ("cgroups", ["fstype=tmpfs\n--- proc_cgroups\ncpuset\t6\t\x1240\t1"]),  # ValueError: int('\x1240')
    ("cgroups", ["fstype=tmpfs\n--- proc_cgroups\nmemory 1 inf 1"]),  # ValueError: int('inf')
    ("cpu", ["--- stat1\ncpu 1 2\ncpu0 1 2\n--- stat2\ncpu 3 4\ncpu0 3 4"]),  # KeyError: short core, no system_pct
    ("cpu", ["--- stat1\ncpu0 ² 1\n--- stat2\ncpu0 1 1"]),  # ValueError: '²'.isdigit() but int('²') fails
    ("cpu", ["--- stat1\ncpu0 " + "9" * 5000 + "\n--- stat2\ncpu0 1"]),  # ValueError: int digit limit
    ("cpu", ["--- stat1\ncpuX 1 2 3 4 5 6 7 8\n--- stat2\ncpuX 1 2 3 4 5 6 7 8"]),  # ValueError: int('X')
    ("cpu", ["window_s=nan"]),  # NaN in facts: the snapshot could not be written as JSON
    ("systemd", ["systemd 252", "", "", "ecs.service ²"]),  # ValueError: journal count '²'
]
FOUND_HOST = [
    {"cloudinit": "5"},  # AttributeError: 'int' object has no attribute 'get'
    {"cloudinit": '{"v1": {"availability_zone": 5}}'},  # TypeError: an int az, sliced for the region
    {"cloudinit": "[" * 100_000 + "]" * 100_000},  # RecursionError
    {"cloudinit": '{"v1": {"region": ' + "9" * 5000 + "}}"},  # ValueError: int digit limit
    {"identity": "uptime=nan 1"},  # NaN uptime: the snapshot could not be written as JSON
]


@pytest.mark.parametrize(("area", "texts"), FOUND, ids=[f"{a}-{i}" for i, (a, _) in enumerate(FOUND)])
def test_parser_crashes_found_by_fuzzing_stay_fixed(area: str, texts: list[str]) -> None:
    value = parse_area(area, texts + [""] * (len(section_names(area)) - len(texts)))
    assert value is not None
    assert_valid(area, value)


@pytest.mark.parametrize("bodies_", FOUND_HOST, ids=range(len(FOUND_HOST)))
def test_identity_crashes_found_by_fuzzing_stay_fixed(bodies_: dict[str, str]) -> None:
    host = parse_host({name: Section(name, body, 0) for name, body in bodies_.items()})
    assert_valid("host", host)
    assert host["az"] is None and host["region"] is None and host["uptime_s"] is None


@pytest.mark.parametrize("text", ["0m..s 0m0.02s", "0m1.2.3s", "9" * 5000 + "m1s"],
                         ids=["dots", "two-points", "5000-digits"])
def test_probe_cost_crashes_found_by_fuzzing_stay_fixed(text: str) -> None:
    cpu_s = snapshot_mod.probe_cpu_seconds(text)
    assert cpu_s is None or math.isfinite(cpu_s)
