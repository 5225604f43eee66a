"""SSHTransport against real sshd processes on 127.0.0.1 (no mocks).

Needs root (sshd privilege separation, a throwaway user, sudoers drop-in), /usr/sbin/sshd,
ssh-keygen and sudo. Outside CI these tests skip when that is missing; with CI=true they run
(and fail loudly) instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import paramiko
import pytest

from auditor.cli import main
from auditor.context import Env
from auditor.errors import AuthFailed, HostKeyRejected, ProbeTimeout, Unreachable
from auditor.models import HostSpec, SSHOptions
from auditor.transport.ssh import SSHTransport, build_command, known_host_keys, resolve_route
from tests.probe_requests import shell_request

SSHD = "/usr/sbin/sshd"
IN_CI = os.environ.get("CI") == "true"
_missing = [t for t in (SSHD, "ssh-keygen", "sudo", "useradd") if not shutil.which(t)]
pytestmark = pytest.mark.skipif(
    not IN_CI and (os.geteuid() != 0 or bool(_missing)),
    reason=f"needs root and {', '.join(_missing) or 'sshd'} (always runs when CI=true)",
)

SUDO_USER = "audsshsudo"  # may `sudo -n /bin/sh` without a password
PLAIN_USER = "audsshplain"  # has no sudo rights


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path, kind: str = "ed25519") -> Path:
    extra = ["-b", "3072"] if kind == "rsa" else []
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, *extra, "-N", "", "-C", path.name, "-f", str(path)], check=True
    )
    return path


def _fingerprint(key: Path) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", f"{key}.pub"], capture_output=True, text=True, check=True)
    return out.stdout.split()[1]


@dataclass
class Sshd:
    port: int
    host_key: Path
    proc: subprocess.Popen
    log: Path

    @property
    def kh_line(self) -> str:
        """This server's known_hosts line."""
        kind, b64 = Path(f"{self.host_key}.pub").read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {b64}\n"


def _start_sshd(base: Path, name: str, authorized: Path, extra: str = "", max_startups: str = "50:30:100") -> Sshd:
    port = _free_port()
    host_key = _keygen(base / f"{name}_host_ed25519")
    cfg = base / f"{name}_sshd_config"
    cfg.write_text(
        f"""Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {base / name}.pid
AuthorizedKeysFile {authorized}
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowTcpForwarding yes
MaxStartups {max_startups}
LogLevel VERBOSE
{extra}
"""
    )
    log = base / f"{name}.log"
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=log.open("wb")
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd {name} exited: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return Sshd(port, host_key, proc, log)
        except OSError:
            time.sleep(0.05)
    proc.terminate()
    raise RuntimeError(f"sshd {name} did not listen on {port}: {log.read_text()}")


def _ensure_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True)
    # a "!" (locked) password makes sshd refuse the account when UsePAM is off
    subprocess.run(["usermod", "-p", "*", name], check=True)


