"""User-space instructions per operation, counted by valgrind's callgrind: a figure the machine's load cannot move.

    .venv/bin/python -m benchmarks.instructions_bench [--tasks run_command,find_one_by_id,...] \
        [--drivers pymongo,mongio] [--ops 200,1200] [--json FILE]

CPU time per operation on a shared machine moves with the machine's load from run to run by more than most
changes to the driver do. The instructions the client executes do not: for each driver and task, a process runs
the task's workload (the one :mod:`benchmarks.driver_workload` times) under callgrind twice against the loopback
responder, with the two operation counts of ``--ops`` and everything else the same (the client, the set-up, a
warm-up of the smaller count, ``PYTHONHASHSEED=0``); the difference of the two totals over the difference of
the counts is the instructions per operation, start-up and set-up cancelled out. What the workload does per
operation outside the driver counts too, alike for every driver: the benchmark's loop, and for
``small_insert_one`` the copy of the document each insert gets (made by the workload before its loop). The table
gives them per driver with the ratio of each driver's to PyMongo async's.

What this counts is the client process's user-space instructions, the interpreter's and the libraries' alike,
as callgrind executes them; it leaves out the system calls' time in the kernel and the time the processor
waits for memory, which the CPU times of :mod:`benchmarks.driver_bench` include. Needs ``valgrind`` on the
``PATH``; a run takes some minutes (the program runs about fifty times slower under callgrind).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.driver_workload import CONCURRENT_TASKS, extract_data

BASELINE = "pymongo"
DRIVERS = ("pymongo", "mongio")
TASKS = ("run_command", "find_one_by_id", "small_insert_one", "concurrency_1000x10")
DEFAULT_OPS = (200, 1200)
ROOT = Path(__file__).resolve().parent.parent
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def collected_instructions(valgrind_output: str) -> int:
    """The instruction count of callgrind's closing summary (``==PID== Collected : N``)."""
    found = _COLLECTED.findall(valgrind_output)
    if not found:
        raise RuntimeError(f"callgrind printed no instruction count:\n{valgrind_output[-2000:]}")
    return int(found[-1])


def per_operation(small: int, large: int, ops: tuple[int, int]) -> float:
    """Instructions per operation from the totals of two runs that differ only in their operation counts."""
    if ops[1] <= ops[0]:
        raise ValueError(f"the second operation count must be the larger, not {ops}")
    return (large - small) / (ops[1] - ops[0])


def operation_counts(task: str, ops: tuple[int, int]) -> tuple[int, int]:
    """The two operation counts for ``task``: ``ops``, except for a concurrency task, whose N tasks each do an
    equal share: one operation each, then three."""
    tasks = CONCURRENT_TASKS.get(task)
    return ops if tasks is None else (tasks, 3 * tasks)


def count_run(driver: str, task: str, ops: int, counts: tuple[int, int], uri: str, data: Path) -> int:
    """The instructions callgrind counts in one process running ``ops`` operations of ``task`` (one of
    ``counts``, whose smaller is the warm-up and whose larger sizes the set-up)."""
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m",
            "benchmarks.instructions_bench", "--child", driver, task, str(ops), *map(str, counts), uri, str(data)]  # fmt: skip
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=environment, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{driver} {task} failed under callgrind:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return collected_instructions(done.stderr)


def measure(
    drivers: Sequence[str], tasks: Sequence[str], ops: tuple[int, int], uri: str, data: Path
) -> dict[str, dict[str, float]]:
    """Instructions per operation, by task and driver."""
    results: dict[str, dict[str, float]] = {}
    for task in tasks:
        counts = operation_counts(task, ops)
        for driver in drivers:
            small, large = (count_run(driver, task, count, counts, uri, data) for count in counts)
            results.setdefault(task, {})[driver] = per_operation(small, large, counts)
            print(f"  {task} {driver}: {results[task][driver]:,.0f} instructions per operation", flush=True)
    return results


def table(results: dict[str, dict[str, float]], drivers: Sequence[str]) -> str:
    """A Markdown table: instructions per operation per driver, and each driver's ratio to PyMongo async's."""
    others = [driver for driver in drivers if driver != BASELINE]
    header = ["task", *drivers, *(f"{driver} / {BASELINE}" for driver in others if BASELINE in drivers)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for task, by_driver in results.items():
        cells = [task, *(f"{by_driver[driver]:,.0f}" for driver in drivers)]
        if BASELINE in drivers:
            cells += [f"{by_driver[driver] / by_driver[BASELINE]:.3f}x" for driver in others]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def _child(driver: str, task: str, ops: int, warmup: int, corpus: int, uri: str, data: Path) -> None:
    """The measured process: the workload's set-up and a warm-up (the same in both runs), then ``ops``."""
    from benchmarks.driver_workload import Workloads, load_documents, open_client

    harness = open_client(driver, uri)
    try:
        workloads = Workloads(harness.client, load_documents(data), quick=True)
        # Set up for the larger count in both runs, so that the two differ in the measured operations alone.
        await workloads.setup(task, corpus)
        await workloads.before(task, warmup)
        workloads.check(task, warmup, await workloads.work(task, warmup)())
        await workloads.before(task, ops)
        # The check costs the same in both runs (the first and last results, or one per concurrent task).
        workloads.check(task, ops, await workloads.work(task, ops)())
    finally:
        await harness.close()


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["--child"]:
        import asyncio

        driver, task, ops, warmup, corpus, uri, data_dir = arguments[1:8]
        asyncio.run(_child(driver, task, int(ops), int(warmup), int(corpus), uri, Path(data_dir)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--drivers", default=",".join(DRIVERS))
    parser.add_argument("--ops", default=",".join(map(str, DEFAULT_OPS)), help="the two operation counts")
    parser.add_argument("--json", help="also write the instructions per operation to this file")
    args = parser.parse_args(arguments)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on the PATH")
    tasks = [task for task in args.tasks.split(",") if task]
    unknown = set(tasks) - set(TASKS)
    if unknown:
        raise SystemExit(f"unknown task(s) {sorted(unknown)}; choose from {', '.join(TASKS)}")
    low, high = (int(count) for count in args.ops.split(","))
    drivers = [driver for driver in args.drivers.split(",") if driver]
    from benchmarks.loopback_responder import LoopbackResponderProcess

    data = Path(tempfile.mkdtemp(prefix="mongio-instructions-"))
    extract_data(data)
    responder = LoopbackResponderProcess(data / "tweet.json").start()
    try:
        results = measure(drivers, tasks, (low, high), responder.uri, data)
    finally:
        responder.stop()
    print(table(results, drivers))
    if args.json:
        Path(args.json).write_text(json.dumps({"ops": [low, high], "results": results}, indent=2))


if __name__ == "__main__":
    main()
