"""The floor: a bare paramiko script that runs ami-auditor's probe in one exec per host (one thread per
host) and keeps the raw output — no parsing, no snapshot, no files. What one round trip costs without
anything ami-auditor adds.

    python3 benchmarks/peers/bare_paramiko.py HOSTS.json

HOSTS.json as for testinfra_gather.py. Prints one JSON line per host: {"host", "bytes", "error"}.
"""

from __future__ import annotations

import json
import secrets
import socket
import sys
import threading
from pathlib import Path

import paramiko

PROBE = (Path(__file__).resolve().parents[2] / "auditor" / "collect" / "probe.sh").read_bytes()


def one(cfg: dict, name: str, addr: str, port: int, out: dict) -> None:
    try:
        sock = socket.create_connection((addr, port), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client = paramiko.SSHClient()
        client.load_host_keys(cfg["known_hosts"])
        client.connect(addr, port=port, username="root", key_filename=cfg["identity"], sock=sock,
                       allow_agent=False, look_for_keys=False, timeout=30)
        chan = client.get_transport().open_session()  # type: ignore[union-attr]
        chan.set_combine_stderr(True)
        chan.exec_command("/bin/sh -s -- " + " ".join(cfg["binaries"]))
        chan.sendall(b"AMI_NONCE=" + secrets.token_hex(16).encode() + b"\n" + PROBE)
        chan.shutdown_write()
        data = bytearray()
        while chunk := chan.recv(65536):
            data += chunk
        chan.recv_exit_status()
        client.close()
        out[name] = {"host": name, "bytes": len(data), "error": None}
    except Exception as exc:  # noqa: BLE001
        out[name] = {"host": name, "bytes": 0, "error": f"{type(exc).__name__}: {exc}"}


def main() -> int:
    cfg = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    out: dict[str, dict] = {}
    threads = [threading.Thread(target=one, args=(cfg, *h, out)) for h in cfg["hosts"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in sorted(out):
        print(json.dumps(out[name]))
    return 0 if all(v["error"] is None for v in out.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