@dataclass
class Lab:
    base: Path
    target: Sshd
    bastion: Sshd
    key: Path  # authorized ed25519 client key
    keys: dict[str, Path]  # authorized keys by type
    wrong_key: Path  # not authorized
    known_hosts: Path  # both servers' keys

    def spec(self, target: str | None = None, **ssh: object) -> HostSpec:
        opts = {"identity_file": str(self.key), "known_hosts": str(self.known_hosts)}
        opts["ssh_config"] = str(self.base / "empty_ssh_config")
        opts.update(ssh)  # type: ignore[arg-type]
        target = target or f"ssh://root@127.0.0.1:{self.target.port}"
        return HostSpec(name="t", target=target, ssh=SSHOptions(**opts))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    base = Path(tempfile.mkdtemp(prefix="auditor-sshd-"))
    base.chmod(0o755)  # sshd reads AuthorizedKeysFile as the (non-root) user
    keys = {kind: _keygen(base / f"client_{kind}", kind) for kind in ("ed25519", "ecdsa", "rsa")}
    wrong = _keygen(base / "client_wrong")
    authorized = base / "authorized_keys"
    authorized.write_text("".join(Path(f"{k}.pub").read_text() for k in keys.values()))
    authorized.chmod(0o644)
    (base / "empty_ssh_config").write_text("")
    for user in (SUDO_USER, PLAIN_USER):
        _ensure_user(user)
    sudoers = Path(f"/etc/sudoers.d/{SUDO_USER}")
    sudoers.write_text(f"{SUDO_USER} ALL=(root) NOPASSWD: /bin/sh\n")
    sudoers.chmod(0o440)
    target = _start_sshd(base, "target", authorized)
    bastion = _start_sshd(base, "bastion", authorized, f"PermitOpen 127.0.0.1:{target.port}")
    known = base / "known_hosts"
    known.write_text(target.kh_line + bastion.kh_line)
    try:
        yield Lab(base, target, bastion, keys["ed25519"], keys, wrong, known)
    finally:
        for server in (target, bastion):
            server.proc.terminate()
            server.proc.wait(timeout=10)
        sudoers.unlink(missing_ok=True)
        for user in (SUDO_USER, PLAIN_USER):
            subprocess.run(["userdel", "-r", user], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent on the developer's machine must not decide an auth test."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def _run(spec: HostSpec, script: str, args: list[str] | None = None, **kw: object):
    with SSHTransport(spec) as t:
        return t.run(shell_request(script, args or []), **kw)  # type: ignore[arg-type]


# -- running ---------------------------------------------------------------------------------------


def test_stdout_stderr_exit_status(lab: Lab) -> None:
    res = _run(lab.spec(), 'echo "hello $(id -un)"; echo oops >&2; exit 3')
    assert res.stdout == "hello root\n"
    assert res.stderr == "oops\n"
    assert res.exit_status == 3
    assert not res.truncated
    assert res.duration_s > 0


def test_args_arrive_literally(lab: Lab) -> None:
    canary = lab.base / "pwned"
    args = ["a b", "it's", '"dq"', f"$(touch {canary})", f"`touch {canary}`", "$HOME", "*", ";|&", "", "-x"]
    res = _run(lab.spec(), 'for a in "$@"; do printf "%s\\0" "$a"; done', args)
    assert res.exit_status == 0, res.stderr
    assert res.stdout.split("\0")[:-1] == args
    assert not canary.exists()


def test_connection_is_reused_across_runs(lab: Lab) -> None:
    with SSHTransport(lab.spec()) as t:
        first = t.run(shell_request("echo $PPID"))
        transport = t.connect()
        second = t.run(shell_request("echo again"))
        assert t.connect() is transport
    assert first.exit_status == 0 and second.stdout == "again\n"


def test_big_stderr_before_big_stdout_does_not_deadlock(lab: Lab) -> None:
    """A reader that drains stdout first would stall once stderr fills the shared window."""
    script = (
        "head -c 5000000 /dev/zero | tr '\\0' e >&2\n"
        "head -c 5000000 /dev/zero | tr '\\0' o\n"
        "(head -c 3000000 /dev/zero | tr '\\0' E >&2) & head -c 1000000 /dev/zero | tr '\\0' O; wait\n"
    )
    res = _run(lab.spec(), script, deadline_s=60)
    assert res.exit_status == 0
    assert len(res.stdout) == 6_000_000 and set(res.stdout) == {"o", "O"}
    assert len(res.stderr) == 64 * 1024  # the tail is kept
    assert set(res.stderr) <= {"e", "E"}
    assert not res.truncated


def test_max_output_truncates_and_keeps_draining(lab: Lab) -> None:
    res = _run(lab.spec(), "head -c 3000000 /dev/zero | tr '\\0' x; echo done >&2; exit 7", max_output=100)
    assert res.stdout == "x" * 100
    assert res.truncated
    assert res.exit_status == 7  # the remote ran to the end: it was never blocked
    assert res.stderr == "done\n"


@pytest.mark.parametrize("user", ["root", SUDO_USER])
def test_wall_clock_deadline(lab: Lab, user: str) -> None:
    marker = f"deadline-{user}-31415"  # an argument, to find the remote shell afterwards
    spec = lab.spec(target=f"ssh://{user}@127.0.0.1:{lab.target.port}")
    started = time.monotonic()
    with pytest.raises(ProbeTimeout, match=r"within 1\.5s"), SSHTransport(spec) as t:
        t.run(shell_request("echo started; sleep 31.4159; echo never", [marker]), deadline_s=1.5)
    elapsed = time.monotonic() - started
    assert 1.5 <= elapsed < 5, elapsed

    def alive() -> bool:
        return subprocess.run(["pgrep", "-f", f"sh -s -- {marker}"], capture_output=True).returncode == 0

    for _ in range(50):
        if not alive():
            break
        time.sleep(0.1)
    still_alive = alive()
    subprocess.run(["pkill", "-f", f"sh -s -- {marker}"], check=False)
    subprocess.run(["pkill", "-f", "sleep 31.4159"], check=False)
    if user != "root":
        # sshd killpg()s the session on our `signal` request; sudo relays it to the shell. (OpenSSH
        # refuses `signal` for root logins, so there the remote shell lives on until it next writes.)
        assert not still_alive, "the remote shell outlived the deadline"


@pytest.mark.parametrize("kind", ["ed25519", "ecdsa", "rsa"])
def test_identity_file_types(lab: Lab, kind: str) -> None:
    res = _run(lab.spec(identity_file=str(lab.keys[kind])), "echo ok", [])
    assert res.stdout == "ok\n"


# -- host keys -------------------------------------------------------------------------------------


def test_unknown_host_key_is_rejected(lab: Lab) -> None:
    empty = lab.base / "kh_empty"
    empty.write_text("")
    fp = _fingerprint(lab.target.host_key)
    with pytest.raises(HostKeyRejected) as info:
        _run(lab.spec(known_hosts=str(empty)), "echo hi")
    assert f"[127.0.0.1]:{lab.target.port}" in str(info.value)
    assert fp in str(info.value)
    assert empty.read_text() == ""  # nothing pinned without trust_on_first_use


def test_missing_known_hosts_file_rejects(lab: Lab) -> None:
    with pytest.raises(HostKeyRejected):
        _run(lab.spec(known_hosts=str(lab.base / "does-not-exist")), "echo hi")


def test_tofu_pins_a_new_key(lab: Lab) -> None:
    kh = lab.base / "tofu" / "known_hosts"
    res = _run(lab.spec(known_hosts=str(kh), trust_on_first_use=True), "echo first")
    assert res.stdout == "first\n"
    assert kh.read_text() == lab.target.kh_line
    assert kh.stat().st_mode & 0o777 == 0o600
    # pinned: strict checking now accepts it, and a second TOFU run adds nothing
    assert _run(lab.spec(known_hosts=str(kh)), "echo again").stdout == "again\n"
    _run(lab.spec(known_hosts=str(kh), trust_on_first_use=True), "true")
    assert kh.read_text() == lab.target.kh_line


def test_tofu_still_rejects_a_changed_key(lab: Lab) -> None:
    impostor = _keygen(lab.base / "impostor_host")
    kind, b64 = Path(f"{impostor}.pub").read_text().split()[:2]
    kh = lab.base / "kh_changed"
    before = f"[127.0.0.1]:{lab.target.port} {kind} {b64}\n"
    kh.write_text(before)
    with pytest.raises(HostKeyRejected, match="CHANGED") as info:
        _run(lab.spec(known_hosts=str(kh), trust_on_first_use=True), "echo hi")
    assert _fingerprint(lab.target.host_key) in str(info.value)
    assert _fingerprint(impostor) in str(info.value)
    assert kh.read_text() == before


def test_hashed_known_hosts_entries_work(lab: Lab) -> None:
    kh = lab.base / "kh_hashed"
    kh.write_text(lab.target.kh_line)
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(kh)], check=True, capture_output=True)
    assert kh.read_text().startswith("|1|")
    assert _run(lab.spec(known_hosts=str(kh)), "echo ok").stdout == "ok\n"


