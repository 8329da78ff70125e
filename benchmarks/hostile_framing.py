"""What a server forging message lengths costs the client: time to the error, the error, peak memory.

    .venv/bin/python -m benchmarks.hostile_framing [--connections 10] [--rounds 3] [--trickle-kib 1024]
        [--piece-kib 64] [--interval-ms 10] [--cases ...] [--json FILE]

A peer in a child process on 127.0.0.1 answers the handshake (and any command but ``ping``) like a standalone
server, with the ``maxMessageSizeBytes`` the case gives its hello. It answers ``ping`` with a 16-byte header
declaring the case's length, then a trickle (``--trickle-kib`` of zeros in pieces of ``--piece-kib`` every
``--interval-ms``), then hangs up. It holds every ``ping`` until all ``--connections`` have come, so that
every connection of the pool receives its forged header at the same moment (the peer prints that moment's
``time.monotonic()``, a clock Linux shares between processes).

The client, in a process of its own for each case and round, opens a ``MongoClient`` with
``maxPoolSize=--connections``, runs one ``buildInfo`` (so that imports and the first connection are behind
it), resets its peak RSS (``/proc/self/clear_refs``), then sends ``--connections`` concurrent ``ping``s and
waits for their errors. Reported per case, median over rounds (min-max beside it): the time from the
forged headers' release to the last error, the peak RSS growth of the client process over its RSS before the
pings, and the error's text.

The cases: ``2gib`` (a header declaring 2 GiB, the most a length field holds, after an ordinary hello),
``1tb-2gib`` (a hello claiming a 1 TB ``maxMessageSizeBytes``, then the 2 GiB header), ``at-limit`` (a
header declaring exactly the limit, 48,000,000 bytes, then the trickle) and ``1tb-at-ceiling`` (the 1 TB
hello, then a header declaring the ceiling that claim is lowered to, then the trickle). The first two are
refused at their header; the last two are accepted, and their memory follows the trickle, not the claim.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
TWO_GIB = 2**31 - 1
TERABYTE = 10**12
HELLO_NAMES = ("hello", "ismaster")


class Case(NamedTuple):
    description: str
    hello_max_message_size: int
    declared: int


def _cases() -> dict[str, Case]:
    from mongio.wire.header import DEFAULT_MAX_MESSAGE_SIZE, MAX_MESSAGE_SIZE_CEILING

    return {
        "2gib": Case("2 GiB header", DEFAULT_MAX_MESSAGE_SIZE, TWO_GIB),
        "1tb-2gib": Case("hello claims 1 TB, then a 2 GiB header", TERABYTE, TWO_GIB),
        "at-limit": Case("header at the limit, then the trickle", DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_MAX_MESSAGE_SIZE),
        "1tb-at-ceiling": Case(
            "hello claims 1 TB, header at the ceiling, then the trickle", TERABYTE, MAX_MESSAGE_SIZE_CEILING
        ),
    }


# -- the peer ------------------------------------------------------------------------------------------------


class Trickle(NamedTuple):
    total: int
    piece: int
    interval: float


class ForgingPeer:
    """Answers the handshake honestly (but for the announced maxMessageSizeBytes) and every ``ping`` with a
    forged header and a trickle, once ``connections`` pings have come."""

    def __init__(self, case: Case, connections: int, trickle: Trickle) -> None:
        self.case = case
        self.connections = connections
        self.trickle = trickle
        self.pings = 0
        self.all_pinged = asyncio.Event()
        self.next_id = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from mongio.wire.header import HEADER, HEADER_SIZE

        try:
            while True:
                header = await reader.readexactly(HEADER_SIZE)
                length, request_id, _, _ = HEADER.unpack(header)
                message = header + await reader.readexactly(length - HEADER_SIZE)
                name, legacy = self._command_name(message)
                if name == "ping":
                    await self._forge(writer, request_id)
                    return
                writer.write(self._reply(request_id, name, legacy))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client hung up (after refusing a header, or when closing)
        finally:
            writer.close()

    @staticmethod
    def _command_name(message: bytes) -> tuple[str, bool]:
        from mongio.bson import decode
        from mongio.wire import OpMsg, parse_message

        content = parse_message(message).content
        if isinstance(content, OpMsg):
            return next(iter(decode(content.body)), ""), False
        return next(iter(decode(content.query)), ""), True  # type: ignore[union-attr]

    def _reply(self, request_id: int, name: str, legacy: bool) -> bytes:
        from mongio.bson import encode
        from mongio.wire import encode_op_msg, encode_op_reply

        self.next_id += 1
        document: dict[str, Any] = {"ok": 1}
        if name.lower() in HELLO_NAMES:
            document = {
                "helloOk": True,
                "isWritablePrimary": True,
                "ismaster": True,
                "maxBsonObjectSize": 16 * 1024 * 1024,
                "maxMessageSizeBytes": self.case.hello_max_message_size,
                "maxWriteBatchSize": 100_000,
                "minWireVersion": 0,
                "maxWireVersion": 21,
                "ok": 1,
            }
        body = encode(document)
        if legacy:
            return bytes(encode_op_reply(self.next_id, request_id, [body]))
        return bytes(encode_op_msg(self.next_id, body, response_to=request_id))

    async def _forge(self, writer: asyncio.StreamWriter, request_id: int) -> None:
        from mongio.wire.header import HEADER, OP_MSG

        self.pings += 1
        if self.pings == self.connections:
            print(f"released {time.monotonic()!r}", flush=True)
            self.all_pinged.set()
        await self.all_pinged.wait()
        writer.write(HEADER.pack(self.case.declared, 1, request_id, OP_MSG))
        piece = bytes(self.trickle.piece)
        sent = 0
        while sent < self.trickle.total:
            writer.write(piece[: self.trickle.total - sent])
            sent += len(piece)
            await writer.drain()
            await asyncio.sleep(self.trickle.interval)


async def run_peer(case: Case, connections: int, trickle: Trickle) -> None:
    peer = ForgingPeer(case, connections, trickle)
    server = await asyncio.start_server(peer.serve, "127.0.0.1", 0)
    print(f"ready {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


# -- the client ----------------------------------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark of this process to its RSS now (Linux); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return True


def peak_rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        found = re.search(r"VmHWM:\s+(\d+) kB", status.read())
    if found is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return int(found.group(1)) * 1024


async def timed_ping(client: Any, address: str) -> tuple[float, str]:
    """When the ``ping`` ended, and its error (the peer's address, different each run, as ``<peer>``)."""
    try:
        await client.admin.command("ping")
    except Exception as error:
        return time.monotonic(), f"{type(error).__name__}: {error}".replace(address, "<peer>")
    return time.monotonic(), "no error"


async def run_client(port: int, connections: int) -> dict[str, Any]:
    from mongio import MongoClient

    address = f"127.0.0.1:{port}"
    uri = f"mongodb://{address}/"

    client: Any = MongoClient(
        uri, maxPoolSize=connections, directConnection=True, retryReads=False, serverSelectionTimeoutMS=10_000
    )
    try:
        await client.admin.command("buildInfo")
        gc.collect()
        peak_reset = reset_peak_rss()
        before = rss_bytes()
        outcomes = await asyncio.gather(*(timed_ping(client, address) for _ in range(connections)))
        peak = peak_rss_bytes()
    finally:
        await client.close()
    return {
        "error_times": [moment for moment, _ in outcomes],
        "errors": sorted({text for _, text in outcomes}),
        "peak_growth": peak - before,
        "peak_reset": peak_reset,
    }


# -- the controller ------------------------------------------------------------------------------------------


def _child(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.hostile_framing", *arguments]


def _environment() -> dict[str, str]:
    paths = [str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}


def measure_once(name: str, connections: int, trickle: Trickle) -> dict[str, Any]:
    """One round of one case: a peer process, a client process, the figures."""
    trickle_arguments = [str(trickle.total), str(trickle.piece), str(trickle.interval)]
    peer = subprocess.Popen(
        _child("--peer", name, str(connections), *trickle_arguments),
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=_environment(),
    )
    try:
        assert peer.stdout is not None
        ready = peer.stdout.readline().split()
        if ready[:1] != ["ready"]:
            raise RuntimeError(f"the forging peer did not start (it printed {ready!r})")
        done = subprocess.run(
            _child("--client", ready[1], str(connections)),
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=_environment(),
            check=False,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the client failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        released = peer.stdout.readline().split()
        if released[:1] != ["released"]:
            raise RuntimeError(f"the peer never received {connections} pings (it printed {released!r})")
        result["time_to_error"] = max(result.pop("error_times")) - float(released[1])
        return result
    finally:
        peer.terminate()
        peer.wait(timeout=15)


def _median_and_range(values: list[float], scale: float, digits: int) -> str:
    scaled = [value / scale for value in values]
    return f"{statistics.median(scaled):.{digits}f} ({min(scaled):.{digits}f}-{max(scaled):.{digits}f})"


def table(results: dict[str, list[dict[str, Any]]], connections: int) -> str:
    cases = _cases()
    lines = [
        f"| case ({connections} connections) | declared length | hello's maxMessageSizeBytes | time to the last "
        "error, ms | peak RSS growth, MiB | error |",
        "|---|---|---|---|---|---|",
    ]
    for name, rounds in results.items():
        case = cases[name]
        errors = sorted({text for result in rounds for text in result["errors"]})
        lines.append(
            f"| {case.description} | {case.declared:,} | {case.hello_max_message_size:,} | "
            f"{_median_and_range([r['time_to_error'] for r in rounds], 1e-3, 1)} | "
            f"{_median_and_range([r['peak_growth'] for r in rounds], 1024 * 1024, 1)} | "
            f"{'; '.join(errors)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["--peer"]:
        name, connections, total, piece, interval = arguments[1:6]
        trickle = Trickle(int(total), int(piece), float(interval))
        asyncio.run(run_peer(_cases()[name], int(connections), trickle))
        return
    if arguments[:1] == ["--client"]:
        port, connections = arguments[1:3]
        print(json.dumps(asyncio.run(run_client(int(port), int(connections)))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trickle-kib", type=int, default=1024, help="bytes sent after each header, in KiB")
    parser.add_argument("--piece-kib", type=int, default=64)
    parser.add_argument("--interval-ms", type=float, default=10.0)
    parser.add_argument("--cases", default=",".join(_cases()))
    parser.add_argument("--json", help="also write every round's figures to this file")
    args = parser.parse_args(arguments)
    unknown = set(args.cases.split(",")) - set(_cases())
    if unknown:
        raise SystemExit(f"unknown case(s) {sorted(unknown)}; choose from {', '.join(_cases())}")
    trickle = Trickle(args.trickle_kib * 1024, args.piece_kib * 1024, args.interval_ms / 1000)
    results: dict[str, list[dict[str, Any]]] = {}
    for name in args.cases.split(","):
        for _ in range(args.rounds):
            result = measure_once(name, args.connections, trickle)
            results.setdefault(name, []).append(result)
            print(
                f"  {name}: {result['time_to_error'] * 1e3:.1f} ms, "
                f"{result['peak_growth'] / 1024 / 1024:.1f} MiB, {result['errors']}",
                flush=True,
            )
    print(table(results, args.connections))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
