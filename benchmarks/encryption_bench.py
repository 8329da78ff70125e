"""Explicit encryption benchmarks: mongio's ClientEncryption against PyMongo's AsyncClientEncryption, in one run.

    .venv/bin/python -m benchmarks.encryption_bench [--rounds 5] [--ops 2000] [--iterations 5] [--json FILE]

Tasks, per value (a 64-character string, with a ``local`` master key and one data key):

- ``encrypt_deterministic`` and ``encrypt_random``: ``encrypt`` with each algorithm, by key id;
- ``decrypt``: ``decrypt`` of a ciphertext made by the same driver.

The data key is fetched once and then cached by libmongocrypt (as in an application), so the tasks measure
what each driver adds around libmongocrypt: BSON encoding of ``{"v": value}``, the state machine and the
decoding of the answer. For every round, and every driver in an order rotated from round to round, the
workload runs in a Python process of its own against one test server started for the run, so
``time.process_time()`` there measures the client alone. Each round gives the median over its timed
iterations of the wall and CPU time per value; the table shows the median of the round values (min-max
beside it) and the ratios to PyMongo async.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

from benchmarks.driver_bench import ROOT, format_table, rotation, round_value, start_server, summarize

DRIVERS = ("pymongo", "mongio")
TASKS = ("encrypt_deterministic", "encrypt_random", "decrypt")
VALUE = "x" * 64
WARMUP = 200


async def _encryption(driver: str, uri: str) -> tuple[Any, Any, Any]:
    """The driver's client, its ClientEncryption on a fresh key vault, and the Algorithm enum."""
    namespace = f"bench_encryption_{os.getpid()}.datakeys"
    providers = {"local": {"key": os.urandom(96)}}
    if driver == "pymongo":
        from bson.codec_options import CodecOptions
        from pymongo import AsyncMongoClient
        from pymongo.asynchronous.encryption import AsyncClientEncryption
        from pymongo.encryption_shared import Algorithm

        client: Any = AsyncMongoClient(uri)
        encryption: Any = AsyncClientEncryption(providers, namespace, client, CodecOptions())
        return client, encryption, Algorithm
    from mongio import MongoClient
    from mongio.encryption import Algorithm as MongioAlgorithm
    from mongio.encryption import ClientEncryption

    client = MongoClient(uri)
    return client, ClientEncryption(providers, namespace, client, None), MongioAlgorithm


async def _timed(operation: Any, ops: int, iterations: int) -> dict[str, Any]:
    for _ in range(WARMUP):
        await operation()
    walls, cpus = [], []
    for _ in range(iterations):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(ops):
            await operation()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return {"ops": ops, "wall": walls, "cpu": cpus, "unit": "value"}


async def workload(driver: str, uri: str, ops: int, iterations: int) -> dict[str, Any]:
    """Every task's samples for ``driver``."""
    client, encryption, algorithm = await _encryption(driver, uri)
    try:
        key_id = await encryption.create_data_key("local")
        deterministic = algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic
        random_algorithm = algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
        ciphertext = await encryption.encrypt(VALUE, random_algorithm, key_id=key_id)
        results = {
            "encrypt_deterministic": await _timed(
                lambda: encryption.encrypt(VALUE, deterministic, key_id=key_id), ops, iterations
            ),
            "encrypt_random": await _timed(
                lambda: encryption.encrypt(VALUE, random_algorithm, key_id=key_id), ops, iterations
            ),
            "decrypt": await _timed(lambda: encryption.decrypt(ciphertext), ops, iterations),
        }
    finally:
        await encryption.close()
        await client.drop_database(f"bench_encryption_{os.getpid()}")
        await client.close()
    return results


def run_workload(driver: str, uri: str, ops: int, iterations: int) -> dict[str, Any]:
    """One driver's workload in a fresh interpreter; its JSON result."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.encryption_bench",
        "--workload",
        driver,
        "--uri",
        uri,
        "--ops",
        str(ops),
        "--iterations",
        str(iterations),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    if completed.returncode != 0:
        raise SystemExit(f"the {driver} workload failed:\n{completed.stderr}")
    return dict(json.loads(completed.stdout))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", type=int, default=2000, help="values per timed iteration")
    parser.add_argument("--iterations", type=int, default=5, help="timed iterations per round")
    parser.add_argument("--json", help="also write the summaries here")
    parser.add_argument("--workload", choices=DRIVERS, help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workload is not None:
        print(json.dumps(asyncio.run(workload(args.workload, args.uri, args.ops, args.iterations))))
        return
    per_round: dict[str, dict[str, list[tuple[float, float]]]] = {
        task: {d: [] for d in DRIVERS} for task in TASKS
    }
    numbers: dict[str, dict[str, list[int]]] = {task: {d: [] for d in DRIVERS} for task in TASKS}
    server = start_server()
    try:
        for round_index in range(args.rounds):
            for driver in rotation(DRIVERS, round_index):
                for task, samples in run_workload(driver, server.uri, args.ops, args.iterations).items():
                    per_round[task][driver].append(round_value(samples))
                    numbers[task][driver].append(round_index)
            print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        server.stop()
    summaries = summarize(per_round, dict.fromkeys(TASKS, "value"), round_numbers=numbers)
    print(format_table(summaries))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([summary.__dict__ for summary in summaries], handle, indent=2, default=str)


if __name__ == "__main__":
    main()
