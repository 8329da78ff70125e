"""Encryption benchmarks: mongio against PyMongo async, in one run: explicit encryption (``ClientEncryption``)
per value, and writes and reads of documents with encrypted fields under automatic decryption.

    .venv/bin/python -m benchmarks.encryption_bench [--rounds 5] [--ops 2000] [--iterations 5] [--json FILE]

Tasks, per value (a 64-character string, with a ``local`` master key and one data key):

- ``encrypt_deterministic`` and ``encrypt_random``: ``encrypt`` with each algorithm, by key id;
- ``decrypt``: ``decrypt`` of a ciphertext made by the same driver.

Tasks per document (five fields encrypted explicitly beforehand, random algorithm, on a client made with
``auto_encryption_opts=AutoEncryptionOpts(..., bypass_auto_encryption=True)``, which decrypts every reply):

- ``insert_one_5_encrypted``: ``insert_one`` of the document (its ciphertexts sent as they are);
- ``find_one_5_decrypted``: ``find_one`` by ``_id``, the reply's five fields decrypted by the client.

A driver whose client refuses ``auto_encryption_opts`` (mongio before its automatic encryption lands) has no
row for those two tasks; its explicit rows are still measured.

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
EXPLICIT_TASKS = ("encrypt_deterministic", "encrypt_random", "decrypt")
AUTOMATIC_TASKS = ("insert_one_5_encrypted", "find_one_5_decrypted")
TASKS = EXPLICIT_TASKS + AUTOMATIC_TASKS
UNITS = {**dict.fromkeys(EXPLICIT_TASKS, "value"), **dict.fromkeys(AUTOMATIC_TASKS, "document")}
VALUE = "x" * 64
FIELDS = 5
WARMUP = 200
_REFUSED_AUTO_ENCRYPTION = "auto_encryption_opts is not supported"


def _namespace() -> str:
    return f"bench_encryption_{os.getpid()}.datakeys"


async def _encryption(driver: str, uri: str, providers: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The driver's client, its ClientEncryption on a fresh key vault, and the Algorithm enum."""
    if driver == "pymongo":
        from bson.codec_options import CodecOptions
        from pymongo import AsyncMongoClient
        from pymongo.asynchronous.encryption import AsyncClientEncryption
        from pymongo.encryption_shared import Algorithm

        client: Any = AsyncMongoClient(uri)
        encryption: Any = AsyncClientEncryption(providers, _namespace(), client, CodecOptions())
        return client, encryption, Algorithm
    from mongio import MongoClient
    from mongio.encryption import Algorithm as MongioAlgorithm
    from mongio.encryption import ClientEncryption

    client = MongoClient(uri)
    return client, ClientEncryption(providers, _namespace(), client, None), MongioAlgorithm


def _decrypting_client(driver: str, uri: str, providers: dict[str, Any]) -> Any:
    """A client that decrypts every reply (``bypass_auto_encryption=True``), or None when the driver refuses
    ``auto_encryption_opts``."""
    if driver == "pymongo":
        from pymongo import AsyncMongoClient
        from pymongo.encryption_options import AutoEncryptionOpts

        options = AutoEncryptionOpts(providers, _namespace(), bypass_auto_encryption=True)
        return AsyncMongoClient(uri, auto_encryption_opts=options)
    from mongio import MongoClient
    from mongio.encryption import AutoEncryptionOpts as MongioAutoEncryptionOpts
    from mongio.errors import ConfigurationError

    try:
        return MongoClient(
            uri,
            auto_encryption_opts=MongioAutoEncryptionOpts(
                providers, _namespace(), bypass_auto_encryption=True
            ),
        )
    except ConfigurationError as exc:
        if str(exc).startswith(_REFUSED_AUTO_ENCRYPTION):
            return None
        raise


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
    """Every task's samples for ``driver`` (without the automatic tasks when it refuses them)."""
    providers = {"local": {"key": os.urandom(96)}}
    client, encryption, algorithm = await _encryption(driver, uri, providers)
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
        fields = {
            f"field{index}": await encryption.encrypt(f"{VALUE}{index}", random_algorithm, key_id=key_id)
            for index in range(FIELDS)
        }
        results.update(await _automatic(driver, uri, providers, fields, ops, iterations))
    finally:
        await encryption.close()
        await client.drop_database(_namespace().partition(".")[0])
        await client.close()
    return results


async def _automatic(
    driver: str, uri: str, providers: dict[str, Any], fields: dict[str, Any], ops: int, iterations: int
) -> dict[str, Any]:
    """The automatic-decryption tasks' samples, or none when the driver refuses ``auto_encryption_opts``."""
    client = _decrypting_client(driver, uri, providers)
    if client is None:
        return {}
    collection = client[_namespace().partition(".")[0]]["documents"]
    counter = iter(range(1 << 62))
    try:
        insert = await _timed(
            lambda: collection.insert_one({"_id": next(counter), **fields}), ops, iterations
        )
        found = await collection.find_one({"_id": 0})
        if found is None or found["field0"] != f"{VALUE}0":
            raise SystemExit(f"{driver}: the reply was not decrypted: {found!r}")
        find = await _timed(lambda: collection.find_one({"_id": 0}), ops, iterations)
    finally:
        await client.close()
    return {"insert_one_5_encrypted": insert, "find_one_5_decrypted": find}


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
    summaries = summarize(per_round, UNITS, round_numbers=numbers)
    print(format_table(summaries))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([summary.__dict__ for summary in summaries], handle, indent=2, default=str)


if __name__ == "__main__":
    main()
