"""Running a test through a fake backend: order of the steps, skips, threads, the client-free testRunner
operations, event stores and outcome checks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from spec_runner.unified.entities import EntityKind, EntityMap
from spec_runner.unified.errors import MatchError, UnifiedTestError
from spec_runner.unified.events import (
    ClientEventStore,
    ClientLogStore,
    CommandStartedEvent,
    CommandSucceededEvent,
    LogMessage,
    PoolClearedEvent,
)
from spec_runner.unified.loader import CollectionData, EntityDescription, UnifiedTestFile, load
from spec_runner.unified.operations import (
    REGISTRY,
    OperationCall,
    OperationContext,
    OperationRegistry,
    execute,
)
from spec_runner.unified.requirements import ServerFacts
from spec_runner.unified.runner import TestSkipped, run_test
from spec_runner.unified.threads import ThreadEntity, thread_tasks

FACTS = ServerFacts(version=(7, 0, 0), topology="replicaset")


class FakeClient:
    def __init__(self, store: ClientEventStore) -> None:
        self.store = store


class FakeBackend:
    """Clients that publish a started and a succeeded event per ``ping``; collections held in memory."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.collections: dict[str, list[Mapping[str, Any]]] = {}

    async def prepare_collection(self, data: CollectionData) -> None:
        self.steps.append(f"prepare {data.namespace}")
        self.collections[data.namespace] = [dict(d) for d in data.documents]

    async def create_entity(self, description: EntityDescription, context: OperationContext) -> None:
        self.steps.append(f"create {description.kind} {description.id}")
        if description.kind == "client":
            store = ClientEventStore(
                description.options.get("observeEvents", ()),
                ignore_commands=description.options.get("ignoreCommandMonitoringEvents", ()),
                entities=context.entities,
            )
            logs = ClientLogStore(description.options.get("observeLogMessages", {"command": "debug"}))
            context.entities.add(
                description.id, EntityKind.CLIENT, FakeClient(store), events=store, logs=logs
            )
        elif description.kind == "collection":
            namespace = f"db.{description.options['collectionName']}"
            context.entities.add(description.id, EntityKind.COLLECTION, namespace)
        elif description.kind == "session":
            context.entities.add_session(description.id, object(), {"id": description.id})
        else:
            context.entities.add(description.id, EntityKind(description.kind), object())

    async def collection_documents(self, data: CollectionData) -> Sequence[Mapping[str, Any]]:
        self.steps.append(f"read {data.namespace}")
        return self.collections.get(data.namespace, [])

    async def disable_fail_points(self) -> None:
        self.steps.append("fail points off")

    async def end_test(self, context: OperationContext) -> None:
        self.steps.append(f"end with {sorted(context.entities.snapshot())}")


@pytest.fixture
def registry() -> OperationRegistry:
    registry = OperationRegistry()
    # The client-free testRunner operations come from the default registry.
    for name in (
        "wait",
        "runOnThread",
        "waitForThread",
        "waitForEvent",
        "assertEventCount",
        "assertTopologyType",
    ):
        registry.register(REGISTRY.lookup("testRunner", name))

    @registry.operation("ping", object="client", optional=("fail",))
    async def ping(call: OperationCall) -> Any:
        store = call.target.store
        store.record(CommandStartedEvent(command_name="ping", database_name="admin", command={"ping": 1}))
        store.record(
            CommandStartedEvent(command_name="configureFailPoint", command={"configureFailPoint": "x"})
        )
        store.record(CommandSucceededEvent(command_name="ping", database_name="admin", reply={"ok": 1}))
        call.entities.client_logs(call.operation.object).record(
            LogMessage("debug", "command", {"message": "Command succeeded", "commandName": "ping"})
        )
        if call.arguments.get("fail"):
            raise RuntimeError("ping failed")
        return {"ok": 1}

    @registry.operation("insertOne", object="collection", required=("document",))
    async def insert_one(call: OperationCall) -> Any:
        await asyncio.sleep(0)
        backend = call.context.runner
        backend.collections.setdefault(call.target, []).append(call.arguments["document"])
        return {"insertedId": call.arguments["document"]["_id"]}

    @registry.operation("clearPool", object="client")
    async def clear_pool(call: OperationCall) -> Any:
        call.target.store.record(PoolClearedEvent())
        return None

    return registry


def write_file(tmp_path: Path, tests: list[dict[str, Any]], **top: Any) -> UnifiedTestFile:
    document = {
        "description": "file",
        "schemaVersion": "1.10",
        "createEntities": [
            {
                "client": {
                    "id": "client0",
                    "observeEvents": ["commandStartedEvent", "commandSucceededEvent", "poolClearedEvent"],
                }
            },
            {"collection": {"id": "collection0", "database": "database0", "collectionName": "coll"}},
            {"thread": {"id": "thread0"}},
        ],
        "initialData": [{"collectionName": "coll", "databaseName": "db", "documents": [{"_id": 1}]}],
        "tests": tests,
        **top,
    }
    path = tmp_path / "file.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return load(path)


