"""The entity map and the operation path: lookup, arguments, result and error checks, saved results."""

from __future__ import annotations

from typing import Any

import pytest
from spec_runner.unified.entities import EntityKind, EntityMap
from spec_runner.unified.errors import EntityError, MatchError, UnifiedTestError
from spec_runner.unified.loader import Operation
from spec_runner.unified.matcher import MISSING
from spec_runner.unified.operations import (
    OperationCall,
    OperationContext,
    OperationRegistry,
    ResultShape,
    UnsupportedOperation,
    execute,
)

from mongio.errors import OperationFailure

# --- entity map -------------------------------------------------------------------------------------------


def test_entities_by_name_and_kind() -> None:
    entities = EntityMap()
    client = object()
    entities.add("client0", EntityKind.CLIENT, client)
    assert entities.client("client0") is client
    assert entities.get("client0") is client
    assert entities.kind_of("client0") is EntityKind.CLIENT
    assert "client0" in entities and len(entities) == 1


def test_duplicate_names_are_refused() -> None:
    entities = EntityMap()
    entities.add("client0", EntityKind.CLIENT, object())
    with pytest.raises(EntityError, match="already exists"):
        entities.add("client0", EntityKind.SESSION, object())


def test_unknown_and_mistyped_names() -> None:
    entities = EntityMap()
    entities.add("client0", EntityKind.CLIENT, object())
    entities.add("session0", EntityKind.SESSION, object())
    with pytest.raises(EntityError, match="no entity named 'client1'"):
        entities.client("client1")
    with pytest.raises(EntityError, match="is a session, not a client"):
        entities.client("session0")
    with pytest.raises(EntityError, match="findCursor"):
        entities.cursor("client0")


def test_bson_entities_must_be_bson_values() -> None:
    entities = EntityMap()
    entities.add_bson("count", 3)
    entities.add_bson("doc", {"a": [1]})
    with pytest.raises(EntityError, match="not a BSON value"):
        entities.add_bson("thing", object())
    assert entities.bson_value("count") == 3


def test_lists_for_stored_events() -> None:
    entities = EntityMap()
    events = entities.new_list("events0")
    events.append({"name": "PoolCreatedEvent"})
    assert entities.bson_value("events0") == [{"name": "PoolCreatedEvent"}]


def test_session_lsid_is_kept_with_the_session() -> None:
    entities = EntityMap()
    entities.add_session("session0", object(), {"id": b"x"})
    entities.add("session1", EntityKind.SESSION, object())
    assert entities.session_lsid("session0") == {"id": b"x"}
    with pytest.raises(EntityError, match="without its lsid"):
        entities.session_lsid("session1")


def test_cleanup_views() -> None:
    entities = EntityMap()
    entities.add("s", EntityKind.SESSION, 1)
    entities.add("cursor", EntityKind.FIND_CURSOR, 2)
    entities.add("stream", EntityKind.CHANGE_STREAM, 3)
    assert [e.name for e in entities.of_kind(EntityKind.FIND_CURSOR, EntityKind.CHANGE_STREAM)] == [
        "cursor",
        "stream",
    ]
    assert entities.snapshot() == {"s": 1, "cursor": 2, "stream": 3}
    entities.clear()
    assert len(entities) == 0


# --- operations -------------------------------------------------------------------------------------------


class FakeCollection:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []


@pytest.fixture
def registry() -> OperationRegistry:
    registry = OperationRegistry()

    @registry.operation("insertOne", object="collection", required=("document",), optional=("session",))
    async def insert_one(call: OperationCall) -> Any:
        call.target.calls.append(("insertOne", call.arguments))
        return {"insertedId": call.arguments["document"]["_id"]}

    @registry.operation("find", object="collection", optional=("filter",), result=ResultShape.DOCUMENTS)
    async def find(call: OperationCall) -> Any:
        return [{"_id": 1, "x": 1}, {"_id": 2, "x": 2}]

    @registry.operation("distinct", object="collection", required=("fieldName",), result=ResultShape.VALUES)
    async def distinct(call: OperationCall) -> Any:
        return [{"a": 1, "b": 1}]

    @registry.operation(
        "createFindCursor", object="collection", any_arguments=True, saves_as=EntityKind.FIND_CURSOR
    )
    async def create_find_cursor(call: OperationCall) -> Any:
        return ["cursor", call.arguments]

    @registry.operation("fail", object=("collection", "database"))
    async def fail(call: OperationCall) -> Any:
        raise OperationFailure(
            "no such namespace", 26, {"ok": 0, "code": 26, "codeName": "NamespaceNotFound"}
        )

    @registry.operation(
        "bulkWrite",
        object="collection",
        error_result=lambda e: {"insertedCount": e.args[1]} if len(e.args) > 1 else MISSING,
    )
    async def bulk_write(call: OperationCall) -> Any:
        raise RuntimeError("write errors", 2)

    @registry.operation("assertTrue", object="testRunner", required=("value",))
    async def assert_true(call: OperationCall) -> Any:
        if call.arguments["value"] is not True:
            raise AssertionError("value is not true")
        return None

    return registry


