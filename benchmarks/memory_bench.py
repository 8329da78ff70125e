"""Memory benchmarks: mongio against PyMongo's AsyncMongoClient, in one run.

    .venv/bin/python -m benchmarks.memory_bench [--rounds 3] [--drivers pymongo,mongio] [--result-mib 100]

Every measurement runs in a Python process of its own, one per driver and round (drivers in an order rotated
from round to round), against one SecantusDB started for the run:

- ``per_client``: resident memory (RSS) added per client, over 20 clients each connected (one ``ping``), less
  the same process's RSS after importing the driver and making one client;
- ``per_connection``: RSS added per open socket by a client that keeps 100 idle connections in its pool
  (``minPoolSize=100``), its monitoring connections counted with them;
- ``iterate_result``: while ``find()`` iterates a result of ``--result-mib`` MiB (1 KiB documents, inserted
  before the clock starts by the controller), the peak of Python allocations (``tracemalloc``) and the growth
  of the process's RSS high-water mark (``ru_maxrss``) over what it was before the query.

The table shows the median over rounds (min-max beside it) and each median's ratio to PyMongo's. GridFS's
peak memory for a 50 MiB upload and download is in :mod:`benchmarks.gridfs_bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tracemalloc
from pathlib import Path

from benchmarks.driver_workload import open_client

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "pymongo"
DRIVERS = ("pymongo", "mongio")
CLIENTS = 20
CONNECTIONS = 100
DOCUMENT_BYTES = 1024
DATABASE, COLLECTION = "memory_bench", "result"
TASKS = ("per_client", "per_connection", "iterate_result_tracemalloc", "iterate_result_maxrss")


def rss_bytes() -> int:
    """This process's resident set size now, from /proc (Linux)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def max_rss_bytes() -> int:
    """This process's RSS high-water mark so far (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def per_client(driver: str, uri: str) -> float:
    first = open_client(driver, uri)
    await first.client.admin.command("ping")
    gc.collect()
    before = rss_bytes()
    harnesses = [open_client(driver, uri) for _ in range(CLIENTS)]
    for harness in harnesses:
        await harness.client.admin.command("ping")
    gc.collect()
    added = (rss_bytes() - before) / CLIENTS
    for harness in [first, *harnesses]:
        await harness.close()
    return added


def open_sockets() -> int:
    """How many sockets this process has open (Linux)."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
        except OSError:
            continue
    return count


async def per_connection(driver: str, uri: str) -> float:
    harness = open_client(driver, uri)
    await harness.client.admin.command("ping")
    gc.collect()
    sockets, before = open_sockets(), rss_bytes()
    # A second client that keeps CONNECTIONS idle connections in its pool (minPoolSize), counted as sockets
    # (so its monitoring connections are counted too, and the figure is per socket the client holds).
    separator = "&" if "?" in uri else ("?" if uri.endswith("/") else "/?")
    pooled = open_client(driver, f"{uri}{separator}minPoolSize={CONNECTIONS}&maxPoolSize={CONNECTIONS}")
    await pooled.client.admin.command("ping")
    for _ in range(600):  # the pool fills in the background: wait for it, up to a minute
        if open_sockets() - sockets >= CONNECTIONS:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    gc.collect()
    opened = open_sockets() - sockets
    if opened < CONNECTIONS:
        raise RuntimeError(f"the pool opened {opened} connections, not {CONNECTIONS}")
    added = (rss_bytes() - before) / opened
    await pooled.close()
    await harness.close()
    return added


async def iterate_result(driver: str, uri: str) -> tuple[int, int]:
    harness = open_client(driver, uri)
    collection = harness.client[DATABASE][COLLECTION]
    await collection.find_one()
    gc.collect()
    high_water = max_rss_bytes()
    count = 0
    tracemalloc.start()
    try:
        async for _document in collection.find():
            count += 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    grown = max_rss_bytes() - high_water
    await harness.close()
    if not count:
        raise RuntimeError("the result collection is empty")
    return peak, grown


async def measure(task: str, driver: str, uri: str) -> dict[str, float]:
    if task == "per_client":
        return {"per_client": await per_client(driver, uri)}
    if task == "per_connection":
        return {"per_connection": await per_connection(driver, uri)}
    peak, grown = await iterate_result(driver, uri)
    return {"iterate_result_tracemalloc": float(peak), "iterate_result_maxrss": float(grown)}


def run_measurement(task: str, driver: str, uri: str) -> dict[str, float]:
    """One measurement in a fresh interpreter, so no driver or earlier task shares its memory."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, "-m", "benchmarks.memory_bench", "--child", task, "--driver", driver, "--uri", uri]
    completed = subprocess.run(argv, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=900, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"{task} with {driver} failed:\n{completed.stderr[-3000:]}")
    result: dict[str, float] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


async def load_result(uri: str, mebibytes: int) -> None:
    """Fill the result collection with ``mebibytes`` MiB of 1 KiB documents (through mongio)."""
    harness = open_client("mongio", uri)
    collection = harness.client[DATABASE][COLLECTION]
    await collection.drop()
    count = mebibytes * 1024 * 1024 // DOCUMENT_BYTES
    filler = "x" * (DOCUMENT_BYTES - 40)
    for start in range(0, count, 10_000):
        await collection.insert_many([{"n": n, "s": filler} for n in range(start, min(count, start + 10_000))])
    await harness.close()


def format_table(values: dict[str, dict[str, list[float]]]) -> str:
    lines = [f"{'measure':<28} {'driver':<8} {'median':>12} {'min-max':>25} {'ratio':>7}"]
    for task in TASKS:
        baseline = values[task].get(BASELINE)
        base = statistics.median(baseline) if baseline else None
        for driver, samples in values[task].items():
            median = statistics.median(samples)
            ratio = f"{median / base:.2f}x" if base else "-"
            spread = f"{min(samples) / 1024:,.1f}-{max(samples) / 1024:,.1f}"
            lines.append(f"{task:<28} {driver:<8} {median / 1024:>9,.1f} KiB {spread:>21} KiB {ratio:>7}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--drivers", default=",".join(DRIVERS))
    parser.add_argument("--result-mib", type=int, default=100, help="size of the iterated result (default 100)")
    parser.add_argument("--child", choices=("per_client", "per_connection", "iterate_result"), help=argparse.SUPPRESS)
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(measure(args.child, args.driver, args.uri))))
        return
    drivers = [name for name in args.drivers.split(",") if name]
    from spec_runner.server import TestServer

    server = TestServer().start()
    try:
        asyncio.run(load_result(server.uri, args.result_mib))
        values: dict[str, dict[str, list[float]]] = {task: {driver: [] for driver in drivers} for task in TASKS}
        for round_index in range(args.rounds):
            shift = round_index % len(drivers)
            for driver in [*drivers[shift:], *drivers[:shift]]:
                for child in ("per_client", "per_connection", "iterate_result"):
                    for task, value in run_measurement(child, driver, server.uri).items():
                        values[task][driver].append(value)
            print(f"round {round_index + 1} of {args.rounds} done", file=sys.stderr)
    finally:
        server.stop()
    print(f"Memory, {args.rounds} round(s), a {args.result_mib} MiB result; medians, ratios to {BASELINE}")
    print(format_table(values))


if __name__ == "__main__":
    main()
