"""Names are bytes: an image path that is not valid UTF-8 is shown escaped (`\\xff`) and audited like any
other, never the end of the image. Real files named with raw bytes in a temporary image root."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from auditor import cli
from auditor.context import Env
from auditor.models import HostSpec
from auditor.run.live_hosts import collect_host
from tests.unit.test_image_transport import make_root


def _write(path: bytes, text: str, mode: int = 0o644) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def home_dir(r: bytes) -> None:
    _write(r + b"/home/\xff/.bash_history", "ls\n")


def profile_file(r: bytes) -> None:
    _write(r + b"/etc/profile.d/a\xfe.sh", "export MY_TOKEN=abc\n")


def link_target(r: bytes) -> None:
    _write(r + b"/usr/local/bin/kube\xfdlet", "#!/bin/sh\n", 0o755)
    os.makedirs(r + b"/usr/bin", exist_ok=True)
    os.symlink(b"/usr/local/bin/kube\xfdlet", r + b"/usr/bin/kubectl")


def unit_name(r: bytes) -> None:
    _write(r + b"/usr/lib/systemd/system/x\xfc.service", "[Install]\nWantedBy=multi-user.target\n")


def ecs_log(r: bytes) -> None:
    _write(r + b"/var/log/ecs/ecs-init.log.\xfb", "Agent exited with code 1\n")


# builder, the fact it must produce (facts → bool)
CASES: dict[str, tuple[Callable[[bytes], None], Callable[[dict], bool]]] = {
    "home directory": (home_dir, lambda f: {"path": "/home/\\xff/.bash_history", "bytes": 3}
                       in f["hygiene"]["shell_histories"]),
    "profile.d file": (profile_file, lambda f: {"path": "/etc/profile.d/a\\xfe.sh", "kinds": ["secret-variable"]}
                       in f["hygiene"]["credential_files"]),
    "link target": (link_target, lambda f: any(
        b["name"] == "kubectl" and b["realpath"] == "/usr/local/bin/kube\\xfdlet" and len(b["sha256"] or "") == 64
        for b in f["binaries"])),
    "unit file name": (unit_name, lambda f: {"name": "x\\xfc.service", "state": "disabled", "preset": "enabled"}
                       in f["systemd"]["unit_files"]),
    "ecs log name": (ecs_log, lambda f: f["ecs"]["agent_exits"] == 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_name_that_is_not_utf8_is_escaped_and_audited(case: str, tmp_path: Path) -> None:
    build, fact = CASES[case]
    root = make_root(tmp_path / "root")
    build(os.fsencode(root))
    result = collect_host(HostSpec("img", f"image://{root}"), binaries=["kubelet", "kubectl"])
    assert result.status == "ok", result.error
    snap = result.snapshot
    assert fact(snap["facts"]), snap["facts"]
    assert snap["probe"]["complete"] and not snap["probe"]["failed_areas"], snap["probe"]
    assert snap["facts"]["os"]["pretty_name"] == "Debian GNU/Linux 12"  # the rest of the image is read too


def test_the_report_shows_the_escaped_names(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    for build, _ in CASES.values():
        build(os.fsencode(root))
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["scan", f"image://{root}", "--binary", "kubectl", "--format", "json,md",
                     "--out", str(tmp_path / "out")], Env(out, err))
    assert code == 1, err.getvalue()  # findings (the history, the credential), not an error
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["hosts"][0]["status"] == "ok"
    shown = out.getvalue() + (tmp_path / "out/report.md").read_text()
    assert "/home/\\xff/.bash_history" in shown and "/etc/profile.d/a\\xfe.sh" in shown