@pytest.fixture
def context() -> OperationContext:
    entities = EntityMap()
    entities.add("collection0", EntityKind.COLLECTION, FakeCollection())
    entities.add("database0", EntityKind.DATABASE, object())
    entities.add_session("session0", "the-session", {"id": b"1"})
    return OperationContext(entities=entities)


def op(name: str, object: str = "collection0", **fields: Any) -> Operation:
    return Operation.parse({"name": name, "object": object, **fields})


async def test_operation_runs_on_its_entity_with_the_session_resolved(
    context: OperationContext, registry: OperationRegistry
) -> None:
    result = await execute(
        context,
        op(
            "insertOne",
            arguments={"document": {"_id": 1}, "session": "session0"},
            expectResult={"insertedId": 1},
        ),
        registry,
    )
    assert result == {"insertedId": 1}
    collection = context.entities.collection("collection0")
    assert collection.calls == [("insertOne", {"document": {"_id": 1}, "session": "the-session"})]


async def test_expect_result_mismatch_names_the_operation(
    context: OperationContext, registry: OperationRegistry
) -> None:
    with pytest.raises(MatchError) as info:
        await execute(
            context,
            op("insertOne", arguments={"document": {"_id": 1}}, expectResult={"insertedId": 2}),
            registry,
        )
    assert info.value.path == "insertOne.result.insertedId"


async def test_result_shapes(context: OperationContext, registry: OperationRegistry) -> None:
    await execute(context, op("find", expectResult=[{"_id": 1}, {"_id": 2}]), registry)
    with pytest.raises(MatchError):
        await execute(
            context, op("distinct", arguments={"fieldName": "a"}, expectResult=[{"a": 1}]), registry
        )


async def test_unknown_entity_operation_and_arguments(
    context: OperationContext, registry: OperationRegistry
) -> None:
    with pytest.raises(EntityError):
        await execute(context, op("insertOne", object="collection9", arguments={"document": {}}), registry)
    with pytest.raises(UnsupportedOperation, match="'find' on a database"):
        await execute(context, op("find", object="database0"), registry)
    with pytest.raises(UnifiedTestError, match="unsupported argument"):
        await execute(context, op("insertOne", arguments={"document": {"_id": 1}, "bogus": 1}), registry)
    with pytest.raises(UnifiedTestError, match="missing required"):
        await execute(context, op("insertOne", arguments={}), registry)
    with pytest.raises(EntityError, match="not a session"):
        await execute(
            context, op("insertOne", arguments={"document": {"_id": 1}, "session": "database0"}), registry
        )


async def test_expected_error(context: OperationContext, registry: OperationRegistry) -> None:
    result = await execute(context, op("fail", expectError={"errorCodeName": "NamespaceNotFound"}), registry)
    assert result is MISSING
    with pytest.raises(MatchError, match="errorCode"):
        await execute(context, op("fail", object="database0", expectError={"errorCode": 1}), registry)
    with pytest.raises(MatchError, match="succeeded"):
        await execute(context, op("find", expectError={"isError": True}), registry)


async def test_error_result_for_expect_result(context: OperationContext, registry: OperationRegistry) -> None:
    await execute(context, op("bulkWrite", expectError={"expectResult": {"insertedCount": 2}}), registry)
    with pytest.raises(MatchError, match=r"expectError\.expectResult\.insertedCount"):
        await execute(context, op("bulkWrite", expectError={"expectResult": {"insertedCount": 3}}), registry)


async def test_unexpected_error_fails_the_test(
    context: OperationContext, registry: OperationRegistry
) -> None:
    with pytest.raises(MatchError, match="unexpected error OperationFailure"):
        await execute(context, op("fail"), registry)


async def test_ignore_result_and_error(context: OperationContext, registry: OperationRegistry) -> None:
    await execute(context, op("fail", ignoreResultAndError=True), registry)


async def test_save_result_as_entity(context: OperationContext, registry: OperationRegistry) -> None:
    await execute(
        context, op("insertOne", arguments={"document": {"_id": 5}}, saveResultAsEntity="result0"), registry
    )
    assert context.entities.bson_value("result0") == {"insertedId": 5}
    await execute(
        context, op("createFindCursor", arguments={"filter": {}}, saveResultAsEntity="cursor0"), registry
    )
    assert context.entities.kind_of("cursor0") is EntityKind.FIND_CURSOR
    with pytest.raises(EntityError, match="already exists"):
        await execute(context, op("find", saveResultAsEntity="cursor0"), registry)


async def test_test_runner_operations(context: OperationContext, registry: OperationRegistry) -> None:
    await execute(context, op("assertTrue", object="testRunner", arguments={"value": True}), registry)
    with pytest.raises(AssertionError, match="not true"):
        await execute(context, op("assertTrue", object="testRunner", arguments={"value": False}), registry)


def test_registration_errors(registry: OperationRegistry) -> None:
    with pytest.raises(ValueError, match="already registered"):

        @registry.operation("find", object="collection")
        async def again(call: OperationCall) -> Any:
            return None

    with pytest.raises(ValueError, match="unknown object kind"):
        registry.operation("x", object="collectionz")
    assert registry.names("collection") == [
        "bulkWrite",
        "createFindCursor",
        "distinct",
        "fail",
        "find",
        "insertOne",
    ]
