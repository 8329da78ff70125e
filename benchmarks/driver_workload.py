"""One driver's side of the driver benchmarks: run the workloads against a server, print JSON results.

Started by :mod:`benchmarks.driver_bench` in a process of its own for each round and driver, so that
``time.process_time()`` here measures the client alone::

    .venv/bin/python -m benchmarks.driver_workload --driver pymongo --uri mongodb://127.0.0.1:PORT/ \
        [--tasks run_command,find_one_by_id] [--quick] [--data DIR]

The workloads follow the driver performance benchmarking specification (single- and multi-document
tasks, with fewer operations per iteration so that a full comparison fits in minutes against the test
server) plus two concurrency workloads: 200 tasks each doing 50 ``find_one`` by ``_id``, and 1,000 tasks each
doing 10. ``find_many`` keeps every document it reads, as the specification's task does; ``find_many_streamed``
reads the same ones and lets each go before it takes the next, as a program streaming a result does. They are
written
once against the API the drivers share (``await coll.insert_one(doc)``, ``await coll.find_one(...)``,
``await db.command(...)``, ``async for`` over a cursor, ``await coll.insert_many(docs)``); each driver
only supplies a client.

Each task runs untimed warm-up iterations first, then timed ones. Wall time (``perf_counter``) and the
process's CPU time (``process_time``, all threads) are taken around the timed loop only: collection resets
and document copies happen before the clock starts. Every iteration's answers are checked after the clock
stops (:meth:`Workloads.check`): each task keeps the first and last result of its loop (each concurrent
task its own), and a wrong one (``None``, an error reply, another document) fails the task instead of
being timed. The result, one JSON object on stdout, holds every
timed iteration's wall and CPU seconds and its operation count.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import platform
import sys
import tarfile
import tempfile
import time
import traceback
import urllib.parse
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # imported when the floor runs: the other drivers' processes do not load it
    from benchmarks.floor_client import FloorClient

ROOT = Path(__file__).resolve().parent.parent
SPECS = Path(os.environ.get("MONGIO_SPECS", ROOT.parent / "shared" / "specifications" / "source"))
ARCHIVE = SPECS / "benchmarking" / "data" / "single_and_multi_document.tgz"
DATA_FILES = ("small_doc.json", "tweet.json", "large_doc.json")

DRIVERS = ("pymongo", "motor", "mongio", "mongio-uvloop")
# mongio with OpenTelemetry tracing: the API not installed (imports of it refused), installed and loaded but
# tracing off (the default), and on (an SDK tracer provider whose spans go nowhere, so the cost measured is
# mongio's spans and the SDK's span objects, not an exporter's).
TRACING_MODES = ("absent", "off", "on")
TRACING_DRIVERS = tuple(f"mongio-tracing-{mode}" for mode in TRACING_MODES)
# The floor (benchmarks.floor_client): the single-operation round trips with no driver, run only when asked for.
FLOOR_DRIVER = "floor"
# mongio on trio (through anyio), compared with mongio on asyncio by ``driver_bench --backends``; it runs the
# tasks written without asyncio's own calls (the concurrency workloads gather asyncio tasks).
TRIO_DRIVER = "mongio-trio"
TRIO_TASKS = ("run_command", "find_one_by_id", "find_many", "find_many_streamed", "small_insert_one")
FLOOR_TASKS = ("run_command", "find_one_by_id", "small_insert_one")
WORKLOAD_DRIVERS = (*DRIVERS, *TRACING_DRIVERS, FLOOR_DRIVER, TRIO_DRIVER)
DATABASE = "perftest"
COLLECTION = "corpus"


@dataclass(frozen=True)
class TaskSpec:
    """How much work one task does: ``ops`` counted operations per iteration (``unit`` says what an
    operation is), after ``warmup`` untimed iterations (of ``warmup_ops`` operations when set), over
    ``iterations`` timed ones; ``--quick`` uses ``quick_ops`` and ``quick_iterations`` instead."""

    name: str
    unit: str
    ops: int
    iterations: int
    warmup: int
    quick_ops: int
    quick_iterations: int
    warmup_ops: int | None = None


# The order matters: small_insert_one leaves thousands of retryable-write records behind, which slow the
# test server down, so it runs last in each process. The spec's 10,000 operations per iteration become
# 1,000 for the one-at-a-time tasks; the multi-document tasks keep the spec's sizes.
TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec("run_command", "op", 1000, 4, 1, 100, 2),
        TaskSpec("find_one_by_id", "op", 1000, 4, 1, 100, 2),
        TaskSpec("find_many", "doc", 10_000, 4, 1, 1000, 2),
        TaskSpec("find_many_streamed", "doc", 10_000, 4, 1, 1000, 2),
        TaskSpec("concurrency_200x50", "op", 10_000, 2, 1, 1000, 1, warmup_ops=1000),
        TaskSpec("concurrency_1000x10", "op", 10_000, 2, 1, 2000, 1, warmup_ops=2000),
        TaskSpec("large_insert_one", "op", 10, 3, 1, 2, 2),
        TaskSpec("small_bulk_insert", "doc", 10_000, 4, 1, 1000, 2),
        TaskSpec("large_bulk_insert", "doc", 10, 3, 1, 2, 2),
        TaskSpec("client_bulk_insert", "doc", 10_000, 4, 1, 1000, 2),
        TaskSpec("small_insert_one", "op", 1000, 3, 1, 100, 2),
    )
}

# Tasks running at once in each concurrency workload, each doing its share of find_one by _id.
CONCURRENT_TASKS = {"concurrency_200x50": 200, "concurrency_1000x10": 1000}
FIND_CORPUS_SIZE = 10_000


def load_documents(data_dir: Path | None) -> dict[str, dict[str, Any]]:
    """The spec's SMALL_DOC, TWEET and LARGE_DOC as dicts (strict JSON, no extended types)."""
    if data_dir is None:
        data_dir = Path(tempfile.mkdtemp(prefix="mongio-bench-data-"))
        extract_data(data_dir)
    return {
        name.removesuffix(".json"): json.loads((data_dir / name).read_text("utf-8")) for name in DATA_FILES
    }


