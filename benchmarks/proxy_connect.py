"""Connection establishment through a SOCKS5 proxy against a direct one, in the same run.

    .venv/bin/python -m benchmarks.proxy_connect [--rounds 15] [--per-round 40]

Each establishment is what a pool does for a new connection: open the stream, run the handshake ``hello``,
close. The server is the loopback responder (its own process, answering at once); the SOCKS5 proxy is the
tests' own (``tests/support/socks5_proxy.py``), on an event loop in a thread of its own. The client's CPU is
the time its thread spent (``time.thread_time``), so neither the proxy's work nor the server's is counted;
its wall time includes the proxy's round trips.

Three ways are measured, interleaved within each round so that drift affects them alike:

- ``direct``: no proxy;
- ``python-socks``: through the proxy with mongio's ``SocksProxy`` (python-socks, the ``mongio[socks]`` extra);
- ``hand-written``: through the proxy with a minimal SOCKS5 client written here for the comparison only
  (no authentication, no error reporting), which hands its socket to the same path: what writing the
  protocol ourselves would cost at best.

The table shows, per way, the median over rounds of the per-establishment medians (microseconds) of wall
and CPU time, with min-max over rounds, and each median's ratio to the direct one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import struct
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tests.support.socks5_proxy import Socks5Proxy

from benchmarks.loopback_responder import LoopbackResponderProcess
from mongio.connection.establish import ConnectionSettings, establish
from mongio.connection.socks import SocksProxy
from mongio.connection.transport import Address
from mongio.options.proxy_options import ProxyOptions

WAYS = ("direct", "python-socks", "hand-written")


class HandWrittenSocks5(SocksProxy):
    """The least a SOCKS5 client does (RFC 1928, no authentication, CONNECT by host name), for the comparison:
    no error is told apart, nothing is bounded but by the caller's timeout."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(ProxyOptions(host, port))
        self._address = (host, port)

    async def open_socket(self, address: Address, connect_timeout: float | None) -> socket.socket:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            async with asyncio.timeout(connect_timeout):
                await loop.sock_connect(sock, self._address)
                await loop.sock_sendall(sock, b"\x05\x01\x00")
                if await _receive(loop, sock, 2) != b"\x05\x00":
                    raise OSError("the proxy refused the greeting")
                name = address[0].encode("idna")
                port = address[1] if address[1] is not None else 27017
                await loop.sock_sendall(sock, b"\x05\x01\x00\x03" + bytes((len(name),)) + name + struct.pack("!H", port))
                head = await _receive(loop, sock, 4)
                if head[1] != 0:
                    raise OSError(f"the proxy answered {head[1]}")
                kind_length = {1: 4, 4: 16}.get(head[3])
                length = kind_length if kind_length is not None else (await _receive(loop, sock, 1))[0]
                await _receive(loop, sock, length + 2)
        except BaseException:
            sock.close()
            raise
        return sock


async def _receive(loop: asyncio.AbstractEventLoop, sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = await loop.sock_recv(sock, size - len(data))
        if not chunk:
            raise OSError("the proxy closed the connection")
        data += chunk
    return data


class ProxyThread:
    """The SOCKS5 proxy on an event loop of its own, in a thread, so the client's thread time leaves it out."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="socks5-proxy", daemon=True)
        self.proxy = Socks5Proxy()

    def _call(self, coroutine: Coroutine[Any, Any, object]) -> None:
        future: Future[object] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        future.result(30)

    def start(self) -> int:
        self._thread.start()
        self._call(self.proxy.start())
        return self.proxy.port

    def stop(self) -> None:
        self._call(self.proxy.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()


async def _measure(open_once: Callable[[], Awaitable[None]], count: int) -> tuple[float, float]:
    """Median wall and thread CPU seconds of ``count`` establishments."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(count):
        wall, cpu = time.perf_counter(), time.thread_time()
        await open_once()
        cpus.append(time.thread_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return statistics.median(walls), statistics.median(cpus)


async def _run(server: Address, proxy_port: int, rounds: int, per_round: int) -> dict[str, list[tuple[float, float]]]:
    settings = {
        "direct": ConnectionSettings(connect_timeout=5),
        "python-socks": ConnectionSettings(connect_timeout=5, proxy=SocksProxy(ProxyOptions("127.0.0.1", proxy_port))),
        "hand-written": ConnectionSettings(connect_timeout=5, proxy=HandWrittenSocks5("127.0.0.1", proxy_port)),
    }

    def opener(way: str) -> Callable[[], Awaitable[None]]:
        async def open_once() -> None:
            conn = await establish(server, settings[way], authenticate=False)
            conn.close("benchmark")

        return open_once

    results: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for way in WAYS:  # warm up: imports, first connections
        await _measure(opener(way), 5)
    for index in range(rounds):
        order = WAYS[index % len(WAYS) :] + WAYS[: index % len(WAYS)]
        for way in order:
            results[way].append(await _measure(opener(way), per_round))
    return results


def table(results: dict[str, list[tuple[float, float]]]) -> str:
    direct_wall = statistics.median(wall for wall, _ in results["direct"])
    direct_cpu = statistics.median(cpu for _, cpu in results["direct"])
    lines = [
        f"{'way':<14} {'wall µs':>9} {'(min-max)':>15} {'ratio':>6} {'CPU µs':>9} {'(min-max)':>15} {'ratio':>6}",
    ]
    for way, samples in results.items():
        walls = [wall * 1e6 for wall, _ in samples]
        cpus = [cpu * 1e6 for _, cpu in samples]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        lines.append(
            f"{way:<14} {wall:>9.0f} {f'({min(walls):.0f}-{max(walls):.0f})':>15} {wall / (direct_wall * 1e6):>6.2f}"
            f" {cpu:>9.0f} {f'({min(cpus):.0f}-{max(cpus):.0f})':>15} {cpu / (direct_cpu * 1e6):>6.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--per-round", type=int, default=40, help="establishments per way in each round")
    parser.add_argument("--json", type=Path, help="also write the per-round medians here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        document = Path(directory) / "find.json"
        document.write_text(json.dumps({"text": "benchmark"}), "utf-8")
        responder = LoopbackResponderProcess(document).start()
        proxy = ProxyThread()
        try:
            proxy_port = proxy.start()
            results = asyncio.run(_run((responder.host, responder.port), proxy_port, args.rounds, args.per_round))
        finally:
            proxy.stop()
            responder.stop()
    print(f"connection establishment (open + hello + close), {args.rounds} rounds x {args.per_round} per way")
    print(table(results))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1), "utf-8")


if __name__ == "__main__":
    main()
