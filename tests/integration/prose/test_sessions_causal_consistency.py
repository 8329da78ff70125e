"""The causal-consistency specification's test plan (causal-consistency.md, "Test Plan") against the test server:
the replica-set member for the cases that need cluster times, a standalone for those that need none."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from spec_runner.server import TestServer, external_uri

from mongio.bson.timestamp import Timestamp
from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.errors import DuplicateKeyError
from mongio.options.read_concern import ReadConcern
from mongio.sessions.client_session import ClientSession
from tests.support.recorders import CommandRecorder

Step = Callable[[Collection[Any], ClientSession], Awaitable[Any]]


@pytest.fixture
async def coll(server_uri: str, recorder: CommandRecorder) -> AsyncIterator[Collection[Any]]:
    async with MongoClient(server_uri, event_listeners=[recorder]) as client:
        name = f"causal_{uuid.uuid4().hex[:12]}"
        collection = client[name].items
        await collection.insert_one({"_id": 0, "x": 0})
        yield collection
        await client.drop_database(name)


READS: dict[str, Step] = {
    "find": lambda c, s: c.find({}, session=s).to_list(),
    "find_one": lambda c, s: c.find_one({}, session=s),
    "aggregate": lambda c, s: c.aggregate([{"$match": {}}], session=s).to_list(),
    "count_documents": lambda c, s: c.count_documents({}, session=s),
    "distinct": lambda c, s: c.distinct("x", session=s),
}

WRITES: dict[str, Step] = {
    "insert_one": lambda c, s: c.insert_one({"x": 1}, session=s),
    "insert_many": lambda c, s: c.insert_many([{"x": 2}, {"x": 3}], session=s),
    "update_one": lambda c, s: c.update_one({"_id": 0}, {"$inc": {"x": 1}}, session=s),
    "update_many": lambda c, s: c.update_many({}, {"$inc": {"x": 1}}, session=s),
    "replace_one": lambda c, s: c.replace_one({"_id": 0}, {"x": 5}, session=s),
    "delete_one": lambda c, s: c.delete_one({"x": -1}, session=s),
    "delete_many": lambda c, s: c.delete_many({"x": -1}, session=s),
    "find_one_and_update": lambda c, s: c.find_one_and_update({"_id": 0}, {"$set": {"y": 1}}, session=s),
    "find_one_and_delete": lambda c, s: c.find_one_and_delete({"x": -1}, session=s),
    "create_index": lambda c, s: c.create_index("x", session=s),
}


def started_with(recorder: CommandRecorder, name: str) -> dict[str, Any]:
    return dict([event for event in recorder.started_events if event.command_name == name][-1].command)


# 1.
async def test_new_session_has_no_operation_time(coll: Collection[Any]) -> None:
    async with coll.database.client.start_session() as session:
        assert session.operation_time is None


# 2.
@pytest.mark.parametrize("read", sorted(READS))
async def test_first_read_sends_no_after_cluster_time(coll: Collection[Any], recorder: CommandRecorder, read: str) -> None:
    async with coll.database.client.start_session(causal_consistency=True) as session:
        await READS[read](coll, session)
        assert "readConcern" not in recorder.last()


# 3.
async def test_first_operation_sets_operation_time_even_on_error(coll: Collection[Any], recorder: CommandRecorder) -> None:
    client = coll.database.client
    async with client.start_session() as session:
        await coll.find_one({}, session=session)
        assert session.operation_time == recorder.replies()[-1]["operationTime"]
    async with client.start_session() as failing:
        with pytest.raises(DuplicateKeyError):
            await coll.insert_one({"_id": 0}, session=failing)
        assert failing.operation_time is not None


# 4.
@pytest.mark.parametrize("read", sorted(READS))
async def test_read_after_read_waits_for_it(coll: Collection[Any], recorder: CommandRecorder, read: str) -> None:
    async with coll.database.client.start_session(causal_consistency=True) as session:
        await coll.find_one({}, session=session)
        operation_time = session.operation_time
        await READS[read](coll, session)
        assert recorder.last()["readConcern"] == {"afterClusterTime": operation_time}


# 5.
@pytest.mark.parametrize("write", sorted(WRITES))
async def test_read_after_write_waits_for_it(coll: Collection[Any], recorder: CommandRecorder, write: str) -> None:
    async with coll.database.client.start_session(causal_consistency=True) as session:
        await WRITES[write](coll, session)
        operation_time = session.operation_time
        assert operation_time is not None
        await coll.find_one({}, session=session)
        assert started_with(recorder, "find")["readConcern"] == {"afterClusterTime": operation_time}


async def test_read_after_failed_write_waits_for_it(coll: Collection[Any], recorder: CommandRecorder) -> None:
    async with coll.database.client.start_session(causal_consistency=True) as session:
        with pytest.raises(DuplicateKeyError):
            await coll.insert_one({"_id": 0}, session=session)
        operation_time = session.operation_time
        await coll.find_one({}, session=session)
        assert started_with(recorder, "find")["readConcern"] == {"afterClusterTime": operation_time}


# 6.
async def test_not_causally_consistent(coll: Collection[Any], recorder: CommandRecorder) -> None:
    async with coll.database.client.start_session(causal_consistency=False) as session:
        await coll.find_one({}, session=session)
        await coll.find_one({}, session=session)
        assert "readConcern" not in recorder.last()


# 8 and 9.
@pytest.mark.parametrize("level", [None, "local", "majority"])
async def test_read_concern_merged_with_after_cluster_time(
    coll: Collection[Any], recorder: CommandRecorder, level: str | None
) -> None:
    configured = coll.with_options(read_concern=ReadConcern(level))
    async with coll.database.client.start_session(causal_consistency=True) as session:
        await configured.find_one({}, session=session)
        operation_time = session.operation_time
        await configured.find_one({}, session=session)
        expected: dict[str, Any] = {"afterClusterTime": operation_time}
        if level is not None:
            expected["level"] = level
        assert recorder.last()["readConcern"] == expected


# 12.
async def test_cluster_time_sent(coll: Collection[Any], recorder: CommandRecorder) -> None:
    await coll.find_one({})
    assert "$clusterTime" in recorder.last()


# 7 and 11: a deployment without cluster times.


@pytest.fixture(scope="module")
def standalone_uri() -> Iterator[str]:
    if external_uri() is not None:
        pytest.skip("the standalone cases start their own SecantusDB with --standalone")
    with TestServer("--standalone") as server:
        yield server.uri


async def test_standalone_without_cluster_times(standalone_uri: str) -> None:
    recorder = CommandRecorder()
    async with MongoClient(standalone_uri, event_listeners=[recorder]) as client:
        hello = await client.admin.command("hello")
        if "$clusterTime" in hello or "operationTime" in hello:
            pytest.skip("this standalone reports cluster times")
        coll = client.causal_standalone.items
        await coll.find_one({})
        assert "$clusterTime" not in recorder.last()
        async with client.start_session(causal_consistency=True) as session:
            await coll.find_one({}, session=session)
            await coll.find_one({}, session=session)
            assert "readConcern" not in recorder.last()
        await client.drop_database("causal_standalone")


async def test_standalone_never_gets_after_cluster_time(standalone_uri: str) -> None:
    """Causal consistency spec, Causally consistent read and write commands: afterClusterTime "MUST NOT be sent
    when connected to a deployment that does not support cluster times", even when the application gave the
    session an operation time (advance_operation_time) to wait for."""
    recorder = CommandRecorder()
    async with MongoClient(standalone_uri, event_listeners=[recorder]) as client:
        hello = await client.admin.command("hello")
        if "$clusterTime" in hello or "operationTime" in hello:
            pytest.skip("this standalone reports cluster times")
        coll = client.causal_standalone_advanced.items
        async with client.start_session(causal_consistency=True) as session:
            session.advance_operation_time(Timestamp(1, 1))
            await coll.insert_one({"_id": 1}, session=session)
            assert "readConcern" not in recorder.last()
            await coll.find_one({}, session=session)
            assert "readConcern" not in recorder.last()
        await client.drop_database("causal_standalone_advanced")
