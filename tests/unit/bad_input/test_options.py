"""Bad options and bad targets, table-driven, through the real CLI (`auditor.cli.main` with an Env).

Every case in CASES: exit 2; the message names the option or target (and file:line for inventories);
no traceback; nothing written (the working directory — the test's tmp dir — is unchanged, no .tmp
files); no password echoed; and no connection attempted: every case that names an ssh host names a
real listening socket on 127.0.0.1 that counts the connections it accepts, which must be 0.
Plus: exit 4 (internal error) in one line, the traceback only with --debug, and snapshot file names
that sanitise alike never overwrite each other.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import auditor.render
from auditor.cli import COMMANDS, build_parser, main
from auditor.context import Env
from tests import reliability
from tests.paths import DATA

REPORT = DATA / "reports" / "clean.json"
SECRET = "hunter2-s3cret"


class Listener:
    """A loopback TCP server that counts (and immediately closes) every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> int:
        """Stop serving; count connections still waiting in the backlog too; return the total."""
        if self._stop.is_set():
            return self.accepted
        self._stop.set()
        self._thread.join()
        self.sock.setblocking(False)
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, OSError):
                break
            self.accepted += 1
            conn.close()
        self.sock.close()
        return self.accepted


@dataclass(frozen=True)
class Case:
    """One bad input. `{ssh}` is the listener as a target, `{port}` its port, `{tmp}` the work dir,
    `{file}` an existing regular file, `{dir}` an existing empty directory, `{noetc}` a directory without
    etc/, `{inv}` the inventory written from `inventory`, `{report}` a valid saved report."""

    kind: str
    argv: tuple[str, ...]
    expect: tuple[str, ...]  # substrings of the message (placeholders expanded)
    inventory: str | None = None
    line: int | None = None  # the inventory line the message must name
    secret: str | None = None  # must appear nowhere in the output


def _scan(*args: str) -> tuple[str, ...]:
    return ("scan", "{ssh}", *args)


