"""GridFS benchmarks: mongio's GridFSBucket against PyMongo's AsyncGridFSBucket, in one run.

    .venv/bin/python -m benchmarks.gridfs_bench [--rounds 5] [--drivers pymongo,mongio] [--quick] [--json FILE]

The tasks are the driver benchmarking specification's GridFS ones, on its 50 MiB ``gridfs_large.bin``:

- ``gridfs_upload``: ``upload_from_stream`` of the file from memory (``bytes``) into a bucket that was
  dropped and given its indexes (by a one-byte upload) before the clock starts;
- ``gridfs_download``: ``download_to_stream`` of the stored file into an ``io.BytesIO``.

As in :mod:`benchmarks.driver_bench`: for every round, and every driver in an order rotated from round to
round, a fresh SecantusDB is started and the driver's workload runs against it in a Python process of its
own, so ``time.process_time()`` there measures the client alone. Each round gives the median over its timed
iterations of the wall time and of the client's CPU time per file; the table shows the median of those
round values (min-max beside it), the throughput, and the ratios to PyMongo async. After the timed
iterations, one more of each task runs under ``tracemalloc`` to report the client's peak Python memory.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.driver_bench import (
    BASELINE,
    ROOT,
    Summary,
    format_table,
    rotation,
    round_value,
    start_server,
    summarize,
)
from benchmarks.driver_workload import SPECS, ClientUnavailable, open_client

ARCHIVE = SPECS / "benchmarking" / "data" / "single_and_multi_document.tgz"
DATA_FILE = "gridfs_large.bin"
DRIVERS = ("pymongo", "mongio", "mongio-uvloop")
DEFAULT_DRIVERS = ("pymongo", "mongio")
TASKS = ("gridfs_upload", "gridfs_download")
DATABASE = "perftest"
WORKLOAD_TIMEOUT = 1800.0
ITERATIONS = 5
QUICK_ITERATIONS = 2
WARMUP = 1


def extract_file(target: Path) -> Path:
    """``gridfs_large.bin`` from the specification's tarball, written under ``target``."""
    with tarfile.open(ARCHIVE) as archive:
        for member in archive:
            if Path(member.name).name == DATA_FILE:
                handle = archive.extractfile(member)
                assert handle is not None
                path = target / DATA_FILE
                path.write_bytes(handle.read())
                return path
    raise SystemExit(f"{ARCHIVE} lacks {DATA_FILE}")


# -- the workload side (one process per driver and round) -------------------------------------------------------


def bucket_class(driver: str) -> Any:
    if driver == "pymongo":
        from gridfs import AsyncGridFSBucket

        return AsyncGridFSBucket
    try:
        from mongio.gridfs import GridFSBucket
    except ImportError as error:
        raise ClientUnavailable(f"{type(error).__name__}: {error}") from error
    return GridFSBucket


async def _measure(work: Any) -> tuple[float, float]:
    gc.collect()
    cpu_start = time.process_time()
    wall_start = time.perf_counter()
    await work()
    return time.perf_counter() - wall_start, time.process_time() - cpu_start


async def _peak_memory(work: Any) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        await work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class DiscardingSink(io.BytesIO):
    """A destination that keeps nothing, for the memory pass (so the peak is the driver's alone). It is a
    ``BytesIO`` so both drivers write to it directly, as to the timed runs' destination."""

    def write(self, data: Any) -> int:
        return len(data)


