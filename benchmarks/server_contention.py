"""How the test server's cost per operation depends on how many requests overlap, per driver.

    .venv/bin/python -m benchmarks.server_contention [--drivers pymongo,mongio] [--caps 1,2,8,0] [--ops 10000]

The 200-task workload of ``driver_bench`` is limited by SecantusDB, not by the clients. This measures why:
200 tasks do ``find_one`` by ``_id`` as there, but at most ``cap`` operations are in flight at once (0: no
cap, the pool's 100 connections), and for each driver and cap a fresh server reports its CPU time per
operation beside the client's wall and CPU time. A server whose cost per operation rises as requests
overlap rewards a slower client; the table shows whether that is what happens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from benchmarks.driver_workload import open_client, timed

ROOT = Path(__file__).resolve().parent.parent
TASKS = 200
CORPUS = 10_000


async def measure(driver: str, uri: str, server_pid: int | None, cap: int, ops: int) -> dict[str, Any]:
    """One driver at one cap: wall, client CPU and server CPU per operation, over ``ops`` find_one calls.

    Without ``server_pid`` the server's CPU time is not measured (``server_cpu`` is None)."""
    harness = open_client(driver, uri)
    try:
        collection = harness.client["perftest"]["contention"]
        await collection.drop()
        await collection.insert_many([{"_id": number, "text": "x" * 100} for number in range(1, CORPUS + 1)])
        # anyio's semaphore and task group: the same workload on asyncio and on trio (mongio's trio backend).
        limit = anyio.Semaphore(cap) if cap else None
        per_task = ops // TASKS

        async def worker(first: int) -> None:
            for number in range(first, first + per_task):
                if limit is None:
                    await collection.find_one({"_id": number % CORPUS + 1})
                else:
                    async with limit:
                        await collection.find_one({"_id": number % CORPUS + 1})

        async def run() -> None:
            async with anyio.create_task_group() as group:
                for index in range(TASKS):
                    group.start_soon(worker, index * per_task)

        await run()  # warm-up: opens the connections the cap allows
        wall, cpu, server_cpu, _ = await timed(run, server_pid)
        done = per_task * TASKS
        return {
            "driver": driver,
            "cap": cap,
            "wall": wall / done,
            "cpu": cpu / done,
            "server_cpu": None if server_cpu is None else server_cpu / done,
        }
    finally:
        try:
            await harness.client["perftest"].drop_collection("contention")
        finally:
            await harness.close()


def _micros(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e6:,.0f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drivers", default="pymongo,mongio")
    parser.add_argument("--caps", default="1,2,8,0", help="operations in flight at most (0: no cap)")
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        driver, cap = args.drivers, int(args.caps)
        print(json.dumps(asyncio.run(measure(driver, args.uri, args.server_pid, cap, args.ops))))
        return

    from spec_runner.server import TestServer

    caps = [int(cap) for cap in args.caps.split(",")]
    drivers = [driver.strip() for driver in args.drivers.split(",") if driver.strip()]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    rows = []
    for cap in caps:
        for driver in drivers:
            server = TestServer().start()
            try:
                assert server.process is not None
                argv_worker = [sys.executable, "-m", "benchmarks.server_contention", "--worker",
                               "--drivers", driver, "--caps", str(cap), "--ops", str(args.ops),
                               "--uri", server.uri, "--server-pid", str(server.process.pid)]  # fmt: skip
                completed = subprocess.run(argv_worker, cwd=ROOT, env=environment, capture_output=True, text=True, check=False)
            finally:
                server.stop()
            if completed.returncode != 0:
                print(f"{driver} cap {cap}: failed:\n{completed.stderr[-1500:]}", file=sys.stderr)
                continue
            row = json.loads(completed.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"  {driver} cap {cap or 'none'}: {_micros(row['wall'])} µs wall", file=sys.stderr, flush=True)
    print(f"find_one by _id from {TASKS} tasks, {args.ops} operations, a fresh SecantusDB per driver and cap")
    print(f"{'in flight':>10}  {'driver':<14}{'wall µs/op':>11}{'client CPU µs/op':>18}{'server CPU µs/op':>18}")
    for row in rows:
        in_flight = str(row["cap"]) if row["cap"] else "no cap"
        print(f"{in_flight:>10}  {row['driver']:<14}{_micros(row['wall']):>11}{_micros(row['cpu']):>18}{_micros(row['server_cpu']):>18}")


if __name__ == "__main__":
    main()