def extract_data(target: Path) -> None:
    """Extract the three JSON documents from the spec's tarball into ``target``."""
    wanted = set(DATA_FILES)
    with tarfile.open(ARCHIVE) as archive:
        for member in archive:
            name = Path(member.name).name
            if name in wanted:
                handle = archive.extractfile(member)
                assert handle is not None
                (target / name).write_bytes(handle.read())
                wanted.discard(name)
    if wanted:
        raise SystemExit(f"{ARCHIVE} lacks {sorted(wanted)}")


class WrongResult(AssertionError):
    """A task's driver answered something other than what the operation must return."""


@dataclass(frozen=True)
class Outcome:
    """What a task's loop kept to be checked once the clock has stopped: its first and last results (for a
    concurrency task, one Outcome per concurrent task)."""

    first: Any
    last: Any


@dataclass(frozen=True)
class Read:
    """What a find task's loop kept: how many documents it read, and the first and last of them."""

    count: int
    first: Any
    last: Any


class ClientUnavailable(Exception):
    """The driver cannot be imported or cannot do the basic operations."""


@dataclass
class Harness:
    driver: str
    version: str
    loop: str
    client: Any
    close: Callable[[], Awaitable[None]]


async def _no_wait() -> None:
    return None


def open_client(driver: str, uri: str) -> Harness:
    """Make the driver's client for ``uri`` (with its default options) and say how to close it."""
    if driver == "pymongo":
        import pymongo
        from pymongo import AsyncMongoClient

        client: Any = AsyncMongoClient(uri)
        return Harness(driver, pymongo.version, "asyncio", client, client.close)
    if driver == "motor":
        from motor.motor_asyncio import AsyncIOMotorClient

        client = AsyncIOMotorClient(uri)

        async def close_motor() -> None:
            client.close()  # synchronous in Motor

        return Harness(driver, metadata.version("motor"), "asyncio", client, close_motor)
    if driver in ("mongio", "mongio-uvloop", TRIO_DRIVER, FLOOR_DRIVER) or driver in TRACING_DRIVERS:
        try:
            options: dict[str, Any] = {}
            if driver in TRACING_DRIVERS:
                options = tracing_options(driver.removeprefix("mongio-tracing-"))
            import mongio
            from mongio.client import MongoClient

            client = MongoClient(uri, **options)
        except Exception as error:
            raise ClientUnavailable(f"{type(error).__name__}: {error}") from error
        loop = {"mongio-uvloop": "uvloop", TRIO_DRIVER: "trio"}.get(driver, "asyncio")
        # The floor's mongio client only sets up (drops, loads the corpus); the floor client does the work.
        version = "no driver" if driver == FLOOR_DRIVER else mongio.__version__
        return Harness(driver, version, loop, client, client.close)
    raise SystemExit(f"unknown driver {driver!r}; choose from {', '.join(DRIVERS)}")