CASES: list[Case] = [
    # --deadline: finite and > 0, at most a day
    Case("deadline-zero", _scan("--deadline", "0"), ("--deadline",)),
    Case("deadline-negative", _scan("--deadline", "-5"), ("--deadline",)),
    Case("deadline-nan", _scan("--deadline", "nan"), ("--deadline", "nan")),
    Case("deadline-inf", _scan("--deadline", "inf"), ("--deadline", "inf")),
    Case("deadline-huge", _scan("--deadline", "1e9"), ("--deadline", "86400")),
    Case("collect-deadline-nan", ("collect", "{ssh}", "--deadline", "nan", "-o", "{tmp}/snaps"), ("--deadline",)),
    Case("diff-deadline-inf", ("diff", "{ssh}", "local", "--deadline", "inf"), ("--deadline",)),
    # other numeric bounds
    Case("parallel-huge", _scan("--parallel", "100000"), ("--parallel", "512")),
    Case("top-huge", _scan("--symptom", "systemd.unit-failed", "--top", "100000000"), ("--top",)),
    Case("history-last-negative", ("history", "list", "--last", "-1"), ("--last",)),
    Case("ssm-poll-interval-nan", _scan("--ssm-poll-interval", "nan"), ("--ssm-poll-interval", "nan")),
    Case("region-malformed", _scan("--region", "us east 1"), ("--region", "us east 1")),
    Case("ssh-identity-missing", _scan("--ssh-identity", "{tmp}/no-such-key"), ("--ssh-identity", "no-such-key")),
    # --symptom / --group-by: rules that exist, labels a target defines, well-formed
    Case("symptom-unknown-rule", _scan("--symptom", "systemd.unit-crash-loopin"),
         ("--symptom", "systemd.unit-crash-loopin", "systemd.unit-crash-looping")),
    Case("symptom-not-a-rule-id", _scan("--symptom", "crash looping"), ("--symptom", "crash looping")),
    Case("symptom-unknown-label", _scan("--symptom", "team=infra"), ("--symptom", "'team'")),
    Case("group-by-unknown-label", _scan("--group-by", "tier"), ("--group-by", "'tier'")),
    Case("group-by-label-no-host-defines", ("scan", "-i", "{inv}", "--group-by", "zone"),
         ("--group-by", "'zone'", "env"),
         inventory="hosts:\n  - name: a\n    target: ssh://root@127.0.0.1:{port}\n    labels:\n      env: prod\n"),
    # output places: the right kind, writable — checked before any host is contacted
    Case("scan-out-is-file", _scan("--out", "{file}"), ("--out", "{file}")),
    Case("scan-out-under-file", _scan("--out", "{file}/reports"), ("--out", "{file}/reports")),
    Case("scan-out-report-is-dir", _scan("--out", "{tmp}/outdir"), ("--out", "report.json")),
    Case("scan-out-in-proc", _scan("--out", "/proc/ami-auditor-no-such/out"), ("--out", "/proc/")),
    Case("scan-store-under-file", _scan("--store", "{file}/hist.sqlite3"), ("--store", "{file}/hist.sqlite3")),
    Case("scan-store-not-sqlite", _scan("--store", "{file}"), ("{file}", "not a database")),
    Case("scan-format-empty", _scan("--format", ",", "--out", "{tmp}/out"), ("--format",)),
    Case("collect-out-is-file", ("collect", "{ssh}", "-o", "{file}"), ("--out", "{file}")),
    Case("collect-out-under-file", ("collect", "{ssh}", "-o", "{file}/snaps"), ("--out", "{file}/snaps")),
    Case("baseline-out-existing-dir", ("baseline", "capture", "{ssh}", "-o", "{dir}"), ("--out", "{dir}")),
    Case("baseline-out-under-file", ("baseline", "capture", "{ssh}", "-o", "{file}/golden.yaml"),
         ("--out", "{file}")),
    Case("report-out-under-file", ("report", "{report}", "--format", "json", "--out", "{file}/r"),
         ("--out", "{file}/r")),
    # targets: refused at resolve time, before any host is touched
    Case("image-no-etc", _scan("image://{noetc}"), ("image://{noetc}", "etc/")),
    Case("image-missing", _scan("image://{tmp}/no-such-root"), ("image://{tmp}/no-such-root",)),
    Case("ssh-space", _scan("ssh://a b"), ("ssh://a b", "whitespace")),
    Case("ssh-semicolon", _scan("ssh://h;id"), ("ssh://h;id",)),
    Case("ssh-newline", _scan("ssh://a\nb"), ("ssh://a\\nb", "control")),
    Case("ssh-tab", _scan("ssh://a\tb"), ("ssh://a\\tb", "control")),
    Case("ssh-encoded-newline", _scan("ssh://a%0ab"), ("ssh://a%0ab",)),
    Case("ssh-port-zero", _scan("ssh://h:0"), ("ssh://h:0", "port")),
    Case("ssh-empty-ipv6", _scan("ssh://[]"), ("ssh://[]",)),
    Case("ssh-unclosed-ipv6", _scan("ssh://[::1"), ("ssh://[::1",)),
    Case("ssh-option-as-host", _scan("ssh://-oProxyCommand=id"), ("ssh://-oProxyCommand=id",)),
    Case("ssh-user-semicolon", _scan("ssh://r;id@h"), ("ssh://r;id@h", "user")),
    Case("ssh-password", _scan(f"ssh://root:{SECRET}@127.0.0.1:{{port}}"),
         ("ssh://root:***@127.0.0.1", "password"), secret=SECRET),
    Case("diff-password", ("diff", f"ssh://admin:{SECRET}@127.0.0.1:{{port}}", "local"),
         ("ssh://admin:***@", "password"), secret=SECRET),
    # the same in an inventory: file and line named
    Case("inventory-target-space", ("scan", "{ssh}", "-i", "{inv}"), ("{inv}:4", "ssh://a b"), line=4,
         inventory="hosts:\n  - name: a\n    # the target below has a space\n    target: ssh://a b\n"),
    Case("inventory-target-password", ("collect", "-i", "{inv}", "-o", "{tmp}/snaps"), ("{inv}:5", "***"), line=5,
         secret=SECRET,
         inventory=("hosts:\n  - name: ok\n    target: ssh://root@127.0.0.1:{port}\n  - name: b\n"
                    f"    target: ssh://root:{SECRET}@127.0.0.1:{{port}}\n")),
    Case("inventory-image-no-etc", ("scan", "-i", "{inv}"), ("{inv}:5", "etc/"), line=5,
         inventory=("hosts:\n  - name: ok\n    target: ssh://root@127.0.0.1:{port}\n  - name: img\n"
                    "    target: image://{noetc}\n")),
    Case("inventory-proxy-jump-password", ("scan", "-i", "{inv}"), ("{inv}:6", "proxy_jump", "***"), line=6,
         secret=SECRET,
         inventory=("hosts:\n  - name: ok\n    target: ssh://root@127.0.0.1:{port}\n    ssh:\n      port: {port}\n"
                    f"      proxy_jump: admin:{SECRET}@127.0.0.1:{{port}}\n")),
    Case("inventory-user-semicolon", ("scan", "-i", "{inv}"), ("{inv}:5", "user"), line=5,
         inventory="hosts:\n  - name: ok\n    target: ssh://127.0.0.1:{port}\n    ssh:\n      user: root;id\n"),
]


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    try:
        yield server
    finally:
        server.close()


