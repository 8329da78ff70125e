"""How long MONGODB-OIDC authentication keeps the event loop from running other tasks: mongio and PyMongo async.

    .venv/bin/python -m benchmarks.oidc_loop_lag [--connections 100] [--delay 0.2] [--rounds 3]
                                                 [--ways azure,async-callback,blocking-callback,none]
                                                 [--drivers mongio,pymongo] [--json]

A server process runs the tests' OIDC server (tests/support/oidc_server.py), whose ``saslStart`` and
``saslContinue`` replies wait ``--delay`` seconds (as a server slow to check a token would), and a fake Azure
metadata endpoint (tests/support/metadata_endpoint.py) answering each token request after ``--delay`` seconds.
For each round, driver and way, a fresh process (cold token cache) makes ONE client with ``maxPoolSize`` and
``maxConnecting`` equal to ``--connections`` and runs that many ``ping``s at once, so that many connections each
authenticate, while a ticker task sleeps 1 ms at a time and records how late each wake-up is, and how much CPU
time the loop's thread used meanwhile. The ways of getting a token, each taking ``--delay`` seconds:

- ``azure``: ``ENVIRONMENT:azure`` against the fake metadata endpoint (mongio only: PyMongo's endpoint address
  cannot be redirected to 127.0.0.1);
- ``async-callback``: an ``async def`` callback awaiting ``--delay`` (mongio only: PyMongo's callbacks are
  synchronous);
- ``blocking-callback``: a plain callback blocking for ``--delay`` (``time.sleep``: a synchronous HTTP client,
  say), which both mongio and PyMongo (4.x async, through ``run_in_executor``) run in a worker thread;
- ``none``: the same run without authentication, the cost of opening that many connections at once.

The table shows per driver and way the median over rounds of the worst lag (with min-max), of the worst busy
time (the most CPU time the loop's thread spent between two ticks: the part of a lag the driver's own code is
responsible for, where the rest is the process waiting for a core on a loaded machine), the median lag and the
time until every ping was answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.auth_loop_lag import format_ms, run_probe

REPO = Path(__file__).resolve().parents[1]
DRIVERS = ("mongio", "pymongo")
WAYS = ("azure", "async-callback", "blocking-callback", "none")
PYMONGO_WAYS = frozenset({"blocking-callback", "none"})

# Runs in the child: argv = driver, way, connections, delay, server URI, token. Prints one JSON line.
# The Azure endpoint's address comes in the environment (MONGIO_OIDC_AZURE_ENDPOINT).
PROBE = """
import asyncio, json, sys, time
driver, way, connections, delay, uri, token = (
    sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6])
if driver == "pymongo":
    from pymongo import AsyncMongoClient
    from pymongo.auth_oidc import OIDCCallback, OIDCCallbackResult

    class Blocking(OIDCCallback):
        def fetch(self, context):
            time.sleep(delay)
            return OIDCCallbackResult(access_token=token)

    blocking = Blocking()
else:
    from mongio import AsyncMongoClient
    from mongio.auth_oidc import OIDCCallbackResult

    def blocking(context):
        time.sleep(delay)
        return OIDCCallbackResult(access_token=token)

async def awaiting(context):
    await asyncio.sleep(delay)
    return OIDCCallbackResult(access_token=token)

PROPERTIES = {
    "azure": {"ENVIRONMENT": "azure", "TOKEN_RESOURCE": "api://bench"},
    "async-callback": {"OIDC_CALLBACK": awaiting},
    "blocking-callback": {"OIDC_CALLBACK": blocking},
}

def make_client():
    auth = {} if way == "none" else {"authMechanism": "MONGODB-OIDC", "authMechanismProperties": PROPERTIES[way]}
    return AsyncMongoClient(uri, directConnection=True, maxPoolSize=connections, maxConnecting=connections,
                            serverSelectionTimeoutMS=30000, **auth)