def test_known_hosts_is_parsed_once_and_again_when_it_changes(lab: Lab) -> None:
    # parsed once for every host of a run (not once per host), yet a changed file is never read stale
    kh = lab.base / "kh_cached"
    kh.write_text(lab.target.kh_line)
    assert known_host_keys(kh) is known_host_keys(kh)
    assert _run(lab.spec(known_hosts=str(kh)), "echo ok").stdout == "ok\n"
    impostor = _keygen(lab.base / "impostor_cached")
    kind, b64 = Path(f"{impostor}.pub").read_text().split()[:2]
    kh.write_text(f"[127.0.0.1]:{lab.target.port} {kind} {b64}\n")
    with pytest.raises(HostKeyRejected, match="CHANGED"):
        _run(lab.spec(known_hosts=str(kh)), "echo hi")
    kh.write_text("")
    with pytest.raises(HostKeyRejected):
        _run(lab.spec(known_hosts=str(kh)), "echo hi")


def _key_line(pub: Path) -> str:
    return " ".join(pub.read_text().split()[:2])


def test_known_hosts_markers_are_read_as_openssh_reads_them(lab: Lab) -> None:
    """Issue 37 item 6: `@cert-authority` and `@revoked` lines (and a line of garbage) in known_hosts cost only
    the hosts they name; paramiko's own loader failed every host with InvalidHostKey "Incorrect padding"."""
    ca = _keygen(lab.base / "markers_ca")
    other = _keygen(lab.base / "markers_other")
    kh = lab.base / "kh_markers"
    kh.write_text(f"@cert-authority *.corp.example {_key_line(Path(f'{ca}.pub'))}\n"
                  f"@revoked old.example {_key_line(Path(f'{other}.pub'))}\n"
                  "broken.example ssh-ed25519 AAAA!!notbase64\n" + lab.target.kh_line)
    assert _run(lab.spec(known_hosts=str(kh)), "echo ok").stdout == "ok\n"


