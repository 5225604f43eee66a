"""Hand-edited and malformed baselines: every problem names the file and line, and exits 2 with nothing
written; the documented edits (delete a line, allow a list, a pattern) are honoured."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.compare.baseline import load_baseline
from auditor.compare.capture import capture, render
from auditor.context import Env
from auditor.errors import InputError
from tests.paths import DATA

FLEET = DATA / "compare" / "fleet"
HEAD = "baseline: ami-auditor/baseline/1\nsource: {host: golden}\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "golden.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("body", "line", "words"), [
    ("expect:\n  facts.os.id: debian\n  facts.os.id: ubuntu\n", 5, "duplicate key"),
    ("expect:\n  facts.os.id: [debian\n", 5, "invalid YAML"),
    ("expect:\n  facts.os.nope: 1\n", 4, "unknown fact path"),
    ("expect:\n  facts.kernel: x\n", 4, "unknown fact path"),
    ("expect:\n  facts.systemd.units[ecs.service].restarts: 0\n", 4, "volatile"),
    ("expect:\n  facts.os.id: debian\n  facts.binaries[kubelet].version: {pattern: '(unclosed'}\n", 5,
     "bad pattern"),
    ("expect:\n  facts.binaries[kubelet].version: {regex: x}\n", 4,
     "unknown key 'regex' in facts.binaries[kubelet].version (allowed: pattern)"),
    ("expect:\n  facts.systemd.enabled_units[ssh.service]: yes please\n", 4, "true or false"),
    ("expect:\n  facts.kernel.thp_enabled: on\n", 4, "quote it"),
    ("expect:\n  facts.kernel.hugepages_total: many\n", 4, "number"),
    ("expect:\n  facts.kernel.thp_enabled: []\n", 4, "empty list"),
    ("expect:\n  facts.kernel.thp_enabled:\n    - madvise\n    - {a: 1}\n", 6, "scalars"),
    ("expect:\n  facts.kernel.thp_enabled:\n", 4, "null"),
    ("expect: [facts.os.id]\n", 3, "expect must be a mapping of fact path → expected value, not a list"),
    ("expect:\n  facts.os.id: debian\nextra: 1\n", 5, "unknown key 'extra'"),
    ("complete: [facts.os]\nexpect:\n  facts.os.id: debian\n", 3, "not a keyed list"),
    ("ignore: [1]\nexpect:\n  facts.os.id: debian\n", 3, "ignore[0] must be a non-empty string, not an integer 1"),
    # caught by schemas/baseline.schema.json
    ("expect:\n  facts.binaries[kubelet].version: {pattern: 5}\n", 4,
     "facts.binaries[kubelet].version: pattern must be a string, not an integer 5"),
    ("complete: facts.binaries\nexpect:\n  facts.os.id: debian\n", 3, "complete must be a list of strings"),
    ("expect:\n  facts.os.id: debian\n  facts.kernel.thp_enabled:\n    - [never]\n", 6,
     "facts.kernel.thp_enabled[0] must be a scalar"),
])
def test_broken_baselines_name_file_and_line(tmp_path: Path, body: str, line: int, words: str) -> None:
    path = write(tmp_path, HEAD + body)
    with pytest.raises(InputError) as err:
        load_baseline(str(path))
    assert err.value.path == str(path)
    assert err.value.line == line, str(err.value)
    assert words in err.value.message


def test_not_a_baseline_at_all(tmp_path: Path) -> None:
    for text, line in (("", 1), ("- a\n- b\n", 1), ("hosts: []\n", 1), ("baseline: ami-auditor/baseline/9\n", 1)):
        with pytest.raises(InputError) as err:
            load_baseline(str(write(tmp_path, text)))
        assert err.value.line == line


def test_scan_with_a_broken_baseline_exits_2_before_any_host_and_writes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "expect:\n  facts.os.id: debian\n  facts.cpu.max_core: 3\n")
    out_dir = tmp_path / "out"
    err = io.StringIO()
    # ssh to a closed loopback port: if the baseline were not checked first, this would try to connect
    code = main(["scan", "ssh://root@127.0.0.1:1", "--baseline", str(path), "--out", str(out_dir)],
                Env(stdout=io.StringIO(), stderr=err))
    assert code == 2
    assert f"{path}:5:" in err.getvalue() and "volatile" in err.getvalue()
    assert not out_dir.exists()


def test_hand_edits_allowed_values_and_patterns_load(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + """\
complete: [facts.binaries]
ignore: ['facts.packages.items[linux-*]']
expect:
  facts.kernel.thp_enabled: [madvise, never]
  facts.binaries[kubelet].version: {pattern: 'Kubernetes v1\\.29\\.3(-eks-.*)?'}
  facts.kernel.sysctls[vm.swappiness]: 60
  facts.kernel.hugepages_total: 0
  facts.systemd.enabled_units[ssh.service]: true
