"""The API layer against the test server: CRUD, cursors over several batches, aggregation, indexes and
collection management, each through MongoClient -> executor -> server."""

from __future__ import annotations

import gc
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from mongio.bson import Int64, decode_all
from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.cursor import CommandCursor, Cursor, CursorType, RawBatchCursor
from mongio.database import Database
from mongio.errors import BulkWriteError, CollectionInvalid, DuplicateKeyError, OperationFailure
from mongio.events.command import CommandListener, CommandStartedEvent, CommandSucceededEvent
from mongio.operations import DeleteMany, IndexModel, InsertOne, ReturnDocument, UpdateOne
from mongio.options.write_concern import WriteConcern


@pytest.fixture
def coll(db: Database[Any]) -> Collection[Any]:
    """``items`` in the test's database, not created: the first write creates it."""
    return db.items


async def test_insert_find_update_delete(coll: Collection[Any]) -> None:
    inserted = await coll.insert_one({"name": "a", "n": 1})
    assert inserted.acknowledged
    many = await coll.insert_many([{"name": "b", "n": 2}, {"name": "c", "n": 3}])
    assert len(many.inserted_ids) == 2
    doc = await coll.find_one(inserted.inserted_id)
    assert doc is not None and doc["name"] == "a"
    updated = await coll.update_one({"name": "a"}, {"$inc": {"n": 10}})
    assert (updated.matched_count, updated.modified_count) == (1, 1)
    upserted = await coll.update_one({"name": "z"}, {"$set": {"n": 0}}, upsert=True)
    assert upserted.upserted_id is not None
    replaced = await coll.replace_one({"name": "b"}, {"name": "b", "n": 20})
    assert replaced.modified_count == 1
    all_updated = await coll.update_many({"n": {"$gte": 10}}, {"$set": {"big": True}})
    assert all_updated.modified_count == 2
    assert await coll.count_documents({"big": True}) == 2
    assert await coll.estimated_document_count() == 4
    assert sorted(await coll.distinct("name")) == ["a", "b", "c", "z"]
    assert (await coll.delete_one({"name": "z"})).deleted_count == 1
    assert (await coll.delete_many({"big": True})).deleted_count == 2
    assert [d["name"] async for d in coll.find({}, {"_id": 0})] == ["c"]


async def test_duplicate_key_errors(coll: Collection[Any]) -> None:
    await coll.insert_one({"_id": 1})
    with pytest.raises(DuplicateKeyError):
        await coll.insert_one({"_id": 1})
    with pytest.raises(BulkWriteError) as info:
        await coll.insert_many([{"_id": 2}, {"_id": 1}, {"_id": 3}], ordered=False)
    assert info.value.details is not None
    assert info.value.details["nInserted"] == 2
    assert [error["index"] for error in info.value.details["writeErrors"]] == [1]


async def test_cursor_batches_getmore_and_exhaustion(client: MongoClient, coll: Collection[Any]) -> None:
    await coll.insert_many([{"_id": i} for i in range(25)])
    cursor = coll.find({}, batch_size=4).sort("_id", -1)
    first = await cursor
    assert first is cursor
    assert cursor.cursor_id
    assert cursor.address == client.address
    docs = await cursor.to_list()
    assert [d["_id"] for d in docs] == list(range(24, -1, -1))
    assert cursor.cursor_id == 0
    assert not cursor.alive
    assert len(await coll.find(limit=7, batch_size=3).to_list()) == 7
    assert len(await coll.find(skip=20).to_list()) == 5
    assert len(await coll.find().limit(-3).to_list()) == 3


async def test_closing_a_cursor_kills_it_on_the_server(db: Database[Any], coll: Collection[Any]) -> None:
    await coll.insert_many([{"_id": i} for i in range(10)])
    cursor = await coll.find(batch_size=2)
    cursor_id = cursor.cursor_id
    assert cursor_id
    await cursor.close()
    assert not cursor.alive
    # the server no longer knows the cursor
    with pytest.raises(OperationFailure) as info:
        await db.command({"getMore": cursor_id, "collection": coll.name})
    assert info.value.code == 43


async def test_async_with_and_find_one_leave_no_open_cursor(db: Database[Any], coll: Collection[Any]) -> None:
    await coll.insert_many([{"_id": i} for i in range(10)])
    async with coll.find(batch_size=3) as cursor:
        await cursor.next()
        cursor_id = cursor.cursor_id
    with pytest.raises(OperationFailure):
        await db.command({"getMore": cursor_id, "collection": coll.name})
    assert await coll.find_one({"_id": 4}) == {"_id": 4}