async def run_tasks(driver: str, uri: str, data: bytes, quick: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"driver": driver, "results": {}, "errors": {}, "memory": {}}
    try:
        harness = open_client(driver, uri)
        bucket_type = bucket_class(driver)
    except ClientUnavailable as error:
        result["skipped"] = f"mongio not available: {error}"
        return result
    result["version"] = harness.version
    result["loop"] = harness.loop
    iterations = QUICK_ITERATIONS if quick else ITERATIONS
    try:
        bucket = bucket_type(harness.client[DATABASE])

        async def fresh_bucket() -> None:
            # Through the database: PyMongo's AsyncGridFSBucket has no drop().
            database = harness.client[DATABASE]
            await database.drop_collection("fs.files")
            await database.drop_collection("fs.chunks")
            await bucket.upload_from_stream("indexes", b"x")

        async def upload() -> None:
            await bucket.upload_from_stream(DATA_FILE, data)

        stored: list[Any] = []

        async def download() -> None:
            destination = io.BytesIO()
            await bucket.download_to_stream(stored[0], destination)
            if destination.tell() != len(data):
                raise AssertionError(f"downloaded {destination.tell()} bytes, expected {len(data)}")

        async def download_discarding() -> None:
            await bucket.download_to_stream(stored[0], DiscardingSink())

        for task in TASKS:
            try:
                walls: list[float] = []
                cpus: list[float] = []
                if task == "gridfs_download":
                    await fresh_bucket()
                    stored.append(await bucket.upload_from_stream(DATA_FILE, data))
                work = upload if task == "gridfs_upload" else download
                for index in range(WARMUP + iterations):
                    if task == "gridfs_upload":
                        await fresh_bucket()
                    wall, cpu = await _measure(work)
                    if index >= WARMUP:
                        walls.append(wall)
                        cpus.append(cpu)
                if task == "gridfs_upload":
                    await fresh_bucket()
                result["memory"][task] = await _peak_memory(work if work is upload else download_discarding)
                result["results"][task] = {"ops": 1, "unit": "file", "wall": walls, "cpu": cpus}
            except Exception as error:
                print(traceback.format_exc(), file=sys.stderr)
                result["errors"][task] = f"{type(error).__name__}: {error}"
        await harness.client.drop_database(DATABASE)
    finally:
        await harness.close()
    return result


def workload_main(driver: str, uri: str, data_path: Path, quick: bool) -> None:
    coroutine = run_tasks(driver, uri, data_path.read_bytes(), quick)
    if driver == "mongio-uvloop":
        try:
            import uvloop
        except ImportError as error:
            coroutine.close()
            print(json.dumps({"driver": driver, "skipped": f"uvloop not available: {error}"}))
            return
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            result = runner.run(coroutine)
    else:
        result = asyncio.run(coroutine)
    print(json.dumps(result))


# -- the controller ---------------------------------------------------------------------------------------------