async def run(
    test_file: UnifiedTestFile, backend: FakeBackend, registry: OperationRegistry, index: int = 0
) -> None:
    await run_test(test_file, test_file.tests[index], facts=FACTS, backend=backend, registry=registry)


async def test_a_passing_test_runs_its_steps_in_order(tmp_path: Path, registry: OperationRegistry) -> None:
    test_file = write_file(
        tmp_path,
        [
            {
                "description": "ping and insert",
                "operations": [
                    {"name": "ping", "object": "client0", "expectResult": {"ok": 1}},
                    {"name": "insertOne", "object": "collection0", "arguments": {"document": {"_id": 2}}},
                ],
                "expectEvents": [
                    {
                        "client": "client0",
                        "events": [
                            {"commandStartedEvent": {"commandName": "ping", "command": {"ping": 1}}},
                            {"commandSucceededEvent": {"reply": {"ok": 1}}},
                        ],
                    }
                ],
                "expectLogMessages": [
                    {
                        "client": "client0",
                        "messages": [
                            {"level": "debug", "component": "command", "data": {"commandName": "ping"}}
                        ],
                    }
                ],
                "outcome": [
                    {"collectionName": "coll", "databaseName": "db", "documents": [{"_id": 1}, {"_id": 2}]}
                ],
            }
        ],
    )
    backend = FakeBackend()
    await run(test_file, backend, registry)
    assert backend.steps == [
        "prepare db.coll",
        "create client client0",
        "create collection collection0",
        "fail points off",
        "read db.coll",
        "end with ['client0', 'collection0', 'thread0']",
    ]


async def test_entities_can_be_inspected_before_the_map_is_cleared(
    tmp_path: Path, registry: OperationRegistry
) -> None:
    test_file = write_file(tmp_path, [{"description": "ping", "operations": [{"name": "ping", "object": "client0"}]}])
    seen: list[list[str]] = []
    await run_test(
        test_file,
        test_file.tests[0],
        facts=FACTS,
        backend=FakeBackend(),
        registry=registry,
        inspect_entities=lambda entities: seen.append(sorted(entities.snapshot())),
    )
    assert seen == [["client0", "collection0", "thread0"]]


async def test_failures_still_end_the_test(tmp_path: Path, registry: OperationRegistry) -> None:
    test_file = write_file(
        tmp_path,
        [
            {
                "description": "error",
                "operations": [{"name": "ping", "object": "client0", "arguments": {"fail": True}}],
            },
            {
                "description": "events",
                "operations": [{"name": "ping", "object": "client0"}],
                "expectEvents": [
                    {"client": "client0", "events": [{"commandStartedEvent": {"commandName": "find"}}]}
                ],
            },
            {
                "description": "outcome",
                "operations": [],
                "outcome": [
                    {"collectionName": "coll", "databaseName": "db", "documents": [{"_id": 1, "x": 1}]}
                ],
            },
        ],
    )
    for index, message in enumerate(["unexpected error RuntimeError", "extra", r"outcome\[db.coll\]\[0\]"]):
        backend = FakeBackend()
        with pytest.raises(MatchError, match=message):
            await run(test_file, backend, registry, index)
        assert backend.steps[-1].startswith("end with")


async def test_skips(tmp_path: Path, registry: OperationRegistry) -> None:
    test_file = write_file(
        tmp_path,
        [
            {"description": "skipped", "skipReason": "not today", "operations": []},
            {
                "description": "needs 8.0",
                "runOnRequirements": [{"minServerVersion": "8.0"}],
                "operations": [],
            },
        ],
        runOnRequirements=[{"topologies": ["replicaset", "sharded"]}],
    )
    backend = FakeBackend()
    with pytest.raises(TestSkipped, match="skipReason: not today"):
        await run(test_file, backend, registry, 0)
    with pytest.raises(
        TestSkipped, match=r"test runOnRequirement not met: minServerVersion 8.0 \(server is 7.0.0\)"
    ):
        await run(test_file, backend, registry, 1)
    single = ServerFacts(version=(8, 0, 0), topology="single")
    with pytest.raises(TestSkipped, match="file runOnRequirement"):
        await run_test(test_file, test_file.tests[1], facts=single, backend=backend, registry=registry)
    assert backend.steps == []