class _RefuseOpenTelemetry:
    """A meta path finder that makes ``import opentelemetry...`` fail, as if it were not installed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r} (refused by the benchmark)", name=name)
        return None


def tracing_options(mode: str) -> dict[str, Any]:
    """Prepare this process for a tracing mode (``absent``, ``off``, ``on``); the client's keyword options."""
    if mode == "absent":
        if any(name.split(".")[0] == "opentelemetry" for name in sys.modules):
            raise RuntimeError("opentelemetry was imported before the benchmark could refuse it")
        sys.meta_path.insert(0, _RefuseOpenTelemetry())
        return {}
    import opentelemetry.trace  # noqa: F401  (installed and loaded, as in an application that uses it)

    if mode == "off":
        return {}
    from opentelemetry.sdk.trace import TracerProvider

    return {"tracing": {"enabled": True, "tracer_provider": TracerProvider()}}


def server_process_cpu(pid: int | None) -> float | None:
    """The CPU seconds (user and system, all threads) the server process ``pid`` has used so far, read from
    /proc; None where that cannot be read (no pid given, or not Linux)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


class Timed(NamedTuple):
    """One timed run: its wall time, this process's CPU time, the server's CPU time (None when not known),
    and what the work returned."""

    wall: float
    cpu: float
    server: float | None
    outcome: Any


async def timed(work: Callable[[], Coroutine[Any, Any, Any]], server_pid: int | None = None) -> Timed:
    """Run ``work`` once; its wall time, this process's CPU time and, given a pid, the server's CPU time."""
    server_start = server_process_cpu(server_pid)
    cpu_start = time.process_time()
    wall_start = time.perf_counter()
    outcome = await work()
    wall = time.perf_counter() - wall_start
    cpu = time.process_time() - cpu_start
    server_end = server_process_cpu(server_pid)
    server = None if server_start is None or server_end is None else server_end - server_start
    return Timed(wall, cpu, server, outcome)


class Workloads:
    """The tasks, each as setup / before-each-iteration / timed work, over one client; with ``floor``, the
    timed work of the single-operation tasks is the floor client's (the client only sets up)."""

    def __init__(
        self,
        client: Any,
        documents: dict[str, dict[str, Any]],
        quick: bool,
        server_pid: int | None = None,
        floor: FloorClient | None = None,
    ) -> None:
        self.client = client
        self.floor = floor
        self.server_pid = server_pid
        self.quick = quick
        self.db = client[DATABASE]
        self.coll = self.db[COLLECTION]
        self.documents = documents
        self._pending: list[dict[str, Any]] = []
        self._insert_one: Any = None

    def insert_model(self, document: dict[str, Any], namespace: str) -> Any:
        """An ``InsertOne`` of the client's driver, for its client-level ``bulk_write``."""
        if self._insert_one is None:
            driver = "mongio" if type(self.client).__module__.startswith("mongio") else "pymongo"
            self._insert_one = importlib.import_module(driver).InsertOne
        return self._insert_one(document, namespace=namespace)

    async def reset_collection(self) -> None:
        await self.db.drop_collection(COLLECTION)
        await self.db.create_collection(COLLECTION)

    async def load_corpus(self, document: dict[str, Any], count: int, numbered: bool) -> None:
        """Insert ``count`` copies (``_id`` 1..count when ``numbered``) with insert_many, untimed."""
        if numbered:
            copies = [{**document, "_id": number} for number in range(1, count + 1)]
        else:
            copies = [dict(document) for _ in range(count)]
        await self.coll.insert_many(copies)

    async def setup(self, task: str, ops: int) -> None:
        await self.client.drop_database(DATABASE)
        if task == "find_one_by_id" or task in CONCURRENT_TASKS:
            size = ops if self.quick else max(ops, FIND_CORPUS_SIZE)
            await self.load_corpus(self.documents["tweet"], size, numbered=True)
        elif task in ("find_many", "find_many_streamed"):
            await self.load_corpus(self.documents["tweet"], ops, numbered=False)

    async def before(self, task: str, ops: int) -> None:
        # Drivers may add ``_id`` to the documents they insert: every insert gets a fresh copy, made here.
        if task in ("small_insert_one", "small_bulk_insert", "client_bulk_insert"):
            await self.reset_collection()
            self._pending = [dict(self.documents["small_doc"]) for _ in range(ops)]
        elif task in ("large_insert_one", "large_bulk_insert"):
            await self.reset_collection()
            self._pending = [dict(self.documents["large_doc"]) for _ in range(ops)]
        gc.collect()

    def work(self, task: str, ops: int) -> Callable[[], Coroutine[Any, Any, Any]]:
        """The timed loop of ``task``: it keeps what :meth:`check` looks at, and checks nothing itself."""
        if self.floor is not None:
            return self._floor_work(task, ops)
        db, coll = self.db, self.coll

        async def run_command() -> Outcome:
            command = {"hello": True}
            first = last = await db.command(command)
            for _ in range(ops - 1):
                last = await db.command(command)
            return Outcome(first, last)

        async def find_one_by_id() -> Outcome:
            first = last = await coll.find_one({"_id": 1})
            for number in range(2, ops + 1):
                last = await coll.find_one({"_id": number})
            return Outcome(first, last)

        async def find_many() -> Read:
            documents = [document async for document in coll.find({})]
            return Read(len(documents), documents[0], documents[-1])

        async def find_many_streamed() -> Read:
            # The same documents, each let go of before the next is taken (a program streaming a result).
            documents = aiter(coll.find({}))
            first = last = await anext(documents)
            count = 1
            async for last in documents:
                count += len(last) > 0
            return Read(count, first, last)

        def concurrency(tasks: int) -> Callable[[], Coroutine[Any, Any, list[Outcome]]]:
            async def run() -> list[Outcome]:
                per_task = ops // tasks

                async def worker(first_id: int) -> Outcome:
                    first = last = await coll.find_one({"_id": first_id})
                    for number in range(first_id + 1, first_id + per_task):
                        last = await coll.find_one({"_id": number})
                    return Outcome(first, last)

                return await asyncio.gather(*(worker(1 + index * per_task) for index in range(tasks)))

            return run

        async def insert_one() -> Outcome:
            documents = iter(self._pending)
            first = last = await coll.insert_one(next(documents))
            for document in documents:
                last = await coll.insert_one(document)
            return Outcome(first, last)

        async def bulk_insert() -> Any:
            return await coll.insert_many(self._pending, ordered=True)

        async def client_bulk_insert() -> Any:
            namespace = f"{DATABASE}.{COLLECTION}"
            models = [self.insert_model(document, namespace) for document in self._pending]
            return await self.client.bulk_write(models, ordered=True)

        table: dict[str, Callable[[], Coroutine[Any, Any, Any]]] = {
            "run_command": run_command,
            "find_one_by_id": find_one_by_id,
            "find_many": find_many,
            "find_many_streamed": find_many_streamed,
            "concurrency_200x50": concurrency(CONCURRENT_TASKS["concurrency_200x50"]),
            "concurrency_1000x10": concurrency(CONCURRENT_TASKS["concurrency_1000x10"]),
            "small_insert_one": insert_one,
            "large_insert_one": insert_one,
            "small_bulk_insert": bulk_insert,
            "large_bulk_insert": bulk_insert,
            "client_bulk_insert": client_bulk_insert,
        }
        return table[task]

    def check(self, task: str, ops: int, outcome: Any) -> None:
        """Raise :class:`WrongResult` unless what ``task``'s loop of ``ops`` operations kept is right. The floor
        client checks its own replies (benchmarks.floor_client)."""
        if self.floor is not None:
            return
        checks: dict[str, Callable[[str, int, Any], None]] = {
            "run_command": self._check_hellos,
            "find_one_by_id": self._check_found_in_order,
            "find_many": self._check_read,
            "find_many_streamed": self._check_read,
            "concurrency_200x50": self._check_found_per_task,
            "concurrency_1000x10": self._check_found_per_task,
            "small_insert_one": self._check_inserted_one,
            "large_insert_one": self._check_inserted_one,
            "small_bulk_insert": self._check_inserted_many,
            "large_bulk_insert": self._check_inserted_many,
            "client_bulk_insert": self._check_client_bulk_write,
        }
        checks[task](task, ops, outcome)

    @staticmethod
    def _check_hellos(task: str, ops: int, outcome: Outcome) -> None:
        for reply in (outcome.first, outcome.last):
            _expect(isinstance(reply, Mapping) and reply.get("ok") == 1, task, "a hello reply", reply)
            _expect(reply.get("isWritablePrimary") is True, task, "a primary's hello reply", reply)

    def _check_read(self, task: str, ops: int, read: Read) -> None:
        _expect(read.count == ops, task, f"{ops} documents read", read.count)
        for document in (read.first, read.last):
            _expect(isinstance(document, Mapping), task, "a document of the corpus", document)
            self._expect_tweet(task, document)

    def _check_found_in_order(self, task: str, ops: int, outcome: Outcome) -> None:
        self._check_found(task, outcome, 1, ops)

    def _check_found_per_task(self, task: str, ops: int, outcomes: list[Outcome]) -> None:
        tasks = CONCURRENT_TASKS[task]
        per_task = ops // tasks
        _expect(len(outcomes) == tasks, task, f"{tasks} results, one per concurrent task", len(outcomes))
        for index, outcome in enumerate(outcomes):
            self._check_found(task, outcome, 1 + index * per_task, (index + 1) * per_task)

    def _check_inserted_one(self, task: str, ops: int, outcome: Outcome) -> None:
        for result, document in ((outcome.first, self._pending[0]), (outcome.last, self._pending[-1])):
            _expect(result is not None and result.acknowledged, task, "an acknowledged insert", result)
            _expect(result.inserted_id == document["_id"], task, "the document's _id", result.inserted_id)

    def _check_inserted_many(self, task: str, ops: int, result: Any) -> None:
        _expect(result is not None and result.acknowledged, task, "an acknowledged insert_many", result)
        ids = [document["_id"] for document in self._pending]
        _expect(list(result.inserted_ids) == ids, task, f"the {ops} documents' _ids", result.inserted_ids)

    @staticmethod
    def _check_client_bulk_write(task: str, ops: int, result: Any) -> None:
        _expect(result is not None and result.acknowledged, task, "an acknowledged bulk_write", result)
        _expect(result.inserted_count == ops, task, f"{ops} documents inserted", result.inserted_count)

    def _check_found(self, task: str, outcome: Outcome, first_id: int, last_id: int) -> None:
        """The first and last documents a find_one loop read are the corpus's tweets with those ``_id``s (the
        loopback responder too answers with the ``_id`` asked for)."""
        for document, wanted_id in ((outcome.first, first_id), (outcome.last, last_id)):
            _expect(isinstance(document, Mapping), task, f"the document with _id {wanted_id}", document)
            _expect(document.get("_id") == wanted_id, task, f"_id {wanted_id}", document.get("_id"))
            self._expect_tweet(task, document)

    def _expect_tweet(self, task: str, document: Mapping[str, Any]) -> None:
        """``document`` holds the tweet the corpus was made of (its own ``_id`` aside)."""
        fields = {key: value for key, value in document.items() if key != "_id"}
        _expect(fields == self.documents["tweet"], task, "the tweet's fields", sorted(fields))

    def _floor_work(self, task: str, ops: int) -> Callable[[], Coroutine[Any, Any, Any]]:
        floor = self.floor
        assert floor is not None
        table: dict[str, Callable[[int], Coroutine[Any, Any, None]]] = {
            "run_command": floor.run_command,
            "find_one_by_id": floor.find_one_by_id,
            "small_insert_one": floor.small_insert_one,
        }
        if task not in table:
            raise ValueError(f"the floor client runs only {', '.join(FLOOR_TASKS)}, not {task}")
        method = table[task]

        async def floor_task() -> None:
            await method(ops)

        return floor_task

    async def run(self, spec: TaskSpec) -> dict[str, Any]:
        ops = spec.quick_ops if self.quick else spec.ops
        iterations = spec.quick_iterations if self.quick else spec.iterations
        await self.setup(spec.name, ops)
        # A full-size warm-up is not needed where a smaller one already opens every connection.
        warmup_ops = min(ops, spec.warmup_ops or ops)
        for _ in range(spec.warmup):
            await self.before(spec.name, warmup_ops)
            self.check(spec.name, warmup_ops, await self.work(spec.name, warmup_ops)())
        walls: list[float] = []
        cpus: list[float] = []
        server_cpus: list[float] = []
        for _ in range(iterations):
            await self.before(spec.name, ops)
            run = await timed(self.work(spec.name, ops), self.server_pid)
            self.check(spec.name, ops, run.outcome)
            walls.append(run.wall)
            cpus.append(run.cpu)
            if run.server is not None:
                server_cpus.append(run.server)
        self._pending = []
        await self.client.drop_database(DATABASE)
        result: dict[str, Any] = {"ops": ops, "unit": spec.unit, "wall": walls, "cpu": cpus}
        if len(server_cpus) == len(walls):
            result["server_cpu"] = server_cpus
        return result


