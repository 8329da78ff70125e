"""The event loop's lag while many connections authenticate with MONGODB-OIDC through slow token sources.

    .venv/bin/python -m benchmarks.oidc_loop_lag [--clients 100] [--delay 0.2] [--rounds 3]

``clients`` clients, each with its own token cache (so each one fetches a token), authenticate at once against
the tests' OIDC server on 127.0.0.1 while a ticker task sleeps 1 ms at a time and records how late each wake-up
is. The server and the fake metadata endpoint run on an event loop in a thread of their own, so the ticker
measures the clients' loop only. The token sources all take ``delay`` seconds:

- ``azure``: ``ENVIRONMENT:azure`` against a fake metadata endpoint that answers after ``delay``;
- ``async-callback``: an ``async def`` callback awaiting ``delay``;
- ``blocking-callback``: a plain callback blocking for ``delay`` (``time.sleep``: a synchronous HTTP client,
  say), which mongio runs in a worker thread;
- ``pymongo-blocking-callback``: the same plain callback given to PyMongo's ``AsyncMongoClient``, which calls it
  on the event loop (skipped when PyMongo is not installed).

``no-auth`` is the same burst without a credential: what opening that many clients and connections costs the
loop anyway. For each way: the worst lag and the median of the per-round 99th percentiles, in milliseconds,
with the wall time of the whole burst (each client runs one ``ping`` on a new, authenticated connection).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.support.metadata_endpoint import Answer, MetadataEndpoint
from tests.support.oidc_server import OidcServer

from mongio import MongoClient
from mongio.auth_oidc import OIDCCallbackContext, OIDCCallbackResult
from mongio.connection.auth.oidc_environments import AZURE_ENDPOINT_VARIABLE

TICK = 0.001


class Ticker:
    """Sleeps ``TICK`` at a time and keeps how late each wake-up came."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(TICK)
            self.lags.append(max(loop.time() - before - TICK, 0.0))

    def __enter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def _burst(make: Callable[[], Any], clients: int) -> tuple[float, list[float]]:
    made = [make() for _ in range(clients)]
    try:
        # Monitoring starts before the measurement: the burst is the pools' first connections, authenticated.
        await asyncio.gather(*(client.aconnect() for client in made))
        with Ticker() as ticker:
            start = time.perf_counter()
            await asyncio.gather(*(client.admin.command("ping") for client in made))
            wall = time.perf_counter() - start
    finally:
        await asyncio.gather(*(client.close() for client in made))
    return wall, ticker.lags


def _ways(server: OidcServer, endpoint: MetadataEndpoint, delay: float) -> dict[str, Callable[[], Any]]:
    def blocking(context: OIDCCallbackContext) -> OIDCCallbackResult:
        time.sleep(delay)
        return OIDCCallbackResult(access_token=server.issue())

    async def awaiting(context: OIDCCallbackContext) -> OIDCCallbackResult:
        await asyncio.sleep(delay)
        return OIDCCallbackResult(access_token=server.issue())

    def mongio_client(properties: dict[str, Any]) -> Callable[[], Any]:
        return lambda: MongoClient(
            server.uri,
            authMechanism="MONGODB-OIDC",
            authMechanismProperties=properties,
            directConnection=True,
        )

    ways = {
        "no-auth": lambda: MongoClient(server.uri, directConnection=True),
        "azure": mongio_client({"ENVIRONMENT": "azure", "TOKEN_RESOURCE": "api://bench"}),
        "async-callback": mongio_client({"OIDC_CALLBACK": awaiting}),
        "blocking-callback": mongio_client({"OIDC_CALLBACK": blocking}),
    }
    try:
        from pymongo import AsyncMongoClient
        from pymongo.auth_oidc import OIDCCallback as PyMongoCallback
        from pymongo.auth_oidc import OIDCCallbackResult as PyMongoResult
    except ImportError:
        return ways

    class Blocking(PyMongoCallback):
        def fetch(self, context: Any) -> Any:
            time.sleep(delay)
            return PyMongoResult(access_token=server.issue())

    ways["pymongo-blocking-callback"] = lambda: AsyncMongoClient(
        server.uri,
        authMechanism="MONGODB-OIDC",
        authMechanismProperties={"OIDC_CALLBACK": Blocking()},
        directConnection=True,
    )
    return ways


class ServerThread:
    """The OIDC server and the metadata endpoint, on an event loop in a thread of their own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server = OidcServer()
        self.endpoint = MetadataEndpoint()

    def __enter__(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.__aenter__(), self.loop).result()
        asyncio.run_coroutine_threadsafe(self.endpoint.__aenter__(), self.loop).result()
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.endpoint.__aexit__(None, None, None), self.loop).result()
        asyncio.run_coroutine_threadsafe(self.server.__aexit__(None, None, None), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def run(clients: int, delay: float, rounds: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, list[float]]] = {}
    with ServerThread() as servers:
        server, endpoint = servers.server, servers.endpoint
        os.environ[AZURE_ENDPOINT_VARIABLE] = endpoint.base_url
        ways = _ways(server, endpoint, delay)
        for _ in range(rounds):
            for name, make in ways.items():
                endpoint.answer = Answer(
                    200, json.dumps({"access_token": server.issue()}).encode(), delay=delay
                )
                wall, lags = await _burst(make, clients)
                entry = results.setdefault(name, {"worst": [], "p99": [], "wall": []})
                entry["worst"].append(max(lags, default=0.0))
                entry["p99"].append(
                    statistics.quantiles(lags, n=100, method="inclusive")[98] if len(lags) > 1 else 0.0
                )
                entry["wall"].append(wall)
    return {
        name: {
            "worst_lag_ms": max(entry["worst"]) * 1000,
            "median_p99_lag_ms": statistics.median(entry["p99"]) * 1000,
            "median_wall_s": statistics.median(entry["wall"]),
        }
        for name, entry in results.items()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args.clients, args.delay, args.rounds))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'way':28} {'worst lag ms':>13} {'p99 lag ms':>11} {'wall s':>7}")
    for name, row in results.items():
        print(
            f"{name:28} {row['worst_lag_ms']:13.1f} {row['median_p99_lag_ms']:11.1f} {row['median_wall_s']:7.2f}"
        )


if __name__ == "__main__":
    main()
