"""MongoClient against the test server: starting lazily, closing, sessions, gossip, events and retries."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest
from spec_runner.task_census import running_tasks, tasks_started_since

from mongio.backend import gather
from mongio.bson.timestamp import Timestamp
from mongio.client import AsyncMongoClient, MongoClient
from mongio.collection import Collection
from mongio.database import Database
from mongio.errors import (
    ClientClosedError,
    DuplicateKeyError,
    InvalidOperation,
    OperationFailure,
)
from mongio.events.command import (
    CommandFailedEvent,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.operations.run_command import RunCommand
from tests.support.loop_checks import PoolEventCounts
from tests.support.recorders import CommandRecorder


@pytest.fixture
async def recorded(server_uri: str) -> AsyncIterator[tuple[MongoClient, CommandRecorder]]:
    recorder = CommandRecorder()
    async with MongoClient(server_uri, event_listeners=[recorder]) as client:
        yield client, recorder


async def fail_point(client: MongoClient, mode: Any, data: Mapping[str, Any]) -> None:
    await client._executor.execute(
        RunCommand("admin", {"configureFailPoint": "failCommand", "mode": mode, "data": dict(data)})
    )


async def fail_point_off(client: MongoClient) -> None:
    await fail_point(client, "off", {})


async def test_ping_in_async_with(server_uri: str) -> None:
    async with MongoClient(server_uri) as client:
        reply = await client.admin.command("ping")
        assert reply["ok"] == 1
        reply = await client._executor.execute(RunCommand("admin", "ping"))
        assert reply["ok"] == 1
    assert AsyncMongoClient is MongoClient


def test_client_made_before_any_loop_runs(server_uri: str) -> None:
    client = MongoClient(server_uri)  # no running loop here, as at module level

    async def main() -> float:
        try:
            reply = await client.admin.command("ping")
            return float(reply["ok"])
        finally:
            await client.close()

    assert asyncio.run(main()) == 1.0


async def test_close_stops_every_task_and_later_calls_raise(server_uri: str) -> None:
    before = running_tasks()
    client = MongoClient(server_uri)
    await client.admin.command("ping")
    assert client._topology is not None
    started_tasks = client._topology.tasks()
    assert started_tasks  # the monitor, at least
    await client.close()
    assert all(task.done() for task in started_tasks)
    assert tasks_started_since(before) == []
    with pytest.raises(ClientClosedError, match="MongoClient"):
        await client.admin.command("ping")
    with pytest.raises(ClientClosedError):
        client.start_session()
    await client.close()  # twice is harmless


async def test_close_without_await_closes_in_the_background_as_motor_s_does(server_uri: str) -> None:
    before = running_tasks()
    client = MongoClient(server_uri)
    await client.admin.command("ping")
    assert client._topology is not None
    started_tasks = client._topology.tasks()
    closing = client.close()  # Motor's idiom: a plain call, never awaited here
    assert client.close() is closing  # a second call is the same closing
    await gather(*started_tasks)  # the monitors stop without an await of the closing
    with pytest.raises(ClientClosedError):
        await client.admin.command("ping")
    await closing  # PyMongo's idiom still works on it, after the fact
    assert tasks_started_since(before) == []


async def test_close_of_a_client_never_used() -> None:
    client = MongoClient("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100")
    await client.close()
    with pytest.raises(ClientClosedError):
        await client.admin.command("ping")


async def test_command_events_have_the_right_fields(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    await client.admin.command("ping")
    started = recorder.of(CommandStartedEvent, "ping")
    succeeded = recorder.of(CommandSucceededEvent, "ping")
    assert len(started) == len(succeeded) == 1
    s, ok = started[0], succeeded[0]
    assert s.command["ping"] == 1 and s.command["$db"] == "admin"
    assert s.database_name == "admin" == ok.database_name
    assert s.request_id == ok.request_id and s.request_id > 0
    assert s.operation_id == ok.operation_id
    assert s.connection_id == ok.connection_id == client.address
    assert s.server_connection_id is not None and s.server_connection_id == ok.server_connection_id
    assert ok.reply["ok"] == 1
    assert ok.duration_micros >= 0

    with pytest.raises(OperationFailure) as info:
        await client.admin.command({"noSuchCommandHere": 1})
    failed = recorder.of(CommandFailedEvent, "noSuchCommandHere")
    assert len(failed) == 1
    assert failed[0].failure.get("code") == info.value.code
    assert failed[0].operation_id != s.operation_id


async def test_sensitive_commands_are_redacted(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    try:
        await client.admin.command({"createUser": "redacted_user", "pwd": "hunter2", "roles": []})
    except OperationFailure:
        pass  # a server without user management still shows the redacted started event
    started = recorder.of(CommandStartedEvent, "createUser")
    assert started and started[0].command == {}
    for succeeded in recorder.of(CommandSucceededEvent, "createUser"):
        assert succeeded.reply == {}
    for failed in recorder.of(CommandFailedEvent, "createUser"):
        assert failed.failure == {}
    try:
        await client.admin.command({"dropUser": "redacted_user"})
    except OperationFailure:
        pass

    speculative = {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": b"n,,n=u,r=abc", "db": "admin"}
    try:
        await client.admin.command({"hello": 1, "speculativeAuthenticate": speculative})
    except OperationFailure:
        pass
    await client.admin.command({"hello": 1})
    hellos = recorder.of(CommandStartedEvent, "hello")
    assert hellos[0].command == {} and hellos[1].command["hello"] == 1
    replies = recorder.of(CommandSucceededEvent, "hello") + recorder.of(CommandFailedEvent, "hello")
    redacted = [e for e in replies if e.request_id == hellos[0].request_id]
    assert redacted and all(getattr(e, "reply", getattr(e, "failure", None)) == {} for e in redacted)
    plain = [e for e in recorder.of(CommandSucceededEvent, "hello") if e.request_id == hellos[1].request_id]
    assert plain[0].reply["ok"] == 1


async def test_implicit_session_sends_lsid_and_returns_it(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    pool = client._executor.session_pool
    await client.admin.command("ping")
    await client.admin.command("ping")
    pings = recorder.of(CommandStartedEvent, "ping")
    assert "lsid" in pings[0].command and "lsid" in pings[1].command
    assert pings[0].command["lsid"] == pings[1].command["lsid"]  # the pooled session was reused
    assert len(pool) == 1


async def test_cluster_time_is_gossiped(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    await client.admin.command("ping")
    first_reply = recorder.of(CommandSucceededEvent, "ping")[0].reply
    await client.admin.command("ping")
    second = recorder.of(CommandStartedEvent, "ping")[1]
    assert "$clusterTime" in first_reply
    sent = second.command["$clusterTime"]
    assert sent["clusterTime"] >= first_reply["$clusterTime"]["clusterTime"]
    assert client._executor.cluster_clock.cluster_time is not None


async def test_explicit_session_causal_reads(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    coll = client.test_client_causal.items
    async with client.start_session() as session:
        await coll.insert_one({"x": 1}, session=session)
        after_insert = session.operation_time
        assert isinstance(after_insert, Timestamp)
        await coll.find_one({"x": 1}, session=session)
        find = recorder.of(CommandStartedEvent, "find")[-1]
        # The read waits for the insert's operationTime. The find's own reply may carry a later one, which the
        # session then keeps (measured under load: in one run of six the find's operationTime was one tick
        # past the insert's), so the sent value is compared with the insert's, not with the session's after.
        assert find.command["readConcern"]["afterClusterTime"] == after_insert
        assert session.operation_time is not None and session.operation_time >= after_insert
        insert = recorder.of(CommandStartedEvent, "insert")[-1]
        assert find.command["lsid"] == insert.command["lsid"] == session.session_id
    assert session.has_ended
    with pytest.raises(InvalidOperation, match="ended"):
        await coll.find_one({}, session=session)
    await coll.drop()


async def test_session_of_another_client_is_refused(server_uri: str) -> None:
    async with MongoClient(server_uri) as one, MongoClient(server_uri) as other:
        session = one.start_session()
        try:
            with pytest.raises(InvalidOperation, match="another client"):
                await other.admin.command("ping", session=session)
        finally:
            await session.end_session()


async def test_retryable_write_after_closed_connection(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    coll = client.test_client_retry.items
    await coll.drop()
    await fail_point(client, {"times": 1}, {"failCommands": ["insert"], "closeConnection": True})
    try:
        result = await coll.insert_one({"_id": 1})
    finally:
        await fail_point_off(client)
    assert result.inserted_id == 1
    inserts = recorder.of(CommandStartedEvent, "insert")
    assert len(inserts) == 2
    assert inserts[0].command["txnNumber"] == inserts[1].command["txnNumber"]
    assert inserts[0].command["lsid"] == inserts[1].command["lsid"]
    assert len(recorder.of(CommandFailedEvent, "insert")) == 1
    assert await coll.count_documents({}) == 1
    await coll.drop()


async def test_retryable_write_after_retryable_error_code(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    coll = client.test_client_retry_code.items
    await coll.drop()
    await fail_point(
        client,
        {"times": 1},
        {"failCommands": ["insert"], "errorCode": 91, "errorLabels": ["RetryableWriteError"]},
    )
    try:
        await coll.insert_one({"_id": 1})
    finally:
        await fail_point_off(client)
    inserts = recorder.of(CommandStartedEvent, "insert")
    assert len(inserts) == 2
    failed = recorder.of(CommandFailedEvent, "insert")
    assert len(failed) == 1 and failed[0].failure["code"] == 91
    assert await coll.count_documents({}) == 1
    await coll.drop()


async def test_non_retryable_errors_raise_the_right_class(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    coll = client.test_client_errors.items
    await coll.drop()
    await coll.insert_one({"_id": 1})
    recorder.clear()
    with pytest.raises(DuplicateKeyError):
        await coll.insert_one({"_id": 1})
    assert len(recorder.of(CommandStartedEvent, "insert")) == 1  # not retried

    await fail_point(client, {"times": 1}, {"failCommands": ["find"], "errorCode": 2})
    try:
        with pytest.raises(OperationFailure) as info:
            await coll.find_one({})
    finally:
        await fail_point_off(client)
    assert info.value.code == 2
    assert len(recorder.of(CommandStartedEvent, "find")) == 1
    await coll.drop()


async def test_no_task_per_operation(server_uri: str) -> None:
    async with MongoClient(server_uri) as client:
        await client.admin.command("ping")
        before = len(running_tasks())
        most = before
        for _ in range(1000):
            await client.admin.command("ping")
            most = max(most, len(running_tasks()))
        assert most == before
        assert len(running_tasks()) == before


async def test_client_helpers(server_uri: str) -> None:
    async with MongoClient(server_uri) as client:
        await client.test_client_helpers.items.insert_one({"x": 1})
        assert "test_client_helpers" in await client.list_database_names()
        cursor = await client.list_databases()
        names = [doc["name"] async for doc in cursor]
        assert "test_client_helpers" in names
        info = await client.server_info()
        assert "version" in info
        assert client.address is not None and client.is_primary
        await client.drop_database("test_client_helpers")
        assert "test_client_helpers" not in await client.list_database_names()
        assert client["x"].name == client.get_database("x").name == "x"


async def test_list_database_and_collection_objects(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    await client.test_list_objects.items.insert_one({"x": 1})
    await client.test_list_objects.create_collection("logs", capped=True, size=4096)
    try:
        databases = [db async for db in client.list_database_objects(filter={"name": "test_list_objects"})]
        assert [type(db) for db in databases] == [Database]
        assert databases[0].name == "test_list_objects"
        assert databases[0].write_concern == client.write_concern
        assert recorder.of(CommandStartedEvent, "listDatabases")[-1].command["nameOnly"] is True
        everything = await client.list_database_objects().to_list()
        assert "test_list_objects" in [db.name for db in everything]

        collections = await databases[0].list_collection_objects().to_list()
        assert sorted(c.full_name for c in collections) == ["test_list_objects.items", "test_list_objects.logs"]
        assert all(isinstance(c, Collection) for c in collections)
        capped = await databases[0].list_collection_objects(filter={"options.capped": True}).to_list()
        assert [c.name for c in capped] == ["logs"]
        assert await capped[0].find_one({}) is None
        assert "nameOnly" not in recorder.of(CommandStartedEvent, "listCollections")[-1].command
    finally:
        await client.drop_database("test_list_objects")


async def test_close_ends_the_pooled_server_sessions(server_uri: str) -> None:
    recorder = CommandRecorder()
    client = MongoClient(server_uri, event_listeners=[recorder])
    await client.admin.command("ping")
    lsid = recorder.of(CommandStartedEvent, "ping")[0].command["lsid"]
    await client.close()
    (end,) = recorder.of(CommandStartedEvent, "endSessions")
    assert end.command["endSessions"] == [lsid]
    assert "lsid" not in end.command
    assert len(recorder.of(CommandSucceededEvent, "endSessions")) == 1


async def test_cancelling_a_wait_for_close_does_not_cancel_the_closing(server_uri: str) -> None:
    """A cancelled wait for ``client.close()`` (``asyncio.wait_for`` timing out, anyio's ``move_on_after``
    expiring, a request cancelled) cancels the wait, not the closing: the closing goes on, and awaiting
    close() again waits for it to end with everything closed."""
    pools = PoolEventCounts()
    commands = CommandRecorder()
    client = MongoClient(server_uri, event_listeners=[pools, commands])
    await client.admin.command("ping")
    with anyio.CancelScope() as waiting:
        closing = client.close()
        waiting.cancel()  # the wait below is cut where it begins
        await closing
    assert waiting.cancelled_caught
    await client.close()
    assert pools.count("ConnectionCreatedEvent") == pools.count("ConnectionClosedEvent") > 0
    assert pools.count("PoolClosedEvent") == pools.count("PoolCreatedEvent") == 1
    assert len(commands.of(CommandSucceededEvent, "endSessions")) == 1


async def test_client_bulk_write_over_two_namespaces(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    from mongio.operations import ClientBulkWriteException, DeleteOne, InsertOne, UpdateOne

    client, recorder = recorded
    await client.drop_database("test_client_bulk")
    models = [
        InsertOne({"_id": 1}, namespace="test_client_bulk.a"),
        InsertOne({"_id": 2}, namespace="test_client_bulk.b"),
        UpdateOne({"_id": 1}, {"$set": {"x": 1}}, namespace="test_client_bulk.a"),
        DeleteOne({"_id": 2}, namespace="test_client_bulk.b"),
    ]
    result = await client.bulk_write(models, verbose_results=True)
    assert (result.inserted_count, result.modified_count, result.deleted_count) == (2, 1, 1)
    (command,) = recorder.of(CommandStartedEvent, "bulkWrite")
    assert command.database_name == "admin" and "lsid" in command.command and "txnNumber" in command.command
    with pytest.raises(ClientBulkWriteException) as info:
        await client.bulk_write([InsertOne({"_id": 1}, namespace="test_client_bulk.a")])
    assert info.value.write_errors[0]["code"] == 11000
    assert len(client._executor.session_pool) == 1  # the bulk write's implicit session went back
    await client.drop_database("test_client_bulk")


async def test_retryable_read_after_closed_connection(recorded: tuple[MongoClient, CommandRecorder]) -> None:
    client, recorder = recorded
    coll = client.test_client_retry_read.items
    await coll.insert_one({"_id": 1})
    await fail_point(client, {"times": 1}, {"failCommands": ["find"], "closeConnection": True})
    try:
        document = await coll.find_one({})
    finally:
        await fail_point_off(client)
    assert document == {"_id": 1}
    assert len(recorder.of(CommandStartedEvent, "find")) == 2
    assert len(recorder.of(CommandFailedEvent, "find")) == 1
    await client.drop_database("test_client_retry_read")


async def test_retry_reads_off_raises_the_network_error(server_uri: str) -> None:
    from mongio.errors import AutoReconnect

    async with MongoClient(server_uri, retryReads=False) as client:
        await fail_point(client, {"times": 1}, {"failCommands": ["find"], "closeConnection": True})
        try:
            with pytest.raises(AutoReconnect):
                await client.test_client_retry_off.items.find_one({})
        finally:
            await fail_point_off(client)


def test_state_before_first_use() -> None:
    client = MongoClient("mongodb://127.0.0.1:27999/shop?replicaSet=rs")
    assert client.topology_description.topology_type_name == "ReplicaSetNoPrimary"
    assert client.address.value is None and client.primary.value is None and not client.is_primary
    assert client.get_default_database().name == "shop"
    assert client.get_database().name == "shop"
    assert client.get_default_database("other").name == "shop"
    assert MongoClient("mongodb://127.0.0.1:27999").get_default_database("other").name == "other"
    with pytest.raises(AttributeError):
        _ = client._no_such_private_thing