async def test_threads_run_operations_beside_the_test(tmp_path: Path, registry: OperationRegistry) -> None:
    test_file = write_file(
        tmp_path,
        [
            {
                "description": "threads",
                "operations": [
                    {
                        "name": "runOnThread",
                        "object": "testRunner",
                        "arguments": {
                            "thread": "thread0",
                            "operation": {
                                "name": "insertOne",
                                "object": "collection0",
                                "arguments": {"document": {"_id": 3}},
                                "expectResult": {"insertedId": 3},
                            },
                        },
                    },
                    {"name": "waitForThread", "object": "testRunner", "arguments": {"thread": "thread0"}},
                ],
                "outcome": [
                    {"collectionName": "coll", "databaseName": "db", "documents": [{"_id": 1}, {"_id": 3}]}
                ],
            },
            {
                "description": "failing thread",
                "operations": [
                    {
                        "name": "runOnThread",
                        "object": "testRunner",
                        "arguments": {
                            "thread": "thread0",
                            "operation": {
                                "name": "insertOne",
                                "object": "collection0",
                                "arguments": {"document": {"_id": 3}},
                                "expectResult": {"insertedId": 4},
                            },
                        },
                    },
                    {"name": "waitForThread", "object": "testRunner", "arguments": {"thread": "thread0"}},
                ],
            },
        ],
    )
    await run(test_file, FakeBackend(), registry, 0)
    with pytest.raises(MatchError, match="thread thread0"):
        await run(test_file, FakeBackend(), registry, 1)


async def test_wait_for_event_and_assert_event_count(tmp_path: Path, registry: OperationRegistry) -> None:
    test_file = write_file(
        tmp_path,
        [
            {
                "description": "events",
                "operations": [
                    {
                        "name": "runOnThread",
                        "object": "testRunner",
                        "arguments": {
                            "thread": "thread0",
                            "operation": {"name": "clearPool", "object": "client0"},
                        },
                    },
                    {
                        "name": "waitForEvent",
                        "object": "testRunner",
                        "arguments": {"client": "client0", "event": {"poolClearedEvent": {}}, "count": 1},
                    },
                    {
                        "name": "assertEventCount",
                        "object": "testRunner",
                        "arguments": {"client": "client0", "event": {"poolClearedEvent": {}}, "count": 1},
                    },
                    {"name": "waitForThread", "object": "testRunner", "arguments": {"thread": "thread0"}},
                    {
                        "name": "assertEventCount",
                        "object": "testRunner",
                        "arguments": {"client": "client0", "event": {"commandStartedEvent": {}}, "count": 1},
                    },
                ],
            }
        ],
    )
    with pytest.raises(
        MatchError, match=r"assertEventCount: expected 1 x \{'commandStartedEvent': \{\}\}, observed 0"
    ):
        await run(test_file, FakeBackend(), registry)


# --- event and log stores ---------------------------------------------------------------------------------


def test_event_store_filters() -> None:
    store = ClientEventStore(["commandStartedEvent"], ignore_commands=["Find"])
    store.record(CommandStartedEvent(command_name="insert", command={"insert": "c"}))
    store.record(CommandStartedEvent(command_name="find", command={"find": "c"}))
    store.record(CommandStartedEvent(command_name="configureFailPoint", command={"configureFailPoint": "x"}))
    store.record(CommandStartedEvent(command_name="saslStart", command={}))
    store.record(CommandSucceededEvent(command_name="insert"))
    store.record(PoolClearedEvent())
    assert [e.command_name for e in store.events] == ["insert"]
    store.enabled = False
    store.record(CommandStartedEvent(command_name="insert", command={"insert": "c"}))
    assert len(store.events) == 1


def test_event_store_sensitive_hello() -> None:
    store = ClientEventStore(["commandStartedEvent", "commandSucceededEvent"])
    store.record(CommandStartedEvent(command_name="hello", command={}, request_id=1))
    store.record(CommandSucceededEvent(command_name="hello", reply={}, request_id=1))
    store.record(CommandStartedEvent(command_name="hello", command={"hello": 1}, request_id=2))
    store.record(CommandSucceededEvent(command_name="hello", reply={"ok": 1}, request_id=2))
    assert [e.request_id for e in store.events] == [2, 2]
    observing = ClientEventStore(["commandStartedEvent"], observe_sensitive=True)
    observing.record(CommandStartedEvent(command_name="saslStart", command={}))
    assert len(observing.events) == 1


def test_event_store_refuses_unknown_types() -> None:
    with pytest.raises(UnifiedTestError):
        ClientEventStore(["commandStarted"])


async def test_wait_for_is_woken_by_record_and_times_out() -> None:
    store = ClientEventStore(["poolClearedEvent"])
    waiting = asyncio.ensure_future(store.wait_for({"poolClearedEvent": {}}, 2, within=5))
    await asyncio.sleep(0)
    store.record(PoolClearedEvent())
    await asyncio.sleep(0)
    assert not waiting.done()
    store.record(PoolClearedEvent())
    await asyncio.wait_for(waiting, 1)
    with pytest.raises(MatchError, match=r"not observed within 0\.01s"):
        await store.wait_for({"poolClearedEvent": {}}, 3, within=0.01)


