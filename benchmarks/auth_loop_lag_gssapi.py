"""Does authentication leave the event loop free? The loop's worst lag while many connections authenticate.

    .venv/bin/python -m benchmarks.auth_loop_lag_gssapi --mechanism gssapi [--connections 100] [--delay 0.2]
                                                 [--kdc-delay 0.2] [--rounds 3]

``--mechanism gssapi``: a throwaway MIT Kerberos realm on loopback (tests/support/kerberos_realm.py, needs
``krb5kdc`` and python-gssapi), and a loopback peer running a real GSSAPI acceptor whose every ``saslStart`` and
``saslContinue`` reply comes ``--delay`` seconds late; the client reaches the KDC through a proxy that holds every
request ``--kdc-delay`` seconds (a KDC across a WAN), so a Kerberos call that fetches a ticket blocks that long.
The peer and the proxy run in a child process (the acceptor's Kerberos calls in worker threads there), so nothing
of them runs in the measured process. Before each round the ticket cache is renewed (``kinit``: only the
ticket-granting ticket), so each round's first connections fetch the service ticket from the slow KDC.

Each round opens one client with ``maxPoolSize`` and ``maxConnecting`` at ``--connections`` and sends that many
``ping``s at once: every ping needs a connection of its own, so that many connections authenticate together.
A ticker task on the client's loop sleeps 1 ms at a time and records how late each wake-up is; the worst
lateness over the round is the loop's worst lag. Each driver runs its rounds in the same process, against the
same realm and peer:

- ``mongio``: Kerberos calls in worker threads, host name lookups through the loop's executor;
- ``pymongo``: PyMongo's ``AsyncMongoClient`` (needs the ``kerberos`` module: ``pip install pykerberos``),
  skipped, saying so, when it is not installed.

Both authenticate with the ticket cache (``kinit``), with ``CANONICALIZE_HOST_NAME`` ``none`` (the host
``localhost``) and ``forwardAndReverse`` (the host ``127.0.0.1``, which reverse-resolves to ``localhost``);
mongio also with the password in the connection string. The table gives, per driver and way, the worst lag of
each round (milliseconds), their maximum, the largest 99th percentile of the lateness over the rounds, the
median time for all connections to authenticate, and how many authentications the peer saw (the fewest in a
round), and the longest single loop callback over the rounds, in wall and in CPU time (``CallbackTimer``). The ``idle`` row is the ticker
alone for a second: on a loaded machine the operating system's scheduling alone makes the loop late, and that
row says by how much.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tests.support.kerberos_realm import (
    USER,
    GssapiMember,
    KerberosRealm,
    missing_kerberos,
    realm_environment,
    start_realm,
)
from tests.support.loopback_peer import HandlerResult, LoopbackPeer, Request

from mongio import MongoClient

TICK = 0.001


class PeerProcess:
    """The GSSAPI peer, and a proxy that delays every request to the KDC, in a child process of their own (this
    module with ``--serve``), so that neither their work nor their threads compete with the measured loop for this
    process's interpreter lock."""

    def __init__(self, keytab: str, delay: float, kdc_port: int, kdc_delay: float) -> None:
        command = [
            sys.executable, "-m", "benchmarks.auth_loop_lag_gssapi", "--serve", keytab, "--delay", str(delay),
            "--kdc-port", str(kdc_port), "--kdc-delay", str(kdc_delay),
        ]  # fmt: skip
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ports(self) -> tuple[int, int]:
        """The peer's port and the KDC proxy's."""
        assert self._process.stdout is not None
        peer, kdc = self._process.stdout.readline().split()
        return int(peer), int(kdc)

    def stop(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(30)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while data := await reader.read(65536):
            await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _kdc_proxy(kdc_port: int, delay: float) -> asyncio.Server:
    """A TCP proxy to the KDC on 127.0.0.1 that holds each request ``delay`` seconds: a KDC far away."""

    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        kdc_reader, kdc_writer = await asyncio.open_connection("127.0.0.1", kdc_port)
        await asyncio.gather(_pipe(client_reader, kdc_writer, delay), _pipe(kdc_reader, client_writer, 0.0))

    return await asyncio.start_server(relay, "127.0.0.1", 0)


class _CountingMember:
    """The peer's handler: the GSSAPI member, plus ``{authenticated: 1}`` answering how many it authenticated."""

    def __init__(self, member: GssapiMember) -> None:
        self.member = member

    async def __call__(self, request: Request) -> HandlerResult:
        if request.command_name == "authenticated":
            return {"ok": 1, "n": len(self.member.authenticated), "failures": self.member.failures[-3:]}
        return await self.member(request)


async def _serve(keytab: str, delay: float, kdc_port: int, kdc_delay: float) -> None:
    proxy = await _kdc_proxy(kdc_port, kdc_delay)
    async with proxy, LoopbackPeer(_CountingMember(GssapiMember(keytab, delay=delay))) as peer:
        print(peer.address[1], proxy.sockets[0].getsockname()[1], flush=True)
        # Until the parent closes our stdin.
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


class Ticker:
    """A task waking every millisecond on the loop under test, recording how late each wake-up is."""

    def __init__(self) -> None:
        self.lateness: list[float] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def worst(self) -> float:
        return max(self.lateness, default=0.0)

    @property
    def p99(self) -> float:
        ordered = sorted(self.lateness)
        return ordered[int(len(ordered) * 0.99)] if ordered else 0.0

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            expected = loop.time() + TICK
            await asyncio.sleep(TICK)
            self.lateness.append(loop.time() - expected)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass


class CallbackTimer:
    """Times every callback the loop runs (``asyncio.Handle._run``, wrapped while measuring): the longest one in
    wall time (blocking calls included, but also any wait for the CPU or for the interpreter lock that worker
    threads hold) and the most CPU time the loop's thread spent in one callback (the loop's own work, free of
    the machine's load, but blind to a call that blocks waiting on the network)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.longest_cpu = 0.0
        self.longest_what = ""
        self._original: Callable[[asyncio.Handle], None] | None = None

    def __enter__(self) -> CallbackTimer:
        original = asyncio.Handle._run
        timer = self

        def timed_run(handle: asyncio.Handle) -> None:
            started, cpu = time.perf_counter(), time.thread_time()
            original(handle)
            took = time.perf_counter() - started
            timer.longest_cpu = max(timer.longest_cpu, time.thread_time() - cpu)
            if took > timer.longest:
                timer.longest = took
                timer.longest_what = repr(handle)[:120]

        self._original = original
        asyncio.Handle._run = timed_run  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._original is not None
        asyncio.Handle._run = self._original  # type: ignore[method-assign,assignment]


@dataclass
class Way:
    """One driver and one way of authenticating, with its measurements."""

    driver: str
    label: str
    uri: str
    lags: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)
    callbacks: list[float] = field(default_factory=list)
    callbacks_cpu: list[float] = field(default_factory=list)
    longest_what: str = ""
    elapsed: list[float] = field(default_factory=list)
    authenticated: list[int] = field(default_factory=list)


async def _mongio_round(uri: str, connections: int) -> None:
    async with MongoClient(uri) as client:
        await asyncio.gather(*(client.admin.command("ping") for _ in range(connections)))


async def _pymongo_round(uri: str, connections: int) -> None:
    from pymongo import AsyncMongoClient

    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri)
    try:
        await asyncio.gather(*(client.admin.command("ping") for _ in range(connections)))
    finally:
        await client.close()


async def _idle_round(seconds: float) -> None:
    await asyncio.sleep(seconds)


ROUNDS: dict[str, Callable[[str, int], Awaitable[None]]] = {"mongio": _mongio_round, "pymongo": _pymongo_round}


async def _authenticated(port: int) -> int:
    """How many authentications the peer has completed (asked without authenticating)."""
    async with MongoClient(f"mongodb://localhost:{port}/?directConnection=true") as client:
        reply = await client.admin.command("authenticated")
    return int(reply["n"])


async def _measure(way: Way, port: int, connections: int) -> None:
    before = await _authenticated(port)
    ticker = Ticker()
    ticker.start()
    started = time.perf_counter()
    try:
        with CallbackTimer() as timer:
            if way.driver == "idle":
                await _idle_round(1.0)
            else:
                await ROUNDS[way.driver](way.uri, connections)
    finally:
        await ticker.stop()
    if timer.longest > max(way.callbacks, default=0.0):
        way.longest_what = timer.longest_what
    way.callbacks.append(timer.longest)
    way.callbacks_cpu.append(timer.longest_cpu)
    way.elapsed.append(time.perf_counter() - started)
    way.lags.append(ticker.worst)
    way.p99s.append(ticker.p99)
    way.authenticated.append(await _authenticated(port) - before)


def _ways(port: int, realm: KerberosRealm, connections: int, drivers: list[str]) -> list[Way]:
    user = quote(USER, safe="")
    password = quote(realm.user_password, safe="")
    pool = f"maxPoolSize={connections}&maxConnecting={connections}&serverSelectionTimeoutMS=30000"

    def uri(userinfo: str, host: str, canonicalize: str) -> str:
        query = f"authMechanism=GSSAPI&authMechanismProperties=CANONICALIZE_HOST_NAME:{canonicalize}&{pool}"
        return f"mongodb://{userinfo}@{host}:{port}/?{query}"

    ways = [Way("idle", "nothing (the machine's own noise)", "")]
    for driver in drivers:
        ways.append(Way(driver, "ticket cache, none", uri(user, "localhost", "none")))
        ways.append(Way(driver, "ticket cache, forwardAndReverse", uri(user, "127.0.0.1", "forwardAndReverse")))
    if "mongio" in drivers:
        ways.append(Way("mongio", "password, none", uri(f"{user}:{password}", "localhost", "none")))
        # The same burst of connections without authentication: what opening them costs the loop by itself.
        ways.append(Way("mongio", "no authentication at all", f"mongodb://localhost:{port}/?{pool}"))
    return ways


async def _run(ways: list[Way], port: int, connections: int, rounds: int, realm: KerberosRealm) -> None:
    for _ in range(rounds):
        # Interleaved, so drift in the machine's load affects every way alike.
        for way in ways:
            # A fresh ticket cache (the ticket-granting ticket only): the round's first connections fetch the
            # service ticket from the (slow) KDC, as after every kinit.
            realm.kinit()
            await _measure(way, port, connections)


def _through_proxy(realm: KerberosRealm, proxy_port: int) -> str:
    """A krb5.conf like the realm's, whose KDC is the delaying proxy; its path."""
    with open(realm.env["KRB5_CONFIG"]) as original:
        text = original.read()
    path = os.path.join(realm.directory, "krb5-slow-kdc.conf")
    with open(path, "w") as slow:
        slow.write(text.replace(f"kdc = 127.0.0.1:{realm.kdc_port}", f"kdc = 127.0.0.1:{proxy_port}"))
    return path


def _report(ways: list[Way], connections: int, delay: float, kdc_delay: float) -> None:
    print(
        f"{connections} connections authenticating with GSSAPI at once; every SASL reply {delay * 1000:.0f} ms late, "
        f"every KDC request {kdc_delay * 1000:.0f} ms late"
    )
    print(
        f"{'driver':8} {'way':40} {'worst lag per round (ms)':26} {'median':>6} {'max':>6} {'p99 max':>7} "
        f"{'longest callback wall/cpu':>25} {'all-auth s':>10} {'auths':>5}"
    )
    for way in ways:
        lags = " ".join(f"{lag * 1000:6.1f}" for lag in way.lags)
        print(
            f"{way.driver:8} {way.label:40} {lags:26} {statistics.median(way.lags) * 1000:6.1f} "
            f"{max(way.lags) * 1000:6.1f} {max(way.p99s) * 1000:7.1f} {max(way.callbacks) * 1000:18.1f}/{max(way.callbacks_cpu) * 1000:6.1f} "
            f"{statistics.median(way.elapsed):10.2f} {min(way.authenticated):>5}"
        )
    print("the longest callback of each way:")
    for way in ways:
        print(f"  {way.driver} {way.label}: {max(way.callbacks) * 1000:.1f} ms {way.longest_what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mechanism", choices=["gssapi"], default="gssapi")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds each SASL reply waits")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kdc-delay", type=float, default=0.2, help="seconds each request to the KDC waits")
    parser.add_argument("--serve", metavar="KEYTAB", help=argparse.SUPPRESS)
    parser.add_argument("--kdc-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve, args.delay, args.kdc_port, args.kdc_delay))
        return
    missing = missing_kerberos()
    if missing is not None:
        raise SystemExit(f"cannot run: {missing}")
    drivers = ["mongio"]
    if importlib.util.find_spec("kerberos") is not None:
        drivers.append("pymongo")
    else:
        print("pymongo: skipped, its GSSAPI needs the kerberos module (pip install pykerberos)")
    realm = start_realm()
    try:
        with realm_environment(realm):
            peer = PeerProcess(realm.keytab_path, args.delay, realm.kdc_port, args.kdc_delay)
            try:
                port, proxy_port = peer.ports()
                os.environ["KRB5_CONFIG"] = _through_proxy(realm, proxy_port)
                ways = _ways(port, realm, args.connections, drivers)
                asyncio.run(_run(ways, port, args.connections, args.rounds, realm))
            finally:
                peer.stop()
            _report(ways, args.connections, args.delay, args.kdc_delay)
    finally:
        realm.stop()


if __name__ == "__main__":
    main()
