"""The sessions specification's prose tests that one replica-set member can run (sessions/tests/README.md),
plus causal consistency and snapshot-session behaviour seen through command monitoring."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import pytest

from mongio.bson import Timestamp
from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.errors import ConfigurationError, InvalidOperation
from mongio.operations import UpdateOne
from mongio.sessions.client_session import ClientSession
from mongio.topology.heartbeat_events import ServerHeartbeatListener, ServerHeartbeatSucceededEvent
from tests.support.backends import gather_outcomes
from tests.support.loopback_peer import LoopbackPeer, Request, default_reply
from tests.support.recorders import CommandRecorder


@pytest.fixture
async def client(server_uri: str, recorder: CommandRecorder) -> AsyncIterator[MongoClient]:
    async with MongoClient(server_uri, event_listeners=[recorder]) as client:
        await client.admin.command("ping")
        yield client


@pytest.fixture
async def coll(client: MongoClient, recorder: CommandRecorder) -> AsyncIterator[Collection[Any]]:
    name = f"sessions_{uuid.uuid4().hex[:12]}"
    collection = client[name].items
    yield collection
    await client.drop_database(name)


# 1. Setting both snapshot and causalConsistency to true is not allowed
async def test_snapshot_and_causal_consistency_conflict(client: MongoClient) -> None:
    with pytest.raises(InvalidOperation):
        client.start_session(snapshot=True, causal_consistency=True)


# 2. Pool is LIFO
async def test_server_session_pool_is_lifo(client: MongoClient) -> None:
    a = client.start_session()
    b = client.start_session()
    a_id, b_id = a.session_id, b.session_id
    assert a_id != b_id
    await a.end_session()
    await b.end_session()
    c = client.start_session()
    d = client.start_session()
    assert c.session_id == b_id
    assert d.session_id == a_id
    await c.end_session()
    await d.end_session()


# 3. $clusterTime in commands
@pytest.mark.parametrize("helper", ["ping", "aggregate", "find", "insert"])
async def test_cluster_time_gossiped(coll: Collection[Any], recorder: CommandRecorder, helper: str) -> None:
    async def run() -> None:
        if helper == "ping":
            await coll.database.client.admin.command("ping")
        elif helper == "aggregate":
            await coll.aggregate([]).to_list()
        elif helper == "find":
            await coll.find({}).to_list()
        else:
            await coll.insert_one({})

    recorder.clear()
    await run()
    first = recorder.started_events[-1]
    assert "$clusterTime" in first.command
    reply_time = recorder.succeeded_events[-1].reply["$clusterTime"]
    recorder.clear()
    await run()
    assert recorder.started_events[-1].command["$clusterTime"] == reply_time


# 4. Explicit and implicit session arguments
async def test_explicit_and_implicit_lsid(client: MongoClient, coll: Collection[Any], recorder: CommandRecorder) -> None:
    async with client.start_session() as session:
        calls: list[tuple[str, Callable[[ClientSession | None], Awaitable[Any]]]] = [
            ("insert", lambda s: coll.insert_one({"x": 1}, session=s)),
            ("find", lambda s: coll.find_one({}, session=s)),
            ("update", lambda s: coll.update_one({}, {"$set": {"y": 1}}, session=s)),
            ("aggregate", lambda s: coll.aggregate([], session=s).to_list()),
            ("delete", lambda s: coll.delete_many({}, session=s)),
            ("listCollections", lambda s: coll.database.list_collection_names(session=s)),
        ]
        for name, call in calls:
            recorder.clear()
            await call(session)
            assert recorder.commands(name)[-1]["lsid"] == session.session_id, name
            recorder.clear()
            await call(None)
            implicit = recorder.commands(name)[-1].get("lsid")
            assert implicit is not None and implicit != session.session_id, name


# 5. Session argument is for the right client
async def test_session_of_another_client(server_uri: str, coll: Collection[Any]) -> None:
    async with MongoClient(server_uri) as other:
        session = other.start_session()
        with pytest.raises(InvalidOperation, match="another client"):
            await coll.insert_one({}, session=session)
        with pytest.raises(InvalidOperation, match="another client"):
            await coll.find_one({}, session=session)
        await session.end_session()


# 6. No further operations after endSession (and after the async with block)
async def test_ended_session_refused(client: MongoClient, coll: Collection[Any]) -> None:
    session = client.start_session()
    await session.end_session()
    with pytest.raises(InvalidOperation, match="ended"):
        await coll.insert_one({}, session=session)
    async with client.start_session() as scoped:
        await coll.insert_one({}, session=scoped)
    assert scoped.has_ended
    with pytest.raises(InvalidOperation, match="ended"):
        await coll.find_one({}, session=scoped)
    with pytest.raises(InvalidOperation, match="ended"):
        scoped.start_transaction()


# 8. A cursor exhausted by its first batch gives its implicit session back at once
async def test_cursor_exhausted_on_first_batch_returns_session(coll: Collection[Any], recorder: CommandRecorder) -> None:
    await coll.insert_many([{"i": 1}, {"i": 2}])
    recorder.clear()
    cursor = coll.find({})
    await anext(cursor)
    find_lsid = recorder.commands("find")[-1]["lsid"]
    await coll.insert_one({"i": 3})
    assert recorder.commands("insert")[-1]["lsid"] == find_lsid
    await cursor.close()


# 9. A cursor exhausted by a getMore gives its implicit session back before the last document is read
async def test_cursor_exhausted_by_get_more_returns_session(coll: Collection[Any], recorder: CommandRecorder) -> None:
    await coll.insert_many([{"i": i} for i in range(5)])
    recorder.clear()
    cursor = coll.find({}, batch_size=3)
    for _ in range(4):
        await anext(cursor)
    assert recorder.commands("getMore"), "the fourth document needs a getMore"
    find_lsid = recorder.commands("find")[-1]["lsid"]
    await coll.insert_one({"i": 9})
    assert recorder.commands("insert")[-1]["lsid"] == find_lsid
    await cursor.close()


# 11. find and getMore send the same lsid
async def test_find_and_get_more_same_lsid(coll: Collection[Any], recorder: CommandRecorder) -> None:
    await coll.insert_many([{"i": i} for i in range(3)])
    recorder.clear()
    docs = await coll.find({}, batch_size=2).to_list()
    assert len(docs) == 3
    find_lsid = recorder.commands("find")[-1]["lsid"]
    assert find_lsid["id"]
    assert recorder.commands("getMore")[-1]["lsid"] == find_lsid


# 21. snapshotTime without snapshot is refused
async def test_snapshot_time_requires_snapshot(client: MongoClient) -> None:
    with pytest.raises(InvalidOperation):
        client.start_session(snapshot=False, snapshot_time=Timestamp(1, 0))


# 22 and 23. snapshotTime on a non-snapshot session raises; it is read-only
async def test_snapshot_time_getter(client: MongoClient) -> None:
    async with client.start_session() as session:
        with pytest.raises(InvalidOperation):
            _ = session.snapshot_time
        with pytest.raises(AttributeError):
            setattr(session, "snapshot_time", Timestamp(1, 0))  # noqa: B010
    async with client.start_session(snapshot=True, snapshot_time=Timestamp(5, 1)) as snap:
        assert snap.snapshot_time == Timestamp(5, 1)


# -- causal consistency (causal-consistency.md "Test Plan") and snapshot reads ----------------------------------


async def test_causal_consistency_after_cluster_time(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    async with client.start_session() as session:
        recorder.clear()
        await coll.find_one({}, session=session)
        first = recorder.commands("find")[-1]
        assert "readConcern" not in first  # the first read waits for nothing
        operation_time = session.operation_time
        assert operation_time is not None
        await coll.insert_one({"a": 1}, session=session)
        insert = recorder.commands("insert")[-1]
        assert insert["readConcern"] == {"afterClusterTime": operation_time}
        write_time = session.operation_time
        await coll.find_one({}, session=session)
        assert recorder.commands("find")[-1]["readConcern"] == {"afterClusterTime": write_time}
        # runCommand never gets a read concern added
        await coll.database.command("ping", session=session)
        assert "readConcern" not in recorder.commands("ping")[-1]


async def test_non_causal_session_sends_no_after_cluster_time(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    async with client.start_session(causal_consistency=False) as session:
        await coll.find_one({}, session=session)
        await coll.find_one({}, session=session)
        assert "readConcern" not in recorder.commands("find")[-1]


async def test_snapshot_session_read_concern(client: MongoClient, coll: Collection[Any], recorder: CommandRecorder) -> None:
    await coll.insert_one({"x": 1})
    async with client.start_session(snapshot=True) as session:
        recorder.clear()
        await coll.find({}, session=session).to_list()
        first = recorder.commands("find")[-1]
        assert first["readConcern"] == {"level": "snapshot"}
        snapshot_time = session.snapshot_time
        assert isinstance(snapshot_time, Timestamp)
        await coll.distinct("x", session=session)
        assert recorder.commands("distinct")[-1]["readConcern"] == {
            "level": "snapshot",
            "atClusterTime": snapshot_time,
        }
        with pytest.raises(InvalidOperation, match="snapshot sessions"):
            session.start_transaction()


# -- dirty sessions ---------------------------------------------------------------------------------------


async def test_cancelled_command_marks_the_session_dirty(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    """A command cut off by cancellation leaves the server session's state unknown, as a network error does:
    the session stays usable, and its server session is not pooled again."""
    await client.admin.command(
        {
            "configureFailPoint": "failCommand",
            "mode": {"times": 1},
            "data": {"failCommands": ["find"], "blockConnection": True, "blockTimeMS": 2000},
        }
    )
    try:
        session = client.start_session()
        lsid = session.session_id
        find_started = recorder.signal("find")
        async with anyio.create_task_group() as finding:
            finding.start_soon(partial(coll.find_one, {}, session=session))
            await find_started.wait()
            finding.cancel_scope.cancel()
        assert finding.cancel_scope.cancelled_caught
        assert session._server_session is not None and session._server_session.dirty
        await coll.insert_one({"after": 1}, session=session)
        assert recorder.commands("insert")[-1]["lsid"] == lsid
        await session.end_session()
        async with client.start_session() as fresh:
            assert fresh.session_id != lsid
    finally:
        await client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})


# 14. Implicit sessions only allocate their server session after a successful connection checkout
async def test_implicit_sessions_after_checkout(server_uri: str) -> None:
    counts: list[int] = []
    for _ in range(5):
        recorder = CommandRecorder()
        async with MongoClient(server_uri, maxPoolSize=1, retryWrites=True, event_listeners=[recorder]) as client:
            coll = client[f"sessions_{uuid.uuid4().hex[:12]}"].items
            outcomes = await gather_outcomes(
                coll.insert_one({}),
                coll.delete_one({}),
                coll.update_one({}, {"$set": {"a": 1}}),
                coll.bulk_write([UpdateOne({}, {"$set": {"a": 1}})]),
                coll.find_one_and_delete({}),
                coll.find_one_and_update({}, {"$set": {"a": 1}}),
                coll.find_one_and_replace({}, {"a": 1}),
                coll.find().to_list(),
            )
            assert not [outcome for outcome in outcomes if isinstance(outcome, Exception)], outcomes
            lsids = {event.command["lsid"]["id"] for event in recorder.started_events if "lsid" in event.command}
            counts.append(len(lsids))
            await coll.database.client.drop_database(coll.database.name)
    assert all(count < 8 for count in counts), counts
    assert 1 in counts, counts


# snapshot-sessions-not-supported-client-error.json needs a server before 5.0: a loopback peer plays one.
async def test_snapshot_reads_need_mongodb_5() -> None:
    async def handler(request: Request) -> Any:
        if request.command_name.lower() in ("hello", "ismaster"):
            return {**default_reply(request, peer), "logicalSessionTimeoutMinutes": 30}
        return None

    peer = LoopbackPeer(handler, max_wire_version=12)
    async with peer, MongoClient(f"mongodb://{peer.address[0]}:{peer.address[1]}/") as client:
        async with client.start_session(snapshot=True) as session:
            with pytest.raises(ConfigurationError, match=r"Snapshot reads require MongoDB 5\.0 or later"):
                await client.db.items.find_one({}, session=session)
            with pytest.raises(ConfigurationError, match=r"Snapshot reads require MongoDB 5\.0 or later"):
                await client.db.items.distinct("x", session=session)
        assert not [request for request in peer.requests if request.command_name in ("find", "distinct")]


class Heartbeats(ServerHeartbeatListener):
    def __init__(self) -> None:
        self._succeeded = anyio.Event()

    def succeeded(self, event: ServerHeartbeatSucceededEvent) -> None:
        self._succeeded.set()

    async def next_success(self) -> None:
        """Wait for the next heartbeat that succeeds."""
        self._succeeded = anyio.Event()
        await self._succeeded.wait()


# 20. Drivers do not gossip $clusterTime on SDAM commands
async def test_no_cluster_time_gossip_from_monitoring(server_uri: str) -> None:
    recorder = CommandRecorder()
    heartbeats = Heartbeats()
    async with (
        MongoClient(
            server_uri, directConnection=True, heartbeatFrequencyMS=500, event_listeners=[recorder, heartbeats]
        ) as c1,
        MongoClient(server_uri) as c2,
    ):
        reply = await c1.admin.command("ping")
        cluster_time = reply["$clusterTime"]
        await c2.test_gossip.items.insert_one({"advance": "$clusterTime"})
        # the monitor's next two replies carry the advanced cluster time; the client must not take it
        for _ in range(2):
            await heartbeats.next_success()
        recorder.clear()
        await c1.admin.command("ping")
        assert recorder.started_events[-1].command["$clusterTime"] == cluster_time
        await c2.drop_database("test_gossip")