async def run_workloads(
    driver: str, uri: str, tasks: list[str], quick: bool, data_dir: Path | None, server_pid: int | None = None
) -> dict[str, Any]:
    documents = load_documents(data_dir)
    result: dict[str, Any] = {
        "driver": driver,
        "python": platform.python_version(),
        "results": {},
        "errors": {},
    }
    try:
        harness = open_client(driver, uri)
    except ClientUnavailable as error:
        result["skipped"] = f"mongio client not available: {error}"
        return result
    result["version"] = harness.version
    result["loop"] = harness.loop
    try:
        try:
            await harness.client[DATABASE].command({"ping": 1})
        except Exception as error:
            if driver.startswith("mongio"):
                result["skipped"] = f"mongio client not available: {type(error).__name__}: {error}"
                return result
            raise
        floor = None
        if driver == FLOOR_DRIVER:
            from benchmarks.floor_client import FloorClient

            address = urllib.parse.urlsplit(uri)
            assert address.hostname is not None and address.port is not None
            floor = await FloorClient.connect(
                address.hostname, address.port, DATABASE, COLLECTION, documents["small_doc"]
            )
        workloads = Workloads(harness.client, documents, quick, server_pid, floor)
        try:
            for name in tasks:
                try:
                    result["results"][name] = await workloads.run(TASKS[name])
                except Exception as error:
                    print(traceback.format_exc(), file=sys.stderr)
                    result["errors"][name] = f"{type(error).__name__}: {error}"
        finally:
            if floor is not None:
                floor.close()
    finally:
        await harness.close()
    return result


