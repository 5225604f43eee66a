"""One section list (collect/section_list.py): probe.sh, the image reader and the collectors agree with it.

probe.sh is read as text (its top-level `run NAME FUNC` / `sec NAME;` lines) and also run for real
(tests/system/test_probe_local.py compares a real run's sections with the same list); the image reader is run
on a small real root; the collectors are the registry the snapshot uses. A section gained or lost in
any of them fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from auditor.collect.collectors import COLLECTORS
from auditor.collect.probe import probe_request, probe_script
from auditor.collect.section_list import SECTIONS, areas, image_section_names, probe_section_names, sections_for
from auditor.collect.sections import split_sections
from auditor.models import HostSpec
from auditor.transport.image import ImageTransport
from tests.unit.test_image_transport import make_root

_TOP_LEVEL = re.compile(r"^(?:run ([a-z_]+) s_[a-z_]+$|sec ([a-z_]+);)", re.M)


def probe_sh_sections(script: str) -> tuple[str, ...]:
    """The sections probe.sh's main sequence prints, in order (one `run`/`sec` line each)."""
    return tuple(a or b for a, b in _TOP_LEVEL.findall(script))


def test_probe_sh_prints_the_declared_sections_in_order() -> None:
    assert probe_sh_sections(probe_script()) == probe_section_names()


@pytest.mark.parametrize("edit", ["drop", "add"])
def test_the_probe_check_fails_when_probe_sh_gains_or_loses_a_section(edit: str) -> None:
    script = probe_script()
    changed = (script.replace("run eks s_eks\n", "", 1) if edit == "drop"
               else script.replace("run eks s_eks\n", "run eks s_eks\nrun extra s_extra\n", 1))
    assert changed != script
    assert probe_sh_sections(changed) != probe_section_names()


def test_image_reader_prints_the_declared_sections_in_order(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    request = probe_request(["kubelet"])
    result = ImageTransport(HostSpec("img", f"image://{root}")).run(request, deadline_s=30)
    sections, done = split_sections(result.stdout, request.nonce)
    assert done
    assert tuple(sections) == image_section_names()
    runtime = {s.name for s in SECTIONS if s.runtime}
    assert {name for name, sec in sections.items() if sec.rc == 5} == runtime  # RC_OFFLINE: not applicable


def test_collectors_read_exactly_the_declared_sections() -> None:
    assert set(COLLECTORS) == set(areas())
    printed = set(probe_section_names())
    for area, collector in COLLECTORS.items():
        assert (collector.required, collector.optional) == sections_for(area), area
        assert set(collector.required + collector.optional) <= printed, area


def test_every_section_has_a_reader_and_one_name() -> None:
    names = [s.name for s in SECTIONS]
    assert len(names) == len(set(names))
    for spec in SECTIONS:
        assert spec.required_by or spec.optional_for or spec.reader, f"{spec.name}: nothing reads it"