def _tree(root: Path) -> dict[str, tuple[bool, int, int]]:
    """Every path under root with (is_dir, size, mtime_ns): what "nothing written" compares."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            out[str(path.relative_to(root))] = (path.is_dir(), st.st_size if not path.is_dir() else 0, st.st_mtime_ns)
    return out


def _workdir(tmp: Path) -> dict[str, str]:
    """The files the cases point at; returns the placeholder values."""
    (tmp / "afile").write_text("not a directory\n")
    (tmp / "existing").mkdir()
    (tmp / "noetc" / "usr").mkdir(parents=True)
    (tmp / "outdir" / "report.json").mkdir(parents=True)
    (tmp / "hist").mkdir()
    shutil.copy(REPORT, tmp / "hist" / "scan-20260101T000000Z.json")
    return {"{tmp}": str(tmp), "{file}": str(tmp / "afile"), "{dir}": str(tmp / "existing"),
            "{noetc}": str(tmp / "noetc"), "{inv}": str(tmp / "inventory.yaml"), "{report}": str(REPORT)}


def _expand(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def run_cli(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, Env(out, err))
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_bad_option_or_target_exits_2_before_any_host_or_write(
    case: Case, tmp_path: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    values = _workdir(work)
    values["{ssh}"] = f"ssh://root@127.0.0.1:{listener.port}"
    values["{port}"] = str(listener.port)
    if case.inventory is not None:
        Path(values["{inv}"]).write_text(_expand(case.inventory, values))
    monkeypatch.chdir(work)  # default outputs (collect's ./snapshots) would land here
    before = _tree(work)

    code, text = run_cli([_expand(a, values) for a in case.argv])
    reliability.record("bad input", f"option/{case.kind}", crashed=code == 4 or "Traceback" in text)

    assert code == 2, text
    for needle in case.expect:
        assert _expand(needle, values) in text, text
    if case.line is not None:
        assert f"{values['{inv}']}:{case.line}:" in text, text
    assert "Traceback" not in text and "internal error" not in text, text
    if case.secret:
        assert case.secret not in text, text
    assert _tree(work) == before, "something was written"
    assert not list(work.rglob("*.tmp"))
    assert listener.close() == 0, "a host was contacted"


def test_the_table_is_large_and_its_kinds_are_distinct() -> None:
    assert len(CASES) >= 30
    assert len({c.kind for c in CASES}) == len(CASES)


def test_every_command_is_registered_explicitly() -> None:
    """A typed registry: an import error can no longer make a command silently disappear."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == {"collect", "scan", "analyze", "baseline", "diff", "report", "rules", "ssm", "history",
                                "ami", "completion"}
    assert len(COMMANDS) == 11


def _boom(doc: dict) -> str:
    raise TypeError(f"cannot render {type(object()).__name__!r} object at hosts[0]")