async def _result_of(coroutine: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    return await coroutine


def _expect(condition: bool, task: str, wanted: str, got: Any) -> None:
    if not condition:
        raise WrongResult(f"{task}: expected {wanted}, got {got!r:.300}")


def parse_tasks(text: str | None) -> list[str]:
    """The tasks named in a comma-separated list (all of them when empty), in the canonical order."""
    if not text:
        return list(TASKS)
    wanted = {name.strip() for name in text.split(",") if name.strip()}
    unknown = wanted - set(TASKS)
    if unknown:
        raise SystemExit(f"unknown task(s) {sorted(unknown)}; choose from {', '.join(TASKS)}")
    return [name for name in TASKS if name in wanted]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--driver", required=True, choices=WORKLOAD_DRIVERS)
    parser.add_argument("--uri", required=True)
    parser.add_argument("--tasks", help="comma-separated task names (default: all)")
    parser.add_argument("--quick", action="store_true", help="small iterations, for a smoke run")
    parser.add_argument("--data", type=Path, help="directory holding the spec's JSON documents")
    parser.add_argument("--server-pid", type=int, help="the server's process id, to report its CPU time too")
    args = parser.parse_args(argv)
    tasks = parse_tasks(args.tasks)
    if args.driver == TRIO_DRIVER and not set(tasks) <= set(TRIO_TASKS):
        raise SystemExit(f"{TRIO_DRIVER} runs only {', '.join(TRIO_TASKS)}")
    coroutine = run_workloads(args.driver, args.uri, tasks, args.quick, args.data, args.server_pid)
    if args.driver == TRIO_DRIVER:
        import trio

        result = trio.run(_result_of, coroutine)
    elif args.driver == "mongio-uvloop":
        try:
            import uvloop
        except ImportError as error:
            print(json.dumps({"driver": args.driver, "skipped": f"uvloop not available: {error}"}))
            return
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            result = runner.run(coroutine)
    else:
        result = asyncio.run(coroutine)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