""")
    baseline = load_baseline(str(path))
    thp = baseline.expect["facts.kernel.thp_enabled"]
    assert thp.matches("never") and thp.matches("madvise") and not thp.matches("always")
    version = baseline.expect["facts.binaries[kubelet].version"]
    assert version.matches("Kubernetes v1.29.3") and version.matches("Kubernetes v1.29.3-eks-ae9a62a")
    assert not version.matches("Kubernetes v1.29.30")  # full match, not search
    assert baseline.expect["facts.kernel.sysctls[vm.swappiness]"].matches("60")  # unquoted 60: a string fact
    assert not baseline.expect["facts.kernel.hugepages_total"].matches("0")
    assert baseline.ignored("facts.packages.items[linux-image-amd64].version")
    assert baseline.summary()["source_host"] == "golden"


def test_a_captured_baseline_loads_back_and_leaves_volatile_facts_out(tmp_path: Path) -> None:
    snapshot = json.loads((FLEET / "golden.json").read_text())
    source, expect = capture(snapshot)
    text = render(source, expect)
    baseline = load_baseline(str(write(tmp_path, text)))
    assert baseline.source["host"] == "golden" and baseline.source["ami_id"] == "ami-0c7217cdde317cfec"
    assert set(baseline.expect) == set(expect)
    assert baseline.expect["facts.systemd.unit_files[ecs.service].state"].matches("disabled")
    assert baseline.expect["facts.binaries[kubelet].source_host"].matches("amazon-eks.s3.us-west-2.amazonaws.com")
    facts = text.split("expect:")[1]
    for word in ("host.", "uptime", "boot_id", "restarts", "main_pid", "dying", "mtime", "machine_id", ".cores["):
        assert word not in facts, word
    assert "unit_files[systemd-journald.service]" not in text  # static: not a configuration choice


def test_capture_round_trips_unit_names_with_line_breaks(tmp_path: Path) -> None:
    """Issue 37 item 8: a unit name holding `\\n`, U+0085 or U+2028 (systemd escapes them, a hostile snapshot
    need not) made `baseline capture` write YAML it could not load back, blaming its own scratch file."""
    snapshot = json.loads((FLEET / "golden.json").read_text())
    names = ["evil\nx.service", "evil\x85y.service", "evil\u2028z.service"]
    snapshot["facts"]["systemd"]["unit_files"] += [{"name": n, "state": "enabled", "preset": None} for n in names]
    src = tmp_path / "snap.json"
    src.write_text(json.dumps(snapshot))
    out, err = io.StringIO(), io.StringIO()
    code = main(["baseline", "capture", "--snapshot", str(src), "-o", str(tmp_path / "b.yaml")], Env(out, err))
    assert code == 0, err.getvalue()
    baseline = load_baseline(str(tmp_path / "b.yaml"))
    for name in names:
        assert baseline.expect[f"facts.systemd.unit_files[{name}].state"].matches("enabled")