class _Started(CommandListener):
    """Every command started, in order."""

    def __init__(self) -> None:
        self.events: list[CommandStartedEvent] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.events.append(event)


@pytest.mark.parametrize("options", [{}, {"skip": 0}], ids=["find_one options", "cursor options"])
async def test_find_one_sends_one_find_and_gives_its_session_back(
    server_uri: str, db: Database[Any], options: dict[str, Any]
) -> None:
    await db.items.insert_many([{"_id": i} for i in range(3)])
    listener = _Started()
    async with MongoClient(server_uri, event_listeners=[listener]) as client:
        coll = client[db.name].items
        listener.events.clear()
        assert await coll.find_one({"_id": 1}, **options) == {"_id": 1}
        assert await coll.find_one({"_id": 2}, **options) == {"_id": 2}
        first, second = listener.events
        assert first.command_name == second.command_name == "find"
        assert first.command["singleBatch"] is True
        # The implicit session ended with the first find_one: the second takes its server session again.
        assert first.command["lsid"] == second.command["lsid"]
        async with client.start_session() as session:
            assert await coll.find_one({"_id": 0}, session=session, **options) == {"_id": 0}
            assert listener.events[-1].command["lsid"] == session.session_id
            assert not session.has_ended
            assert await coll.find_one({"_id": 1}, session=session) == {"_id": 1}


async def test_abandoned_cursor_gives_back_its_session(client: MongoClient, coll: Collection[Any]) -> None:
    await coll.insert_many([{"_id": i} for i in range(10)])
    cursor = await coll.find(batch_size=2)
    session = cursor._session
    assert session is not None and not session.has_ended
    del cursor
    gc.collect()
    assert session.has_ended


class _KillCursorsWatcher(CommandListener):
    """Tells when a killCursors command has succeeded, and which cursor ids it killed."""

    def __init__(self) -> None:
        self.killed: list[int] = []
        self.done = anyio.Event()

    def succeeded(self, event: CommandSucceededEvent) -> None:
        if event.command_name == "killCursors":
            self.killed.extend(int(i) for i in event.reply.get("cursorsKilled", ()))
            self.done.set()


async def test_abandoned_cursor_is_killed_on_the_server(server_uri: str, db: Database[Any]) -> None:
    await db.items.insert_many([{"_id": i} for i in range(10)])
    watcher = _KillCursorsWatcher()
    async with MongoClient(server_uri, event_listeners=[watcher]) as client:
        coll = client[db.name].items
        cursor = await coll.find(batch_size=2)
        cursor_id = cursor.cursor_id
        assert cursor_id
        del cursor
        gc.collect()
        # The finalizer queued it; the client's reaper task sends killCursors on its own.
        with anyio.fail_after(10):
            await watcher.done.wait()
        assert watcher.killed == [cursor_id]
        with pytest.raises(OperationFailure) as raised:
            await db.command("getMore", Int64(cursor_id), collection="items")
        assert raised.value.code == 43  # CursorNotFound


async def test_a_cursor_cancelled_mid_get_more_is_killed_on_the_server(
    server_uri: str, client: MongoClient, db: Database[Any]
) -> None:
    await db.items.insert_many([{"_id": i} for i in range(10)])
    watcher = _KillCursorsWatcher()
    get_more_sent = anyio.Event()

    class GetMoreSent(CommandListener):
        def started(self, event: CommandStartedEvent) -> None:
            if event.command_name == "getMore":
                get_more_sent.set()

    listeners = [watcher, GetMoreSent()]
    async with MongoClient(server_uri, event_listeners=listeners, appname="cancelled-get-more") as other:
        cursor = await other[db.name].items.find(batch_size=2)
        cursor_id = cursor.cursor_id
        data = {
            "failCommands": ["getMore"],
            "blockConnection": True,
            "blockTimeMS": 1000,
            "appName": "cancelled-get-more",
        }
        await client.admin.command({"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": data})
        try:
            async with anyio.create_task_group() as reading:
                reading.start_soon(cursor.to_list)
                with anyio.fail_after(10):
                    await get_more_sent.wait()
                reading.cancel_scope.cancel()
            assert reading.cancel_scope.cancelled_caught
            # No await was possible while cancelled: the client's reaper task kills the cursor.
            with anyio.fail_after(10):
                await watcher.done.wait()
            assert watcher.killed == [cursor_id]
        finally:
            await client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})