def test_a_revoked_host_key_is_refused_with_its_reason(lab: Lab) -> None:
    name = f"[127.0.0.1]:{lab.target.port}"
    revoked = f"@revoked {name} {_key_line(Path(f'{lab.target.host_key}.pub'))}\n"
    kh = lab.base / "kh_revoked"
    kh.write_text(revoked + lab.target.kh_line)  # revoked wins over the same key listed as known
    with pytest.raises(HostKeyRejected, match="marked @revoked") as info:
        _run(lab.spec(known_hosts=str(kh)), "echo hi")
    assert _fingerprint(lab.target.host_key) in str(info.value)
    tofu = lab.base / "kh_revoked_tofu"
    tofu.write_text(revoked)
    with pytest.raises(HostKeyRejected, match="marked @revoked"):  # and is never pinned on first use
        _run(lab.spec(known_hosts=str(tofu), trust_on_first_use=True), "echo hi")
    assert tofu.read_text() == revoked


def test_a_host_known_only_by_cert_authority_is_named_as_unsupported(lab: Lab) -> None:
    ca = _keygen(lab.base / "only_ca")
    kh = lab.base / "kh_ca_only"
    kh.write_text(f"@cert-authority [127.0.0.1]:* {_key_line(Path(f'{ca}.pub'))}\n")
    with pytest.raises(HostKeyRejected, match="only by @cert-authority .*host certificates are not supported"):
        _run(lab.spec(known_hosts=str(kh), trust_on_first_use=True), "echo hi")
    assert len(kh.read_text().splitlines()) == 1  # nothing pinned


def test_a_scan_with_a_revoked_key_is_a_host_status_not_a_crash(lab: Lab, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@revoked * {_key_line(Path(f'{lab.target.host_key}.pub'))}\n" + lab.target.kh_line)
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", f"ssh://root@127.0.0.1:{lab.target.port}", "--ssh-known-hosts", str(kh),
                 "--ssh-identity", str(lab.key), "-F", str(lab.base / "empty_ssh_config"),
                 "--format", "json", "--out", str(tmp_path / "r"),
                 "--store", str(tmp_path / "h.sqlite3")], Env(out, err))
    [host] = json.loads((tmp_path / "r" / "report.json").read_text())["hosts"]
    assert code == 3 and host["status"] == "host_key_rejected" and "@revoked" in host["error"], err.getvalue()


# -- auth and reachability -------------------------------------------------------------------------


def test_wrong_key_is_auth_failed(lab: Lab) -> None:
    with pytest.raises(AuthFailed) as info:
        _run(lab.spec(identity_file=str(lab.wrong_key)), "echo hi")
    assert not isinstance(info.value, HostKeyRejected)


def test_missing_identity_file_is_auth_failed(lab: Lab) -> None:
    with pytest.raises(AuthFailed, match="identity file not found"):
        _run(lab.spec(identity_file=str(lab.base / "nope")), "echo hi")


def test_closed_port_is_unreachable(lab: Lab) -> None:
    with pytest.raises(Unreachable):
        _run(lab.spec(target=f"ssh://root@127.0.0.1:{_free_port()}"), "echo hi")


def test_unresolvable_name_is_unreachable(lab: Lab) -> None:
    with pytest.raises(Unreachable, match="resolve"):
        _run(lab.spec(target="ssh://root@no-such-host.invalid"), "echo hi")


