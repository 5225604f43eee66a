"""A user-space TCP delay proxy for benchmarks (these machines have no tc/netem).

    python3 -m benchmarks.delayproxy --delay-ms 25 --stats FILE LISTEN=TARGET ...

Each LISTEN (`addr:port`) forwards to its TARGET (`addr:port`); every chunk read in either direction
is written out `--delay-ms` later (a one-way delay, order kept, no bandwidth cap), so a round trip
through it costs 2 × delay. On each connection's close one JSON line goes to FILE:
`{"listen": ..., "turns": N, "up": BYTES, "down": BYTES}` where `turns` counts the client's sends
that follow data from the server (the first send included): the application-level round trips the
client waited for, whatever tool made them. Prints `ready` on stdout once every port listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from typing import TextIO


class Conn:
    """Counters of one proxied connection."""

    def __init__(self, listen: str):
        self.listen = listen
        self.turns = 0
        self.up = 0
        self.down = 0
        self.server_spoke = True  # the SSH server speaks first; the client's first send is a turn

    def record(self, stats: TextIO) -> None:
        stats.write(json.dumps({"listen": self.listen, "turns": self.turns, "up": self.up, "down": self.down}) + "\n")
        stats.flush()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float, conn: Conn,
                upstream: bool) -> None:
    """Copy reader → writer, each chunk released `delay` seconds after it arrived."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def release() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    sender = asyncio.create_task(release())
    try:
        while True:
            data = await reader.read(65536)
            if upstream and data:
                conn.up += len(data)
                if conn.server_spoke:
                    conn.turns += 1
                    conn.server_spoke = False
            elif data:
                conn.down += len(data)
                conn.server_spoke = True
            await queue.put((time.monotonic() + delay, data))
            if not data:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()


async def _serve(listen: str, target: str, delay: float, stats: TextIO) -> asyncio.base_events.Server:
    t_host, t_port = target.rsplit(":", 1)

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        conn = Conn(listen)
        try:
            server_r, server_w = await asyncio.open_connection(t_host, int(t_port))
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, server_w, delay, conn, True),
                             _pipe(server_r, client_w, delay, conn, False), return_exceptions=True)
        for w in (client_w, server_w):
            w.close()
        conn.record(stats)

    l_host, l_port = listen.rsplit(":", 1)
    return await asyncio.start_server(handle, l_host, int(l_port), backlog=512)


async def _main(pairs: list[tuple[str, str]], delay: float, stats: TextIO) -> None:
    servers = [await _serve(listen, target, delay, stats) for listen, target in pairs]
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for s in servers:
        s.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m benchmarks.delayproxy", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay added to every chunk")
    ap.add_argument("--stats", required=True, help="JSON lines, one per closed connection")
    ap.add_argument("pairs", nargs="+", metavar="LISTEN=TARGET")
    args = ap.parse_args(argv)
    pairs = [tuple(p.split("=", 1)) for p in args.pairs]
    with open(args.stats, "a", encoding="utf-8") as stats, \
            contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt):
        asyncio.run(_main(pairs, args.delay_ms / 1000.0, stats))  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