"""


async def serve(delay: float) -> None:
    """The server and endpoint, until stdin closes: prints their addresses and a valid token once they listen."""
    from tests.support.metadata_endpoint import Answer, MetadataEndpoint
    from tests.support.oidc_server import OidcServer

    server = OidcServer(replica_set=None, sasl_delay=delay)
    async with server, MetadataEndpoint() as endpoint:
        token = server.issue("machine", expires_in=24 * 3600.0)
        endpoint.answer = Answer(
            200, json.dumps({"access_token": token, "expires_in": "86400"}).encode(), delay=delay
        )
        print(json.dumps({"uri": server.uri, "azure": endpoint.base_url, "token": token}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        summary = {
            "accepted": len(server.accepted),
            "sasl_starts": server.sasl_starts,
            "speculative": server.speculative_successes,
            "azure_requests": len(endpoint.requests),
        }
        print(json.dumps(summary), flush=True)


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}


def probe(driver: str, way: str, connections: int, delay: float, addresses: dict[str, str]) -> dict[str, Any]:
    env = {**_environment(), "MONGIO_OIDC_AZURE_ENDPOINT": addresses["azure"]}
    arguments = [driver, way, str(connections), str(delay), addresses["uri"], addresses["token"]]
    return run_probe(PROBE, arguments, env, f"{driver}/{way}")


def round_runs(drivers: Sequence[str], ways: Sequence[str], round_number: int) -> list[tuple[str, str]]:
    """This round's (driver, way) runs, the drivers' order rotated each round; PyMongo only where it can."""
    shift = round_number % len(drivers)
    order = list(drivers[shift:]) + list(drivers[:shift])
    return [(driver, way) for driver in order for way in ways if driver == "mongio" or way in PYMONGO_WAYS]


def measure(
    connections: int, delay: float, rounds: int, drivers: Sequence[str], ways: Sequence[str]
) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], dict[str, Any]]:
    """Every round's runs per (driver, way), and the server's counts."""
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.oidc_loop_lag", "--serve", "--delay", str(delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=_environment(),
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        addresses = json.loads(server.stdout.readline())
        results: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for round_number in range(rounds):
            for driver, way in round_runs(drivers, ways, round_number):
                results.setdefault((driver, way), []).append(
                    probe(driver, way, connections, delay, addresses)
                )
        server.stdin.close()
        summary: dict[str, Any] = json.loads(server.stdout.readline())
    finally:
        server.wait(timeout=30)
    return results, summary


def _row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "worst_lag_ms": statistics.median(run["worst"] for run in runs) * 1000,
        "worst_busy_ms": statistics.median(run["busy"] for run in runs) * 1000,
        "median_lag_ms": statistics.median(run["median"] for run in runs) * 1000,
        "all_pinged_s": statistics.median(run["elapsed"] for run in runs),
        "errors": sum(run["errors"] for run in runs),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--drivers", default=",".join(DRIVERS))
    parser.add_argument(
        "--json", action="store_true", help="print the medians and the server's counts as JSON"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve(args.delay))
        return 0
    results, summary = measure(
        args.connections, args.delay, args.rounds, args.drivers.split(","), args.ways.split(",")
    )
    if args.json:
        rows = {f"{driver}/{way}": _row(runs) for (driver, way), runs in results.items()}
        print(json.dumps({"results": rows, "server": summary}, indent=2))
        return 0
    print(
        f"{args.connections} connections authenticating with MONGODB-OIDC, token sources and saslStart/saslContinue "
        f"answering after {args.delay * 1000:.0f} ms, {args.rounds} rounds; ms, median (min-max) over rounds"
    )
    print(
        f"{'driver':8} {'way':18} {'worst loop lag':>22} {'worst busy':>22} {'median lag':>10} "
        f"{'all pinged':>22} errors"
    )
    for (driver, way), runs in results.items():
        errors = sum(run["errors"] for run in runs)
        first = next((run["first_error"] for run in runs if run["first_error"]), "")
        print(
            f"{driver:8} {way:18} {format_ms([run['worst'] for run in runs]):>22} "
            f"{format_ms([run['busy'] for run in runs]):>22} "
            f"{statistics.median(run['median'] for run in runs) * 1000:10.2f} "
            f"{format_ms([run['elapsed'] for run in runs]):>22} {errors} {first[:120]}"
        )
    print(
        f"server: {summary['accepted']} tokens accepted ({summary['speculative']} speculatively), "
        f"{summary['sasl_starts']} saslStarts; Azure endpoint: {summary['azure_requests']} requests"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
