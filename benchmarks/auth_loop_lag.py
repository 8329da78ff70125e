"""How long MONGODB-AWS authentication keeps the event loop from running other tasks: mongio and PyMongo async.

    .venv/bin/python -m benchmarks.auth_loop_lag [--connections 100] [--delay 0.2] [--rounds 3]
                                                 [--sources ecs,imds] [--drivers mongio,pymongo]

A server process runs the tests' fakes on 127.0.0.1 (tests/support/fake_aws.py): the ECS credentials endpoint
and the EC2 instance metadata service (IMDSv2), both answering each request after ``--delay`` seconds, and a
member that answers the MONGODB-AWS conversation, its ``saslContinue`` after ``--delay`` seconds too (as a
server waiting for STS would), checking each signature. For each round, driver and credential source, a fresh
process (cold caches) makes a client with ``maxPoolSize`` and ``maxConnecting`` equal to ``--connections`` and
runs that many ``ping``s at once, so that many connections each authenticate, while a ticker task sleeps 1 ms
at a time and records how late each wake-up is, and how much CPU time the loop's thread used meanwhile. The
table shows per driver and source the median over rounds of the worst lag (with min-max), of the worst busy
time (the most CPU time the thread spent between two ticks: the part of a lag the driver's own code is
responsible for, where the rest is the process waiting for a core on a loaded machine), the median lag and
the time until every ping was answered. Source ``none`` is the same run without authentication: the cost of
opening that many connections at once, for comparison.

mongio fetches credentials with asyncio (one fetch shared by the connections asking at once) and signs with
hashlib. PyMongo async calls pymongo-auth-aws, which calls boto3's credential chain synchronously on the loop
(``pip install pymongo-auth-aws`` into the venv; the ECS endpoint is given to botocore as
``AWS_CONTAINER_CREDENTIALS_FULL_URI`` and IMDS as ``AWS_EC2_METADATA_SERVICE_ENDPOINT``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DRIVERS = ("mongio", "pymongo")
SOURCES = ("ecs", "imds", "none")

# Runs in the child: argv = driver, source, connections, endpoints base, member URI. Prints one JSON line.
PROBE = """
import asyncio, json, os, sys, time
driver, source, connections, base, member = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
ECS = "/v2/credentials/fake-task-id"
for name in [name for name in os.environ if name.startswith("AWS_")]:
    del os.environ[name]
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.environ["AWS_CONFIG_FILE"] = os.devnull
if driver == "pymongo":
    from pymongo import AsyncMongoClient
    if source == "ecs":
        os.environ["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = base + ECS
    else:
        os.environ["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = base + "/"
else:
    from mongio import AsyncMongoClient
    from mongio.connection.auth import aws_credentials
    aws_credentials.use_endpoints(aws_credentials.AwsEndpoints(ecs_base=base, imds_base=base))
    if source == "ecs":
        os.environ["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = ECS

def make_client():
    mechanism = "" if source == "none" else "authMechanism=MONGODB-AWS&"
    uri = member.rstrip("/") + "/?" + mechanism + "directConnection=true"
    return AsyncMongoClient(uri, maxPoolSize=connections, maxConnecting=connections, serverSelectionTimeoutMS=30000)
"""

# The measurement, after a probe that imported asyncio, json and time and defined ``connections`` and
# ``make_client()`` (benchmarks/oidc_loop_lag.py runs it after its own probe too): a 1 ms ticker beside that many
# pings at once on a fresh client. Prints one JSON line.
LAG_MEASUREMENT = """
async def main():
    loop = asyncio.get_running_loop()
    lags, busy = [], []
    stop = asyncio.Event()

    async def ticker():
        while not stop.is_set():
            start, cpu = loop.time(), time.thread_time()
            await asyncio.sleep(0.001)
            lags.append(loop.time() - start - 0.001)
            busy.append(time.thread_time() - cpu)

    client = make_client()
    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    began = time.perf_counter()
    results = await asyncio.gather(*(client.admin.command("ping") for _ in range(connections)), return_exceptions=True)
    elapsed = time.perf_counter() - began
    await asyncio.sleep(0.05)
    stop.set()
    await tick
    await client.close()
    errors = [repr(result) for result in results if isinstance(result, BaseException)]
    print(json.dumps({"worst": max(lags), "busy": max(busy), "median": sorted(lags)[len(lags) // 2], "elapsed": elapsed,
                      "errors": len(errors), "first_error": errors[0] if errors else None}))

asyncio.run(main())
"""


async def serve(delay: float) -> None:
    """The fakes, until stdin closes: prints ``{"endpoints": base, "member": uri}`` once they listen."""
    from tests.support.fake_aws import FakeAwsEndpoints, FakeAwsMember, KeyStore
    from tests.support.loopback_peer import LoopbackPeer

    keys = KeyStore()
    member = FakeAwsMember(keys, delay=delay)
    async with FakeAwsEndpoints(keys) as endpoints, LoopbackPeer(member) as peer:
        endpoints.delay = delay
        print(json.dumps({"endpoints": endpoints.base, "member": peer.uri}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        print(json.dumps({"accepted": len(member.accepted), "refused": member.refused[:3]}), flush=True)


def probe(driver: str, source: str, connections: int, addresses: dict[str, str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    with tempfile.TemporaryDirectory() as home:
        env["HOME"] = home  # no ~/.aws for botocore to find
        arguments = [driver, source, str(connections), addresses["endpoints"], addresses["member"]]
        return run_probe(PROBE, arguments, env, f"{driver}/{source}")


def run_probe(probe_script: str, arguments: Sequence[str], env: dict[str, str], label: str) -> dict[str, Any]:
    """Run ``probe_script`` (followed by :data:`LAG_MEASUREMENT`) in a fresh interpreter with ``arguments``;
    its last line of output, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", probe_script + LAG_MEASUREMENT, *arguments],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{label} probe failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def format_ms(values: Sequence[float]) -> str:
    """Median (min-max) of ``values`` (seconds), in milliseconds."""
    return f"{statistics.median(values) * 1000:8.1f} ({min(values) * 1000:.1f}-{max(values) * 1000:.1f})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sources", default=",".join(SOURCES))
    parser.add_argument("--drivers", default=",".join(DRIVERS))
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve(args.delay))
        return 0
    drivers = args.drivers.split(",")
    sources = args.sources.split(",")
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.auth_loop_lag", "--serve", "--delay", str(args.delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])},
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        addresses = json.loads(server.stdout.readline())
        results: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for round_number in range(args.rounds):
            order = drivers[round_number % len(drivers) :] + drivers[: round_number % len(drivers)]
            for driver in order:
                for source in sources:
                    results.setdefault((driver, source), []).append(
                        probe(driver, source, args.connections, addresses)
                    )
        server.stdin.close()
        summary = json.loads(server.stdout.readline())
    finally:
        server.wait(timeout=30)
    print(
        f"{args.connections} connections authenticating with MONGODB-AWS, endpoints and saslContinue answering "
        f"after {args.delay * 1000:.0f} ms, {args.rounds} rounds; ms, median (min-max) over rounds"
    )
    print(
        f"{'driver':8} {'source':6} {'worst loop lag':>22} {'worst busy':>22} {'median lag':>10} "
        f"{'all pinged':>22} errors"
    )
    for (driver, source), runs in results.items():
        errors = sum(run["errors"] for run in runs)
        first = next((run["first_error"] for run in runs if run["first_error"]), "")
        print(
            f"{driver:8} {source:6} {format_ms([run['worst'] for run in runs]):>22} {format_ms([run['busy'] for run in runs]):>22} "
            f"{statistics.median(run['median'] for run in runs) * 1000:10.2f} "
            f"{format_ms([run['elapsed'] for run in runs]):>22} {errors} {first[:120]}"
        )
    print(f"member: {summary['accepted']} conversations accepted, refused: {summary['refused']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