def test_silent_listener_times_out_as_unreachable(lab: Lab) -> None:
    """A port that accepts TCP but never sends a banner: bounded by connect_timeout."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        started = time.monotonic()
        with pytest.raises(Unreachable):
            _run(lab.spec(target=f"ssh://root@127.0.0.1:{silent.getsockname()[1]}", connect_timeout=1), "x")
        assert time.monotonic() - started < 5


def test_a_port_that_hangs_up_at_once_is_not_called_silent(lab: Lab) -> None:
    """Issue 37 item 8: a server that closes the connection before any banner was reported as "no SSH banner
    within 10.0s" after 0.0 s; it says the connection was closed."""
    with socket.socket() as closing:
        closing.bind(("127.0.0.1", 0))
        closing.listen(8)

        def hang_up() -> None:
            with contextlib.suppress(OSError):
                conn, _ = closing.accept()
                conn.close()

        threading.Thread(target=hang_up, daemon=True).start()
        with pytest.raises(Unreachable) as info:
            _run(lab.spec(target=f"ssh://root@127.0.0.1:{closing.getsockname()[1]}", connect_timeout=10), "x")
    assert "closed before the SSH banner" in str(info.value) and "within 10.0s" not in str(info.value), info.value


def test_an_upper_case_scheme_takes_the_ssh_options(lab: Lab, tmp_path: Path) -> None:
    """Issue 37 item 8: `SSH://` scanned but refused `--ssh-*` ("applies to ssh:// hosts"): schemes are
    case-insensitive."""
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", f"SSH://root@127.0.0.1:{lab.target.port}", "--ssh-known-hosts", str(lab.known_hosts),
                 "--ssh-identity", str(lab.key), "-F", str(lab.base / "empty_ssh_config"), "--binary", "sh",
                 "--format", "json", "--out", str(tmp_path / "r"), "--store", str(tmp_path / "h.sqlite3")],
                Env(out, err))
    assert code in (0, 1), err.getvalue()
    [host] = json.loads((tmp_path / "r" / "report.json").read_text())["hosts"]
    assert host["status"] == "ok" and host["target"].startswith("ssh://"), host


# -- ProxyJump and ssh_config ----------------------------------------------------------------------


def test_proxy_jump_through_bastion(lab: Lab) -> None:
    spec = lab.spec(proxy_jump=f"root@127.0.0.1:{lab.bastion.port}")
    with SSHTransport(spec) as t:
        res = t.run(shell_request("echo via-bastion"))
        assert res.stdout == "via-bastion\n"
        assert len(t._clients) == 2
        # the target's connection rides on a channel of the bastion's connection
        assert isinstance(t._clients[1].get_transport().sock, paramiko.Channel)  # type: ignore[union-attr]


def test_proxy_jump_checks_the_bastion_host_key(lab: Lab) -> None:
    only_target = lab.base / "kh_only_target"
    only_target.write_text(lab.target.kh_line)
    spec = lab.spec(proxy_jump=f"root@127.0.0.1:{lab.bastion.port}", known_hosts=str(only_target))
    with pytest.raises(HostKeyRejected, match=f":{lab.bastion.port}"):
        _run(spec, "echo hi")


def test_proxy_jump_checks_the_target_host_key(lab: Lab) -> None:
    only_bastion = lab.base / "kh_only_bastion"
    only_bastion.write_text(lab.bastion.kh_line)
    spec = lab.spec(proxy_jump=f"root@127.0.0.1:{lab.bastion.port}", known_hosts=str(only_bastion))
    with pytest.raises(HostKeyRejected, match=f":{lab.target.port}"):
        _run(spec, "echo hi")


def test_proxy_jump_refused_by_bastion_is_unreachable(lab: Lab) -> None:
    """The bastion only permits forwarding to the target's port: proof the hop really goes through it."""
    spec = lab.spec(
        target=f"ssh://root@127.0.0.1:{lab.bastion.port}", proxy_jump=f"root@127.0.0.1:{lab.bastion.port}"
    )
    with pytest.raises(Unreachable, match="jump host"):
        _run(spec, "echo hi")


