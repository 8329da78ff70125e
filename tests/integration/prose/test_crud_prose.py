"""The CRUD specification's prose tests (crud/tests/README.md) against the test server.

Those needing ``maxWriteBatchSize + 1`` (100,001) operations per run (3, 5, 6) are covered by the batch
planning unit tests instead (tests/unit/operations/test_operations_client_bulk.py): against the test server
each would take about 16 seconds. Tests 10 and 13 were removed; 11 and 12 are unit tests.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.errors import WriteConcernError, WriteError
from mongio.events.command import (
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.operations import InsertOne, UpdateOne
from mongio.operations.client_bulk import ClientBulkWriteException
from mongio.options.write_concern import WriteConcern
from tests.support.loopback_peer import LoopbackPeer, Request
from tests.support.recorders import CommandRecorder


@pytest.fixture
async def recorded(server_uri: str) -> AsyncIterator[tuple[MongoClient, CommandRecorder]]:
    recorder = CommandRecorder()
    async with MongoClient(server_uri, event_listeners=[recorder]) as client:
        await client.drop_database("db")
        yield client, recorder
        await client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})
        await client.drop_database("db")


async def fail_once(client: MongoClient, data: dict[str, Any]) -> None:
    await client.admin.command({"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": data})


async def test_1_write_concern_error_details_expose_err_info(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, _ = recorded
    err_info = {"writeConcern": {"w": 2, "wtimeout": 0, "provenance": "clientSupplied"}}
    await fail_once(
        client,
        {
            "failCommands": ["insert"],
            "writeConcernError": {
                "code": 100,
                "codeName": "UnsatisfiableWriteConcern",
                "errmsg": "Not enough data-bearing nodes",
                "errInfo": err_info,
            },
        },
    )
    with pytest.raises(WriteConcernError) as raised:
        await client.db.coll.insert_one({"x": 1})
    assert raised.value.code == 100
    assert raised.value.details is not None and raised.value.details["errInfo"] == err_info


async def test_2_write_error_details_expose_err_info(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    await client.db.create_collection("test", validator={"x": {"$type": "string"}})
    with pytest.raises(WriteError) as raised:
        await client.db.test.insert_one({"x": 1})
    assert raised.value.code == 121  # DocumentValidationFailure
    details = raised.value.details
    assert details is not None and "errInfo" in details
    (reply,) = [event.reply for event in recorder.of(CommandSucceededEvent, "insert")]
    assert reply["writeErrors"][0]["errInfo"] == details["errInfo"]


async def test_4_client_bulk_write_splits_when_ops_exceed_max_message_size(
    recorded: tuple[MongoClient, CommandRecorder],
) -> None:
    client, recorder = recorded
    hello = await client.admin.command("hello")
    max_bson_size, max_message_size = hello["maxBsonObjectSize"], hello["maxMessageSizeBytes"]
    value = "b" * (max_bson_size - 500)
    count = max_message_size // max_bson_size + 1
    result = await client.bulk_write([InsertOne({"a": value}, namespace="db.coll") for _ in range(count)])
    assert result.inserted_count == count
    first, second = recorder.of(CommandStartedEvent, "bulkWrite")
    assert len(first.command["ops"]) == count - 1
    assert len(second.command["ops"]) == 1
    # One bulk write is one operation: every batch's events carry its operationId, which no other has.
    assert first.operation_id is not None and first.operation_id == second.operation_id
    await client.db.coll.insert_one({"after": 1})
    (insert,) = recorder.of(CommandStartedEvent, "insert")
    assert insert.operation_id != first.operation_id


async def test_4_collection_insert_many_batches_share_one_operation_id(
    recorded: tuple[MongoClient, CommandRecorder],
) -> None:
    # The same rule for a collection's bulk write, split into insert commands by maxMessageSizeBytes.
    client, recorder = recorded
    hello = await client.admin.command("hello")
    max_bson_size, max_message_size = hello["maxBsonObjectSize"], hello["maxMessageSizeBytes"]
    value = "b" * (max_bson_size - 500)
    count = max_message_size // max_bson_size + 1
    result = await client.db.coll.insert_many([{"a": value} for _ in range(count)])
    assert len(result.inserted_ids) == count
    first, second = recorder.of(CommandStartedEvent, "insert")
    assert len(first.command["documents"]) == count - 1
    assert len(second.command["documents"]) == 1
    assert first.operation_id is not None and first.operation_id == second.operation_id
    assert await client.db.coll.count_documents({}) == count
    (aggregate,) = recorder.of(CommandStartedEvent, "aggregate")
    assert aggregate.operation_id != first.operation_id


def _two_large_upserts(max_bson_size: int) -> list[UpdateOne]:
    return [
        UpdateOne({"_id": letter * (max_bson_size // 2)}, {"$set": {"x": 1}}, upsert=True, namespace="db.coll")
        for letter in ("a", "b")
    ]


async def test_7_client_bulk_write_reads_a_results_cursor_needing_get_more(
    recorded: tuple[MongoClient, CommandRecorder],
) -> None:
    client, recorder = recorded
    max_bson_size = (await client.admin.command("hello"))["maxBsonObjectSize"]
    result = await client.bulk_write(_two_large_upserts(max_bson_size), verbose_results=True)
    assert result.upserted_count == 2
    assert len(result.update_results) == 2
    assert len(recorder.of(CommandStartedEvent, "getMore")) == 1


async def test_8_client_bulk_write_reads_a_results_cursor_needing_get_more_in_a_transaction(
    recorded: tuple[MongoClient, CommandRecorder],
) -> None:
    client, recorder = recorded
    max_bson_size = (await client.admin.command("hello"))["maxBsonObjectSize"]
    async with client.start_session() as session, session.start_transaction():
        result = await client.bulk_write(_two_large_upserts(max_bson_size), session=session, verbose_results=True)
    assert result.upserted_count == 2
    assert len(result.update_results) == 2
    (get_more,) = recorder.of(CommandStartedEvent, "getMore")
    (bulk_write,) = recorder.of(CommandStartedEvent, "bulkWrite")
    assert get_more.command["lsid"] == bulk_write.command["lsid"]
    assert get_more.command["txnNumber"] == bulk_write.command["txnNumber"]
    assert await client.db.coll.count_documents({}) == 2


async def test_9_client_bulk_write_reports_a_get_more_error_with_the_partial_result(
    recorded: tuple[MongoClient, CommandRecorder],
) -> None:
    client, recorder = recorded
    max_bson_size = (await client.admin.command("hello"))["maxBsonObjectSize"]
    await fail_once(client, {"failCommands": ["getMore"], "errorCode": 8})
    with pytest.raises(ClientBulkWriteException) as raised:
        await client.bulk_write(_two_large_upserts(max_bson_size), verbose_results=True)
    error = raised.value
    assert error.error is not None and getattr(error.error, "code", None) == 8
    assert error.partial_result is not None
    assert error.partial_result.upserted_count == 2
    assert len(error.partial_result.update_results) == 1
    assert len(recorder.of(CommandStartedEvent, "getMore")) == 1
    assert len(recorder.of(CommandStartedEvent, "killCursors")) == 1


async def test_14_explain_takes_max_time_ms(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    collection = client["explain-test"].collection
    await collection.find({"name": "john doe"}).explain(max_time_ms=2000)
    (event,) = recorder.of(CommandStartedEvent, "explain")
    assert event.command["maxTimeMS"] == 2000
    assert event.command["explain"]["filter"] == {"name": "john doe"}


async def test_15_unacknowledged_client_bulk_write_sends_w0_on_every_batch(
    recorded: tuple[MongoClient, CommandRecorder],
) -> None:
    client, recorder = recorded
    hello = await client.admin.command("hello")
    max_bson_size, max_message_size = hello["maxBsonObjectSize"], hello["maxMessageSizeBytes"]
    # A database of its own: SecantusDB applies unacknowledged writes concurrently with the commands that
    # follow them on the connection (measured: a count right after the bulk write saw one of the three
    # documents), so the specification's closing count cannot tell when they are done, and a write still
    # running when the database is dropped recreates it under a name no other test uses.
    name = f"prose15_{uuid.uuid4().hex[:12]}"
    await client[name].create_collection("coll")
    per_batch = max_message_size // max_bson_size
    document = {"a": "b" * (max_bson_size - 500)}
    models = [InsertOne(document, namespace=f"{name}.coll") for _ in range(per_batch + 1)]
    result = await client.bulk_write(models, ordered=False, write_concern=WriteConcern(w=0))
    assert not result.acknowledged
    first, second = recorder.of(CommandStartedEvent, "bulkWrite")
    assert len(first.command["ops"]) == per_batch
    assert len(second.command["ops"]) == 1
    assert first.command["writeConcern"] == {"w": 0} == second.command["writeConcern"]
    assert first.operation_id is not None and first.operation_id == second.operation_id
    await client.drop_database(name)
    (drop,) = recorder.of(CommandStartedEvent, "dropDatabase")[-1:]
    assert drop.operation_id != first.operation_id


async def test_16_generated_ids_are_the_first_field_on_the_wire() -> None:
    # The wire message, as the loopback peer decodes it (command monitoring shows the caller's own document,
    # to which the generated _id was added last).
    async def handler(request: Request) -> Any:
        if request.command_name == "bulkWrite":
            summary = {"nErrors": 0, "nInserted": 1, "nUpserted": 0, "nMatched": 0, "nModified": 0, "nDeleted": 0}
            return {"ok": 1, "cursor": {"id": 0, "ns": "admin.$cmd.bulkWrite", "firstBatch": []}, **summary}
        if request.command_name == "insert":
            return {"ok": 1, "n": 1}
        return None

    async with LoopbackPeer(handler, max_wire_version=25) as peer:
        async with MongoClient(peer.uri, directConnection=True) as client:
            coll = client.db.coll
            await coll.insert_one({"x": 1})
            await client.bulk_write([InsertOne({"x": 1}, namespace="db.coll")])
            await coll.bulk_write([InsertOne({"x": 1})])
        inserts = [r for r in peer.requests if r.command_name == "insert"]
        (client_bulk,) = [r for r in peer.requests if r.command_name == "bulkWrite"]
        documents = [request.sequences["documents"][0] for request in inserts]
        documents.append(client_bulk.sequences["ops"][0]["document"])
        assert len(documents) == 3
        for document in documents:
            assert list(document) == ["_id", "x"]