def test_log_store_levels() -> None:
    logs = ClientLogStore({"command": "info", "connection": "debug"})
    logs.record(LogMessage("debug", "command", {}))
    logs.record(LogMessage("info", "command", {"n": 1}))
    logs.record(LogMessage("error", "command", {"n": 2}))
    logs.record(LogMessage("trace", "connection", {}))
    logs.record(LogMessage("debug", "connection", {"n": 3}))
    logs.record(LogMessage("emergency", "topology", {}))
    assert [m.data.get("n") for m in logs.messages] == [1, 2, 3]


async def test_thread_join_timeout_and_close() -> None:
    gate = anyio.Event()

    async def slow(_: Any) -> None:
        await gate.wait()

    async with thread_tasks() as tasks:
        thread = ThreadEntity("t", slow, tasks)
        thread.schedule("op")
        with pytest.raises(MatchError, match="did not finish"):
            await thread.join(within=0.01)
        gate.set()
        await thread.join()
        with pytest.raises(MatchError, match="joined"):
            thread.schedule("again")
        stuck = ThreadEntity("stuck", slow, tasks)
        stuck.schedule("never ends")
        await anyio.lowlevel.checkpoint()
        await stuck.close()
        with pytest.raises(MatchError, match="joined"):
            stuck.schedule("after close")


async def test_a_thread_stops_at_its_first_error_and_join_raises_it() -> None:
    ran: list[str] = []

    async def run(operation: str) -> None:
        ran.append(operation)
        if operation == "fails":
            raise ValueError("the operation failed")

    async with thread_tasks() as tasks:
        thread = ThreadEntity("t", run, tasks)
        for operation in ("first", "fails", "skipped"):
            thread.schedule(operation)
        with pytest.raises(MatchError, match="ValueError: the operation failed"):
            await thread.join()
    assert ran == ["first", "fails"]


async def test_an_error_leaving_the_thread_tasks_block_is_raised_as_it_is() -> None:
    async def idle(_: Any) -> None:
        await anyio.lowlevel.checkpoint()

    with pytest.raises(MatchError, match="the test's own failure"):
        async with thread_tasks() as tasks:
            thread = ThreadEntity("t", idle, tasks)
            try:
                raise MatchError("test", "the test's own failure")
            finally:
                await thread.close()


async def test_topology_type_assertion() -> None:
    class Description:
        topology_type_name = "ReplicaSetWithPrimary"

    entities = EntityMap()
    entities.add("topology0", EntityKind.TOPOLOGY_DESCRIPTION, Description())
    context = OperationContext(entities=entities)
    from spec_runner.unified.loader import Operation

    arguments = {"topologyDescription": "topology0", "topologyType": "ReplicaSetWithPrimary"}
    await execute(
        context,
        Operation.parse({"name": "assertTopologyType", "object": "testRunner", "arguments": arguments}),
    )
    arguments["topologyType"] = "Single"
    with pytest.raises(MatchError, match="expected Single, got ReplicaSetWithPrimary"):
        await execute(
            context,
            Operation.parse({"name": "assertTopologyType", "object": "testRunner", "arguments": arguments}),
        )


# --- collection into spec cases ---------------------------------------------------------------------------


def test_unified_cases(tmp_path: Path) -> None:
    from spec_runner.model import RunContext
    from spec_runner.runner import run_case_sync
    from spec_runner.unified.collect import unified_cases

    good = {
        "description": "f",
        "schemaVersion": "1.0",
        "tests": [{"description": "same", "operations": []}, {"description": "same", "operations": []}],
    }
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "good.json").write_text(json.dumps(good), encoding="utf-8")
    (tmp_path / "sub" / "good.yml").write_text("ignored", encoding="utf-8")
    newer = {**good, "schemaVersion": "1.99", "tests": [{"description": "t", "operations": []}]}
    (tmp_path / "newer.json").write_text(json.dumps(newer), encoding="utf-8")
    (tmp_path / "other.json").write_text(json.dumps({"data": []}), encoding="utf-8")
    seen: list[str] = []

    async def run_one(context: RunContext, test_file: UnifiedTestFile, test: Any) -> None:
        seen.append(f"{test_file.path.name}:{test.description}")

    cases = list(unified_cases("suite", tmp_path, run_one))
    assert [(c.file, c.name) for c in cases] == [
        ("newer.json", "t"),
        ("sub/good.json", "same"),
        ("sub/good.json", "same [2]"),
    ]
    for case in cases[1:]:
        run_case_sync(case, RunContext())
    assert seen == ["good.json:same", "good.json:same"]
    with pytest.raises(UnifiedTestError, match=r"1\.99"):
        run_case_sync(cases[0], RunContext())