def test_hosts_behind_one_bastion_respect_its_max_startups(lab: Lab, tmp_path: Path) -> None:
    """16 hosts scanned at once through a bastion whose sshd keeps at most 3 unauthenticated connections
    (`MaxStartups 3`: the 4th is dropped). With at most 1 handshake and 4 connections per jump host
    (jumplimits), every host gets through and no more than 4 run at once; without the bounds, 16
    simultaneous handshakes lose hosts to MaxStartups. (1, not 3: sshd counts a connection as starting
    until its child reports the login, which lags the client's view under load.)"""
    from auditor.transport import jumplimits

    strict = _start_sshd(lab.base, "strict_bastion", lab.base / "authorized_keys",
                         f"PermitOpen 127.0.0.1:{lab.target.port}", max_startups="3")
    known = tmp_path / "known_hosts"
    known.write_text(lab.target.kh_line + strict.kh_line)
    running = tmp_path / "running"
    running.mkdir(mode=0o777)
    # each run notes itself in `running`, counts who else is there, lingers, leaves
    script = f'd={running}; touch "$d/$$"; ls "$d" | wc -l; sleep 2; rm -f "$d/$$"\n'
    spec = lab.spec(proxy_jump=f"root@127.0.0.1:{strict.port}", known_hosts=str(known))
    barrier = threading.Barrier(16)
    seen: list[int] = []
    errors: list[str] = []

    def one() -> None:
        barrier.wait()
        try:
            with SSHTransport(spec) as t:
                seen.append(int(t.run(shell_request(script)).stdout))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(f"{type(exc).__name__}: {exc}")

    jumplimits.reset(handshakes=1, connections=4)
    try:
        threads = [threading.Thread(target=one) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        jumplimits.reset()
        strict.proc.terminate()
        strict.proc.wait(timeout=10)
    assert errors == []
    assert len(seen) == 16
    assert max(seen) <= 4, seen


def test_ssh_config_hostname_user_port_identity_and_jump(lab: Lab) -> None:
    cfg = lab.base / "ssh_config"
    cfg.write_text(
        f"""Host web
  HostName 127.0.0.1
  User root
  Port {lab.target.port}
  IdentityFile {lab.keys["ecdsa"]}

Host web-behind
  HostName 127.0.0.1
  Port {lab.target.port}
  User root
  IdentityFile {lab.keys["rsa"]}
  ProxyJump jump

Host jump
  HostName 127.0.0.1
  Port {lab.bastion.port}
  User root
  IdentityFile {lab.keys["ed25519"]}
"""
    )
    spec = lab.spec(target="ssh://web", ssh_config=str(cfg), identity_file=None)
    hop = resolve_route(spec)[-1]
    assert (hop.hostname, hop.user, hop.port, hop.key_files) == (
        "127.0.0.1",
        "root",
        lab.target.port,
        (str(lab.keys["ecdsa"]),),
    )
    assert _run(spec, "id -un").stdout == "root\n"
    behind = replace(spec, target="ssh://web-behind")
    route = resolve_route(behind)
    assert [(h.alias, h.port) for h in route] == [("jump", lab.bastion.port), ("web-behind", lab.target.port)]
    with SSHTransport(behind) as t:
        assert t.run(shell_request("echo behind")).stdout == "behind\n"
        assert len(t._clients) == 2


# -- non-root users and sudo -----------------------------------------------------------------------


def test_non_root_user_gets_sudo_n(lab: Lab) -> None:
    spec = lab.spec(target=f"ssh://{SUDO_USER}@127.0.0.1:{lab.target.port}")
    with SSHTransport(spec) as t:
        assert t.use_sudo
        res = t.run(shell_request('id -u; printf "%s|" "$@"', ["a b", "$(id)"]))
    assert res.exit_status == 0, res.stderr
    assert res.stdout == "0\na b|$(id)|"


def test_sudo_disabled_runs_as_the_user(lab: Lab) -> None:
    spec = lab.spec(target=f"ssh://{SUDO_USER}@127.0.0.1:{lab.target.port}", sudo=False)
    res = _run(spec, "id -un")
    assert res.stdout == f"{SUDO_USER}\n"


def test_sudo_needing_a_password_is_auth_failed(lab: Lab) -> None:
    spec = lab.spec(target=f"ssh://{PLAIN_USER}@127.0.0.1:{lab.target.port}")
    with pytest.raises(AuthFailed, match="sudo -n"):
        _run(spec, "id -u")


def test_build_command_quotes_everything() -> None:
    assert build_command(["a b", "$(x)", "it's"], sudo=True) == (
        "sudo -n /bin/sh -s -- 'a b' '$(x)' 'it'\"'\"'s'"
    )
    assert build_command([], sudo=False) == "/bin/sh -s --"
