"""Release notes: `ami-auditor diff A B --format md|json|html` — changes grouped by area, worst first,
packages in version order, severity from the fact schema, nothing for what does not apply to images."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.compare.versions import compare_versions
from auditor.context import Env
from tests.paths import ROOT
from tests.unit.test_image_transport import make_root


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), Env(stdout=out, stderr=io.StringIO()))
    return code, out.getvalue()


@pytest.mark.parametrize(("older", "newer"), [
    ("1.9", "1.10"), ("1.0~rc1", "1.0"), ("2.0", "1:0.9"), ("2.38.1-5+deb12u1", "2.38.1-5+deb12u3"),
    ("1.0", "1.0a"), ("1.0", "1.0.1"), ("5.10.214-202.855.amzn2", "5.10.214-202.900.amzn2"), ("9", "10"),
])
def test_version_order_is_dpkg_order_not_string_order(older: str, newer: str) -> None:
    assert compare_versions(older, newer) < 0 < compare_versions(newer, older)
    assert compare_versions(newer, newer) == 0


def test_text_that_is_no_version_has_no_order() -> None:
    assert compare_versions("", "1.0") == 0 and compare_versions("1.0", "a b") == 0


def _package(root: Path, name: str, version: str) -> None:
    status = root / "var/lib/dpkg/status"
    status.write_text(status.read_text() + f"Package: {name}\nStatus: install ok installed\nArchitecture: amd64\n"
                                           f"Version: {version}\nDescription: x\n\n")


def two_images(tmp_path: Path) -> tuple[Path, Path]:
    """Like AZ a and AZ b: b has ecs.service enabled and a kubelet from elsewhere; plus package changes."""
    a, b = make_root(tmp_path / "a"), make_root(tmp_path / "b")
    os.unlink(a / "etc/systemd/system/multi-user.target.wants/ecs.service")  # a: ecs.service disabled
    (b / "usr/local/bin/kubelet").write_text("#!/bin/sh\necho other kubelet\n")
    (a / "var/log/cloud-init-output.log").write_text(
        "+ curl -o /usr/local/bin/kubelet https://amazon-eks.s3.us-west-2.amazonaws.com/1.29.3/bin/kubelet\n")
    _package(a, "libfoo", "1.9-1")
    _package(b, "libfoo", "1.10-1")  # upgraded: a string comparison would call it a downgrade
    _package(a, "oldtool", "2.0")
    _package(b, "newtool", "0.1")
    (b / "root").mkdir(exist_ok=True)
    (b / "root/.netrc").write_text("machine x login y password z\n")
    return a, b


def test_release_notes_between_two_images(tmp_path: Path) -> None:
    a, b = two_images(tmp_path)
    code, out = run("diff", "--format", "json", f"image://{a}", f"image://{b}")
    notes = json.loads(out)
    assert code == 1 and notes["schema"] == "ami-auditor/release-notes/1"
    sections = [s["area"] for s in notes["sections"]]
    assert sections[:2] == ["units", "binaries"]  # ecs.service and kubelet first
    first = [c for s in notes["sections"][:2] for c in s["changes"]][:2]
    assert [(c["subject"], c["change"], c["severity"]) for c in first] == [
        ("ecs.service", "enabled", "high"), ("kubelet", first[1]["change"], "high")]
    assert first[1]["change"].startswith("source_host") and first[1]["after"] == "dl.k8s.io"
    packages = {c["subject"]: c for s in notes["sections"] if s["area"] == "packages" for c in s["changes"]}
    assert (packages["libfoo"]["change"], packages["libfoo"]["before"], packages["libfoo"]["after"]) == \
        ("upgraded", "1.9-1", "1.10-1")
    assert packages["newtool"]["change"] == "added" and packages["oldtool"]["change"] == "removed"
    hygiene = {c["subject"]: c for s in notes["sections"] if s["area"] == "hygiene" for c in s["changes"]}
    assert hygiene["/root/.netrc"]["severity"] == "high"  # a credential file appeared in the new image
    assert notes["unknown"] == [] and {"cgroups", "cpu", "network"} <= set(notes["not_compared"])


def test_markdown_and_html_name_ecs_and_kubelet_first_without_not_applicable_noise(tmp_path: Path) -> None:
    a, b = two_images(tmp_path)
    code, md = run("diff", "--format", "md", f"image://{a}", f"image://{b}")
    assert code == 1
    rows = [ln for ln in md.splitlines() if ln.startswith("| high") or ln.startswith("| medium")
            or ln.startswith("| low")]
    assert rows[0].startswith("| high | ecs.service | enabled |") and "| kubelet |" in rows[1]
    for noise in ("cgroups", "cpu", "network", "unknown", "not applicable"):
        assert noise not in md, noise
    code, html = run("diff", "--format", "html", f"image://{a}", f"image://{b}")
    assert html.index("ecs.service") < html.index("kubelet") < html.index("libfoo")
    assert "Content-Security-Policy" in html and "<script" not in html and "cgroups" not in html


def test_text_markdown_json_and_html_give_one_count_for_the_same_pair(tmp_path: Path) -> None:
    """Text listed 11 differences (one per fact path) where the Markdown said 6 changes (one per subject): now
    every format says both numbers the same way, and the numbers are what each lists."""
    a, b = two_images(tmp_path)
    _, text = run("diff", f"image://{a}", f"image://{b}")
    _, md = run("diff", "--format", "md", f"image://{a}", f"image://{b}")
    _, html = run("diff", "--format", "html", f"image://{a}", f"image://{b}")
    notes = json.loads(run("diff", "--format", "json", f"image://{a}", f"image://{b}")[1])
    lines = text.splitlines()
    footer = lines[-1].split(" from ")[0]
    summary = next(ln for ln in md.splitlines() if "change(s)" in ln).rstrip(".")
    assert footer == summary == "6 change(s): 3 high, 1 medium, 2 low (11 difference(s))", (footer, summary)
    assert f"<p>{summary}.</p>" in html
    assert len(lines) - 1 == notes["differences"] == 11  # a text line per difference
    rows = [ln for ln in md.splitlines() if ln.startswith(("| high", "| medium", "| low"))]
    assert len(rows) == notes["changes"] == 6  # a Markdown row per change


@pytest.mark.parametrize("fmt", ["text", "md", "json", "html"])
def test_diff_out_writes_what_would_be_printed_and_says_where(tmp_path: Path, fmt: str) -> None:
    a, b = two_images(tmp_path)
    printed = run("diff", "--format", fmt, f"image://{a}", f"image://{b}")[1]
    target = tmp_path / "notes" / f"release.{fmt}"
    target.parent.mkdir()
    code, told = run("diff", "--format", fmt, "--out", str(target), f"image://{a}", f"image://{b}")
    assert code == 1 and target.read_text(encoding="utf-8") == printed
    assert told.splitlines() == [printed.splitlines()[-1] if fmt == "text" else
                                 f"6 change(s): 3 high, 1 medium, 2 low (11 difference(s)) from image://{a} to image://{b}",
                                 f"wrote {target}"]
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no temporary left beside it


def test_diff_out_that_cannot_be_written_is_bad_input_before_anything_is_read(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["diff", "--out", str(tmp_path), "image:///nonexistent-a", "image:///nonexistent-b"],
                Env(stdout=out, stderr=err))
    assert code == 2 and out.getvalue() == "" and "--out" in err.getvalue() and "is a directory" in err.getvalue()


def test_hostile_names_are_escaped(tmp_path: Path) -> None:
    a, b = make_root(tmp_path / "a"), make_root(tmp_path / "b")
    unit = "x<script>alert(1)<|`.service"
    (b / "usr/lib/systemd/system" / unit).write_text("[Service]\nExecStart=/bin/true\n")
    _, html = run("diff", "--format", "html", f"image://{a}", f"image://{b}")
    assert "<script>" not in html and "&lt;script&gt;" in html
    _, md = run("diff", "--format", "md", f"image://{a}", f"image://{b}")
    assert "<script>" not in md and "\\`" in md and "\\|" in md


@pytest.mark.fleet
def test_release_notes_of_the_fleets_az_a_and_az_b_roots(fleet) -> None:
    """a1's and b1's real root filesystems read as images: the AZ-b image enables ecs.service and carries
    another kubelet; those lead the notes and nothing runtime appears."""
    a1, b1 = fleet.host("a1").root, fleet.host("b1").root
    code, md = run("diff", "--format", "md", f"image://{a1}", f"image://{b1}")
    assert code == 1
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| severity")
            and not ln.startswith("| ---")]
    assert rows[0].startswith("| high | ecs.service | enabled | disabled | enabled |"), md
    assert rows[1].startswith("| high | kubelet | source\\_host") and "dl.k8s.io" in rows[1], md
    for noise in ("cgroups", "unknown", "ssh\\_host", "machine"):
        assert noise not in md, noise


@pytest.mark.fleet
def test_a_baseline_from_goldens_root_gates_the_az_roots(fleet, tmp_path: Path) -> None:
    """`baseline capture image://<golden's root>`; a1's root meets it, b1's root drifts where AZ b differs."""
    golden = tmp_path / "golden.yaml"
    code, _ = run("baseline", "capture", f"image://{fleet.host('golden').root}", "-o", str(golden))
    assert code == 0 and "facts.systemd.unit_files[ecs.service].state: disabled" in golden.read_text()
    code, out = run("diff", str(golden), f"image://{fleet.host('a1').root}")
    assert code == 0, out
    code, out = run("diff", "--format", "json", str(golden), f"image://{fleet.host('b1').root}")
    notes = json.loads(out)
    assert code == 1 and [s["area"] for s in notes["sections"]][:2] == ["units", "binaries"]
    assert notes["sections"][0]["changes"][0]["subject"] == "ecs.service" and notes["unknown"] == []


def baked(root: Path, machine_id: str, history: str) -> Path:
    """An image root left with what first boot and the build session leave: a real SSH host key made by
    ssh-keygen, a machine-id and root's shell history."""
    import subprocess

    (root / "etc/ssh").mkdir(parents=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f",
                    str(root / "etc/ssh/ssh_host_ed25519_key")], check=True)
    (root / "etc/machine-id").write_text(machine_id + "\n")
    (root / "root").mkdir(exist_ok=True)
    (root / "root/.bash_history").write_text(history + "\n")
    return root