async def test_cursors_abandoned_just_before_close_are_killed_by_close(
    server_uri: str, db: Database[Any]
) -> None:
    await db.items.insert_many([{"_id": i} for i in range(10)])
    watcher = _KillCursorsWatcher()
    client = MongoClient(server_uri, event_listeners=[watcher])
    coll = client[db.name].items
    first = await coll.find(batch_size=2)
    second = await coll.find({"_id": {"$gte": 3}}, batch_size=2)
    ids = sorted([first.cursor_id or 0, second.cursor_id or 0])
    del first, second
    gc.collect()
    # close() runs before the reaper task had a turn: it sends the queued kills itself.
    await client.close()
    assert sorted(watcher.killed) == ids
    for cursor_id in ids:
        with pytest.raises(OperationFailure):
            await db.command("getMore", Int64(cursor_id), collection="items")


async def test_find_raw_batches_gives_each_batch_as_bson(coll: Collection[Any]) -> None:
    await coll.insert_many([{"_id": i, "name": f"n{i}"} for i in range(7)])
    cursor = coll.find_raw_batches({"_id": {"$gte": 1}}, sort=[("_id", 1)], batch_size=2, limit=5)
    assert cursor.collection is coll
    batches = await cursor.to_list()
    assert [len(decode_all(batch)) for batch in batches] == [2, 2, 1]
    assert [doc for batch in batches for doc in decode_all(batch)] == [
        {"_id": i, "name": f"n{i}"} for i in range(1, 6)
    ]
    assert all(isinstance(batch, bytes) for batch in batches)
    plan = await coll.find_raw_batches({"_id": 1}).explain()
    assert isinstance(plan, dict) and "queryPlanner" in plan
    again = cursor.clone()
    assert isinstance(again, RawBatchCursor)
    assert [len(decode_all(batch)) for batch in await again.to_list()] == [2, 2, 1]
    assert await coll.find_raw_batches({"_id": 99}).to_list() == []


async def test_aggregate_raw_batches_gives_each_batch_as_bson(coll: Collection[Any]) -> None:
    await coll.insert_many([{"_id": i, "n": i % 2} for i in range(6)])
    pipeline = [{"$match": {"n": 1}}, {"$sort": {"_id": 1}}]
    batches = await coll.aggregate_raw_batches(pipeline, batchSize=2).to_list()
    assert [decode_all(batch) for batch in batches] == [
        [{"_id": 1, "n": 1}, {"_id": 3, "n": 1}],
        [{"_id": 5, "n": 1}],
    ]
    # The collection's own cursors still decode documents.
    assert await coll.aggregate(pipeline).to_list() == [{"_id": i, "n": 1} for i in (1, 3, 5)]
    with_let = coll.aggregate_raw_batches([{"$match": {"$expr": {"$eq": ["$_id", "$$wanted"]}}}], let={"wanted": 4})
    assert [decode_all(batch) for batch in await with_let.to_list()] == [[{"_id": 4, "n": 0}]]


async def test_find_and_modify_family(coll: Collection[Any]) -> None:
    await coll.insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": 2}])
    after = await coll.find_one_and_update(
        {"_id": 1}, {"$inc": {"n": 5}}, return_document=ReturnDocument.AFTER, projection={"_id": 0}
    )
    assert after == {"n": 6}
    before = await coll.find_one_and_replace({"_id": 2}, {"n": 0})
    assert before == {"_id": 2, "n": 2}
    deleted = await coll.find_one_and_delete({}, sort=[("n", 1)])
    assert deleted == {"_id": 2, "n": 0}
    assert await coll.find_one_and_delete({"_id": 99}) is None
    created = await coll.find_one_and_update(
        {"_id": "seq"}, {"$inc": {"v": 1}}, upsert=True, return_document=ReturnDocument.AFTER
    )
    assert created == {"_id": "seq", "v": 1}


async def test_bulk_write(coll: Collection[Any]) -> None:
    result = await coll.bulk_write(
        [
            InsertOne({"_id": 1, "k": "x"}),
            InsertOne({"_id": 2, "k": "x"}),
            UpdateOne({"_id": 3}, {"$set": {"k": "y"}}, upsert=True),
            DeleteMany({"k": "x"}),
        ]
    )
    assert (result.inserted_count, result.upserted_count, result.deleted_count) == (2, 1, 2)
    assert result.upserted_ids == {2: 3}
    assert await coll.find().to_list() == [{"_id": 3, "k": "y"}]


