"""A loopback HTTP proxy in front of moto's S3 that injects faults into chosen requests.

`rule(method, path) -> action | None`, first match wins; actions: ("error", status, code, message),
("hang",) — read the request, never answer (until stop) — and ("trickle", seconds, bytes): the real
answer, `bytes` at a time with a pause after each. Everything else is passed through unchanged.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

Rule = Callable[[str, str], tuple[Any, ...] | None]


class S3FaultProxy:
    def __init__(self, upstream: str):
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.rules: list[Rule] = []
        self.seen: list[tuple[str, str, str]] = []  # (method, path, action or "pass")
        self.stopping = threading.Event()

    def __enter__(self) -> S3FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                action = next((a for a in (rule(self.command, self.path) for rule in proxy.rules) if a), None)
                proxy.seen.append((self.command, self.path, action[0] if action else "pass"))
                if action and action[0] == "hang":
                    proxy.stopping.wait()
                    self.close_connection = True
                    return
                if action and action[0] == "error":
                    data = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{action[2]}</Code>"
                            f"<Message>{action[3]}</Message><RequestId>x</RequestId></Error>").encode()
                    self.send_response(action[1])
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=60)
                conn.request(self.command, self.path, body=body or None, headers=dict(self.headers.items()))
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for key, value in resp.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                step = action[2] if action and action[0] == "trickle" else len(data) or 1
                for i in range(0, len(data), step):
                    try:
                        self.wfile.write(data[i:i + step])
                        self.wfile.flush()
                    except OSError:
                        return
                    if action and proxy.stopping.wait(action[1]):
                        return

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