def run_workload(driver: str, uri: str, data_path: Path, quick: bool) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", "benchmarks.gridfs_bench", "--workload",
        "--driver", driver, "--uri", uri, "--data", str(data_path),
    ]  # fmt: skip
    if quick:
        argv.append("--quick")
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    try:
        completed = subprocess.run(
            argv, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=WORKLOAD_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return {"driver": driver, "error": f"workload did not finish within {WORKLOAD_TIMEOUT:.0f}s"}
    output = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not output:
        tail = "\n".join(completed.stderr.strip().splitlines()[-15:])
        return {"driver": driver, "error": f"workload exited with {completed.returncode}:\n{tail}"}
    result: dict[str, Any] = json.loads(output[-1])
    return result


def throughput_lines(summaries: Sequence[Summary], size: int) -> list[str]:
    return [
        f"  {row.task} {row.driver}: {size / row.wall_median / 2**20:,.0f} MiB/s"
        for row in summaries
        if row.wall_median
    ]


def memory_lines(memory: dict[str, dict[str, list[int]]]) -> list[str]:
    lines = []
    for task, by_driver in memory.items():
        for driver, peaks in by_driver.items():
            if peaks:
                lines.append(f"  {task} {driver}: {statistics.median(peaks) / 2**20:,.1f} MiB peak (tracemalloc)")
    if lines:
        lines.append("  (the upload's source is allocated before tracing starts; downloads go to a sink that keeps nothing)")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, help="rounds per driver (default 5; 2 with --quick)")
    parser.add_argument("--drivers", help=f"comma-separated subset of: {', '.join(DRIVERS)}")
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer iterations, 2 rounds")
    parser.add_argument("--json", type=Path, help="write the per-round numbers and the summary to this file")
    parser.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workload:
        workload_main(args.driver, args.uri, args.data, args.quick)
        return
    drivers = [name.strip() for name in (args.drivers or ",".join(DEFAULT_DRIVERS)).split(",") if name.strip()]
    unknown = [name for name in drivers if name not in DRIVERS]
    if unknown:
        raise SystemExit(f"unknown driver(s) {unknown}; choose from {', '.join(DRIVERS)}")
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 5)
    per_round: dict[str, dict[str, list[tuple[float, float]]]] = {task: {d: [] for d in drivers} for task in TASKS}
    round_numbers: dict[str, dict[str, list[int]]] = {task: {d: [] for d in drivers} for task in TASKS}
    memory: dict[str, dict[str, list[int]]] = {task: {d: [] for d in drivers} for task in TASKS}
    raw: list[dict[str, Any]] = []
    errors: list[str] = []
    skipped: dict[str, str] = {}
    versions: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="mongio-gridfs-bench-") as directory:
        data_path = extract_file(Path(directory))
        size = data_path.stat().st_size
        for round_index in range(rounds):
            order = rotation(drivers, round_index)
            print(f"round {round_index + 1}/{rounds}: {', '.join(order)}", file=sys.stderr, flush=True)
            for driver in order:
                if driver in skipped:
                    continue
                server = start_server()
                try:
                    result = run_workload(driver, server.uri, data_path, args.quick)
                finally:
                    server.stop()
                result["round"] = round_index
                raw.append(result)
                if "skipped" in result:
                    skipped[driver] = result["skipped"]
                    continue
                if "error" in result:
                    errors.append(f"round {round_index + 1} {driver}: {result['error']}")
                    print(f"  {driver}: {result['error']}", file=sys.stderr, flush=True)
                    continue
                versions[driver] = f"{result['version']} ({result.get('loop', 'asyncio')})"
                for task, message in result.get("errors", {}).items():
                    errors.append(f"round {round_index + 1} {driver} {task}: {message}")
                for task, samples in result.get("results", {}).items():
                    wall, cpu = round_value(samples)
                    per_round[task][driver].append((wall, cpu))
                    round_numbers[task][driver].append(round_index)
                    print(f"  {driver} {task}: {wall * 1e3:,.1f} ms wall, {cpu * 1e3:,.1f} ms CPU", file=sys.stderr)
                for task, peak in result.get("memory", {}).items():
                    memory[task][driver].append(peak)
    summaries = summarize(per_round, {task: "file" for task in TASKS}, round_numbers=round_numbers)
    parts = [
        f"GridFS benchmarks ({size / 2**20:.0f} MiB file): {rounds} round(s){' (quick)' if args.quick else ''}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPU(s), a fresh SecantusDB per driver and round; "
        f"ratios to {BASELINE} (PyMongo async's AsyncGridFSBucket)",
        "Drivers: " + ", ".join(f"{driver} {version}" for driver, version in versions.items()),
        "",
        format_table(summaries),
        "",
        "Throughput:",
        *throughput_lines(summaries, size),
        "Client memory:",
        *memory_lines(memory),
    ]
    if skipped:
        parts += ["", *(f"{driver}: {reason}" for driver, reason in skipped.items())]
    if errors:
        parts += ["", "Errors:", *(f"  {line}" for line in errors)]
    print("\n".join(parts))
    if args.json is not None:
        document = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "rounds": rounds,
            "quick": args.quick,
            "versions": versions,
            "skipped": skipped,
            "errors": errors,
            "summary": [vars(row) for row in summaries],
            "memory": memory,
            "rounds_raw": raw,
        }
        args.json.write_text(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