async def test_aggregate_cursor(coll: Collection[Any]) -> None:
    await coll.insert_many([{"g": i % 3, "v": i} for i in range(30)])
    cursor = coll.aggregate([{"$sort": {"v": 1}}], batchSize=4)
    assert isinstance(cursor, CommandCursor)
    assert len([d async for d in cursor]) == 30
    groups = await (
        await coll.aggregate([{"$group": {"_id": "$g", "total": {"$sum": "$v"}}}, {"$sort": {"_id": 1}}])
    ).to_list()
    assert [g["total"] for g in groups] == [135, 145, 155]
    await coll.aggregate([{"$match": {"g": 0}}, {"$out": "zeros"}])
    assert await coll.database.zeros.count_documents({}) == 10


async def test_indexes(coll: Collection[Any]) -> None:
    assert await coll.create_index([("a", 1), ("b", -1)], unique=True) == "a_1_b_-1"
    assert await coll.create_indexes([IndexModel("c", name="by_c")]) == ["by_c"]
    info = await coll.index_information()
    assert set(info) == {"_id_", "a_1_b_-1", "by_c"}
    assert info["a_1_b_-1"]["key"] == [("a", 1), ("b", -1)]
    assert info["a_1_b_-1"]["unique"] is True
    await coll.drop_index("by_c")
    assert [i["name"] async for i in coll.list_indexes()] == ["_id_", "a_1_b_-1"]
    await coll.drop_indexes()
    assert [i["name"] async for i in coll.list_indexes()] == ["_id_"]
    assert await coll.database.missing.list_indexes().to_list() == []


async def test_collection_management(db: Database[Any]) -> None:
    logs = await db.create_collection("logs", capped=True, size=65536)
    assert await logs.options() == {"capped": True, "size": 65536}
    with pytest.raises(CollectionInvalid):
        await db.create_collection("logs")
    await logs.insert_one({"x": 1})
    assert "logs" in await db.list_collection_names()
    await logs.rename("logs2")
    assert await db.list_collection_names(filter={"name": "logs2"}) == ["logs2"]
    infos = await db.list_collections().to_list()
    assert [info["name"] for info in infos] == ["logs2"]
    await db.drop_collection("logs2")
    await db.drop_collection("never_existed")
    assert await db.list_collection_names() == []


async def test_database_command_and_cursor_command(db: Database[Any]) -> None:
    assert (await db.command("ping"))["ok"] == 1
    with pytest.raises(OperationFailure):
        await db.command("noSuchCommand")
    failed = await db.command("noSuchCommand", check=False)
    assert failed["ok"] == 0
    await db.things.insert_many([{"_id": i} for i in range(7)])
    docs = await db.cursor_command("find", "things", batchSize=2).to_list()
    assert [d["_id"] for d in docs] == list(range(7))


async def test_unacknowledged_write(coll: Collection[Any]) -> None:
    fire_and_forget = coll.with_options(write_concern=WriteConcern(w=0))
    result = await fire_and_forget.insert_one({"_id": "w0"})
    assert not result.acknowledged
    assert await coll.find_one({"_id": "w0"}) == {"_id": "w0"}


async def test_explicit_session(client: MongoClient, coll: Collection[Any]) -> None:
    async with client.start_session() as session:
        await coll.insert_many([{"_id": i} for i in range(5)], session=session)
        cursor = coll.find({}, batch_size=2, session=session)
        assert len(await cursor.to_list()) == 5
        assert not session.has_ended
        assert await coll.count_documents({}, session=session) == 5
    assert isinstance(cursor, Cursor)


async def test_tailable_cursor_on_a_capped_collection(db: Database[Any]) -> None:
    capped = await db.create_collection("capped", capped=True, size=4096)
    await capped.insert_many([{"_id": 1}, {"_id": 2}])
    cursor = capped.find(cursor_type=CursorType.TAILABLE_AWAIT, batch_size=1).max_await_time_ms(50)
    assert [d["_id"] async for d in cursor] == [1, 2]
    assert cursor.alive  # an empty getMore ends the round, not the cursor
    assert await cursor.try_next() is None
    await capped.insert_one({"_id": 3})
    assert await cursor.try_next() == {"_id": 3}
    await cursor.close()
    assert not cursor.alive


async def test_cancelled_iteration_leaves_no_session_behind(coll: Collection[Any]) -> None:
    await coll.insert_many([{"_id": i} for i in range(10)])
    cursor = await coll.find(batch_size=2)
    session = cursor._session
    await cursor.to_list(2)
    async with anyio.create_task_group() as reading:
        reading.start_soon(cursor.next)
        await anyio.lowlevel.checkpoint()  # the getMore is on its way
        reading.cancel_scope.cancel()
    assert reading.cancel_scope.cancelled_caught
    assert not cursor.alive
    assert session is not None and session.has_ended
    # the client is still usable afterwards
    assert await coll.count_documents({}) == 10