def test_internal_error_is_exit_4_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A renderer that crashes (monkeypatched to raise — a mock, since the point is an unforeseen bug)
    gives exit 4 and one clear line, never 1, and writes none of the formats."""
    monkeypatch.setitem(auditor.render.RENDERERS, "html", (_boom, "html"))
    out = tmp_path / "out"
    code, text = run_cli(["report", str(REPORT), "--format", "json,html", "--out", str(out)])
    assert code == 4, text
    lines = [line for line in text.splitlines() if line]
    assert lines == ["ami-auditor: internal error: TypeError: cannot render 'object' object at hosts[0] "
                     "(run with --debug for the traceback)"]
    assert "Traceback" not in text
    assert not out.exists() or not list(out.iterdir()), "a partial report was written"


def test_scan_internal_error_writes_no_report_and_no_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same crash inside a real scan of this machine: exit 4, no report file, no .tmp left."""
    monkeypatch.setitem(auditor.render.RENDERERS, "html", (_boom, "html"))
    out = tmp_path / "out"
    code, text = run_cli(["scan", "local", "--binary", "sh", "--format", "json,html", "--out", str(out)])
    assert code == 4, text
    assert "internal error: TypeError" in text and "Traceback" not in text
    assert not out.exists() or not list(out.iterdir())


def test_debug_prints_the_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(auditor.render.RENDERERS, "json", (_boom, "json"))
    code, text = run_cli(["--debug", "report", str(REPORT), "--format", "json"])
    assert code == 4
    assert "Traceback (most recent call last)" in text and "in _boom" in text
    assert text.rstrip().splitlines()[-1].startswith("ami-auditor: internal error: TypeError")


def _image(root: Path) -> Path:
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text('NAME="Test"\nID=test\nPRETTY_NAME="Test image"\n')
    (root / "etc" / "hostname").write_text("img\n")
    return root


def test_names_that_sanitise_alike_get_distinct_files(tmp_path: Path) -> None:
    """Inventory hosts `a/b` and `a_b` both become a_b.json today; now neither overwrites the other."""
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"hosts:\n  - name: a/b\n    target: image://{_image(tmp_path / 'r1')}\n"
                   f"  - name: a_b\n    target: image://{_image(tmp_path / 'r2')}\n")
    out = tmp_path / "snaps"
    code, text = run_cli(["collect", "-i", str(inv), "-o", str(out), "--binary", "sh"])
    assert code == 0, text
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 2 and "a_b.json" in files, files
    names = {json.loads((out / f).read_text())["name"]: f for f in files}
    assert names["a_b"] == "a_b.json" and names["a/b"].startswith("a_b-"), names
    assert "2/2 hosts collected" in text and "a/b" in text


def test_labels_an_inventory_defines_are_accepted(tmp_path: Path) -> None:
    """The other side of the --group-by/--symptom label check: a label a host defines passes."""
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"hosts:\n  - name: one\n    target: image://{_image(tmp_path / 'r1')}\n    labels: {{team: a}}\n"
                   f"  - name: two\n    target: image://{_image(tmp_path / 'r2')}\n    labels: {{team: b}}\n")
    code, text = run_cli(["scan", "-i", str(inv), "--binary", "sh", "--group-by", "team", "--symptom", "team=a"])
    assert code in (0, 1), text
    assert "unknown label" not in text


def test_a_password_from_an_ssh_config_never_reaches_the_terminal_or_report(tmp_path: Path) -> None:
    """A ProxyJump with a password in an ssh_config (read by the transport, not refused up front) makes
    the host fail; its error is redacted in the summary and in the saved report."""
    (tmp_path / "cfg").write_text(f"Host *\n  ProxyJump admin:{SECRET}@127.0.0.1:1\n")
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  - name: x\n    target: ssh://root@127.0.0.1:1\n    ssh:\n      ssh_config: cfg\n")
    out = tmp_path / "out"
    code, text = run_cli(["scan", "-i", str(inv), "--format", "json,md,html,junit", "--out", str(out)])
    assert code == 3, text
    assert "admin:***@" in text and SECRET not in text, text
    for report in out.iterdir():
        assert SECRET not in report.read_text(), report.name


def test_unique_stems_are_deterministic_and_case_insensitive() -> None:
    from auditor.commands.checks import unique_stems
    from auditor.commands.common import file_stem

    names = ["a/b", "a_b", "A_B", "web-1", "/mnt/root"]
    stems = unique_stems(names, file_stem)
    assert len({s.casefold() for s in stems.values()}) == len(names)
    assert stems["web-1"] == "web-1" and stems["/mnt/root"] == "mnt_root"  # no collision: unchanged
    assert stems == unique_stems(list(reversed(names)), file_stem)  # independent of order
