"""Cancelling a crowd of waiting operations: how long the event loop is busy ending them.

    .venv/bin/python -m benchmarks.cancel_bench [--rounds 3] [--sizes 1000,10000,20000] [--drivers pymongo,mongio]

Each round, for each driver (in an order rotated from round to round) and each size N, a fresh process makes a
client for a deployment that cannot be reached (a closed port on loopback, ``serverSelectionTimeoutMS`` one
minute), starts N tasks that each run ``find_one`` (so all N wait in server selection), lets them settle for a
second, then cancels them, the newest first (``newest``) or the oldest first (``oldest``), and measures the
time until every task has ended. A driver whose waiters leave a queue by searching it spends time growing
with the square of N on the newest-first order; the oldest-first order shows the cost of cancelling alone.
Tasks still not ended ``--limit`` seconds after the cancelling began, or ended by an error instead of the
cancellation, are counted instead (a driver that loses a cancellation leaves its task waiting for good).

The table shows, per driver, order and N, the median over rounds with min-max, the time per task, and the
ratio of mongio's median to PyMongo async's; a run that left tasks unended shows how many instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence

BASELINE = "pymongo"
DRIVERS = ("pymongo", "mongio")
ORDERS = ("newest", "oldest")
UNREACHABLE = "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=60000&connectTimeoutMS=200"

# Runs in the child: argv = driver, N, order, URI, limit. Prints the seconds from the first cancel() until all
# tasks ended (or the limit passed) and how many had not ended or ended with an error.
PROBE = """
import asyncio, os, sys, time
driver, size, order, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[5])
if driver == "pymongo":
    from pymongo import AsyncMongoClient
else:
    from mongio import AsyncMongoClient

async def main() -> None:
    client = AsyncMongoClient(sys.argv[4])
    collection = client.perftest.corpus
    tasks = [asyncio.create_task(collection.find_one({})) for _ in range(size)]
    await asyncio.sleep(1.0)
    if any(task.done() for task in tasks):
        raise SystemExit("a task ended before it was cancelled")
    started = time.perf_counter()
    for task in reversed(tasks) if order == "newest" else tasks:
        task.cancel()
    _, unended = await asyncio.wait(tasks, timeout=limit)
    elapsed = time.perf_counter() - started
    # A task that ended some other way than cancelled (an error raised while it was being cancelled).
    failed = sum(1 for task in tasks if task.done() and not task.cancelled())
    print(elapsed, len(unended) + failed, flush=True)
    if unended:
        os._exit(0)  # closing could wait on what the unended tasks hold
    await client.close()

asyncio.run(main())
"""


def run_once(driver: str, size: int, order: str, limit: float = 60.0) -> tuple[float, int]:
    """One child process's measurement: seconds, and the number of tasks not ended within ``limit`` or ended
    by an error."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, driver, str(size), order, UNREACHABLE, str(limit)],
        capture_output=True,
        text=True,
        timeout=limit + 120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{driver} N={size} {order}: {done.stderr.strip()[-500:]}")
    seconds, unended = done.stdout.split()[-2:]
    return float(seconds), int(unended)


def measure(
    drivers: Sequence[str], sizes: Sequence[int], rounds: int, limit: float = 60.0
) -> dict[str, list[tuple[float, int]]]:
    """(seconds, tasks not ended) per (driver, order, size) key, one pair per round."""
    results: dict[str, list[tuple[float, int]]] = {}
    for round_index in range(rounds):
        shift = round_index % len(drivers)
        for driver in list(drivers[shift:]) + list(drivers[:shift]):
            for order in ORDERS:
                for size in sizes:
                    seconds, unended = run_once(driver, size, order, limit)
                    results.setdefault(f"{driver} {order} {size}", []).append((seconds, unended))
                    print(
                        f"round {round_index + 1}: {driver} {order} {size}: {seconds * 1000:.0f} ms, "
                        f"{unended} not ended or failed",
                        file=sys.stderr,
                    )
    return results


def table(results: dict[str, list[tuple[float, int]]], drivers: Sequence[str], sizes: Sequence[int]) -> str:
    """Medians with min-max, per task, and the ratio to the baseline's median; runs that left tasks unended
    are reported as such."""
    lines = [f"{'driver':8} {'order':7} {'N':>6} {'median ms':>10} {'min-max ms':>14} {'us/task':>8} {'ratio':>6}"]
    for order in ORDERS:
        for size in sizes:
            base = results.get(f"{BASELINE} {order} {size}")
            base_ended = base is not None and not any(unended for _, unended in base)
            for driver in drivers:
                runs = results[f"{driver} {order} {size}"]
                unended = [count for _, count in runs if count]
                if unended:
                    lines.append(
                        f"{driver:8} {order:7} {size:>6} not ended or failed: {max(unended)} task(s) in "
                        f"{len(unended)} of {len(runs)} run(s)"
                    )
                    continue
                values = [seconds for seconds, _ in runs]
                median = statistics.median(values)
                ratio = ""
                if base and base_ended and driver != BASELINE:
                    ratio = f"{median / statistics.median([seconds for seconds, _ in base]):.2f}x"
                spread = f"{min(values) * 1000:.0f}-{max(values) * 1000:.0f}"
                lines.append(
                    f"{driver:8} {order:7} {size:>6} {median * 1000:>10.0f} {spread:>14} "
                    f"{median / size * 1e6:>8.1f} {ratio:>6}"
                )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="1000,10000,20000")
    parser.add_argument("--drivers", default=",".join(DRIVERS))
    parser.add_argument("--limit", type=float, default=60.0, help="seconds to wait for the tasks to end")
    parser.add_argument("--json", help="also write the per-round seconds to this file")
    arguments = parser.parse_args(argv)
    drivers = [name for name in arguments.drivers.split(",") if name]
    sizes = [int(size) for size in arguments.sizes.split(",") if size]
    results = measure(drivers, sizes, arguments.rounds, arguments.limit)
    if arguments.json:
        with open(arguments.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=1)
    print(table(results, drivers, sizes))


if __name__ == "__main__":
    main()