def test_newly_baked_host_keys_and_machine_id_are_listed_though_host_keys_are_volatile(tmp_path: Path) -> None:
    """`scan` flags a baked SSH host key HIGH; drift leaves host keys out (volatile: each live host has its own),
    but release notes between two images list what appeared: real keys made by ssh-keygen in the new root."""
    import shutil

    a, b = make_root(tmp_path / "a"), make_root(tmp_path / "b")
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen missing (openssh-client)")
    baked(b, "0123456789abcdef0123456789abcdef", "aws configure")
    code, out = run("diff", "--format", "json", f"image://{a}", f"image://{b}")
    notes = json.loads(out)
    hygiene = {c["subject"]: c for s in notes["sections"] if s["area"] == "hygiene" for c in s["changes"]}
    key = hygiene["/etc/ssh/ssh_host_ed25519_key"]
    assert (key["change"], key["severity"], key["before"]) == ("added", "high", None)
    assert "type=ed25519" in key["after"] and "fingerprint=SHA256:" in key["after"]
    assert hygiene["machine_id_state"]["after"] == "populated" and hygiene["machine_id_state"]["severity"] == "high"
    assert hygiene["/root/.bash_history"]["change"] == "added"
    assert code == 1 and notes["sections"][0]["area"] == "hygiene"
    code, md = run("diff", "--format", "md", f"image://{a}", f"image://{b}")
    assert "| high | /etc/ssh/ssh\\_host\\_ed25519\\_key | added |" in md, md
    code, text = run("diff", f"image://{a}", f"image://{b}")  # plain `diff` says it too
    assert code == 1 and "added    [high] facts.hygiene.ssh_host_keys[/etc/ssh/ssh_host_ed25519_key]" in text, text
    c = baked(make_root(tmp_path / "c"), "fedcba9876543210fedcba9876543210", "history -c")  # its own key, same path
    code, out = run("diff", "--format", "json", f"image://{b}", f"image://{c}")
    assert code == 0 and json.loads(out)["changes"] == 0, out


def test_appeared_severities_are_the_image_packs() -> None:
    import yaml

    from auditor.compare.release import APPEARED_SEVERITY

    pack = yaml.safe_load((ROOT / "rules" / "image.yaml").read_text(encoding="utf-8"))
    for name, severity in APPEARED_SEVERITY.items():
        rules = [r for r in pack["rules"] if f"facts.hygiene.{name}" in f"{r.get('select', '')} {r.get('when', '')}"]
        assert rules and {r["severity"] for r in rules} == {severity}, (name, rules)
