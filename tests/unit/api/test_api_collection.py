"""Collection methods against the stand-in executor: each method's command and how the reply becomes its
result."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.bson import ObjectId
from mongio.errors import BulkWriteError, DuplicateKeyError, InvalidName, InvalidOperation
from mongio.operations import (
    DeleteOne,
    IndexModel,
    InsertOne,
    ReplaceOne,
    ReturnDocument,
    UpdateOne,
)
from mongio.options.read_concern import ReadConcern
from mongio.options.read_preference import Secondary
from mongio.options.write_concern import WriteConcern
from tests.support.fake_client import (
    CursorServer,
    FakeClient,
    FakeSession,
    QueuedReplies,
    documents,
    make_collection,
)


def test_names_options_and_sub_collections() -> None:
    client, _, coll = make_collection()
    assert coll.name == "coll"
    assert coll.full_name == "db.coll"
    assert coll.database.name == "db"
    sub = coll.archive.old
    assert sub.full_name == "db.coll.archive.old"
    assert coll["x"].name == "coll.x"
    assert coll == client["db"]["coll"]
    assert coll != client["db"]["other"]
    assert hash(coll) == hash(client["db"]["coll"])
    with pytest.raises(AttributeError):
        _ = coll._private
    with pytest.raises(NotImplementedError):
        bool(coll)
    with pytest.raises(TypeError, match="not callable"):
        coll.no_such_method()
    with pytest.raises(InvalidName):
        client["db"]["bad$name"]


def test_a_collection_is_not_iterable() -> None:
    _, _, coll = make_collection()
    with pytest.raises(TypeError, match="not iterable"):
        iter(coll)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="not iterable"):
        for _ in coll:  # type: ignore[misc]
            break
    with pytest.raises(TypeError, match="'Collection' object is not iterable"):
        coll.next()


def test_with_options_keeps_unchanged_ones() -> None:
    _, _, coll = make_collection()
    majority = WriteConcern(w="majority")
    changed = coll.with_options(write_concern=majority, read_preference=Secondary())
    assert changed.write_concern == majority
    assert changed.read_preference == Secondary()
    assert changed.read_concern == coll.read_concern
    assert changed.codec_options is coll.codec_options
    assert coll.write_concern != majority
    assert changed.with_options(read_concern=ReadConcern("local")).write_concern == majority


async def test_insert_one_adds_id_and_sends_write_concern_through_the_operation() -> None:
    client, recorder, coll = make_collection(insert={"n": 1})
    coll = coll.with_options(write_concern=WriteConcern(w=1))
    document: dict[str, Any] = {"a": 1}
    result = await coll.insert_one(document, comment="c")
    assert isinstance(result.inserted_id, ObjectId)
    assert document["_id"] == result.inserted_id
    assert result.acknowledged
    body = recorder.bodies[0]
    assert body["insert"] == "coll"
    assert body["documents"] == [document]
    assert body["comment"] == "c"
    assert client.calls[0].operation.write_concern == WriteConcern(w=1)


async def test_unacknowledged_insert_returns_without_reply() -> None:
    client, recorder, coll = make_collection()
    result = await coll.with_options(write_concern=WriteConcern(w=0)).insert_one({"_id": 5})
    assert result.inserted_id == 5
    assert not result.acknowledged
    assert recorder.bodies == []  # the stand-in never asks for a reply to a w=0 write
    assert client.calls[0].name == "insert"


async def test_insert_one_duplicate_key() -> None:
    _, _, coll = make_collection(insert={"n": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "E11000"}]})
    with pytest.raises(DuplicateKeyError):
        await coll.insert_one({"_id": 1})


async def test_insert_many() -> None:
    _, recorder, coll = make_collection(insert={"n": 3})
    result = await coll.insert_many([{"_id": 1}, {"_id": 2}, {}], ordered=False)
    assert result.inserted_ids[:2] == [1, 2]
    assert isinstance(result.inserted_ids[2], ObjectId)
    assert recorder.bodies[0]["ordered"] is False
    assert len(recorder.bodies[0]["documents"]) == 3
    with pytest.raises(TypeError):
        await coll.insert_many([])
    with pytest.raises(TypeError):
        await coll.insert_many({"_id": 1})  # type: ignore[dict-item]  # deliberately not a list


async def test_insert_many_from_a_generator() -> None:
    _, recorder, coll = make_collection(insert={"n": 2})
    result = await coll.insert_many({"_id": i} for i in range(2))
    assert result.inserted_ids == [0, 1]
    assert len(recorder.bodies) == 1


async def test_bulk_write_runs_each_batch_and_merges() -> None:
    _, recorder, coll = make_collection(
        insert={"n": 1},
        update=[{"n": 2, "nModified": 1, "upserted": [{"index": 1, "_id": 9}]}],
        delete={"n": 1},
    )
    result = await coll.bulk_write(
        [
            InsertOne({"_id": 1}),
            UpdateOne({"_id": 1}, {"$set": {"a": 1}}),
            ReplaceOne({"_id": 9}, {"a": 2}, upsert=True),
            DeleteOne({"_id": 1}),
        ]
    )
    assert [next(iter(b)) for b in recorder.bodies] == ["insert", "update", "delete"]
    assert (result.inserted_count, result.matched_count, result.modified_count) == (1, 1, 1)
    assert result.upserted_ids == {2: 9}
    assert result.deleted_count == 1


async def test_bulk_write_error_stops_ordered() -> None:
    _, recorder, coll = make_collection(insert={"n": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup"}]})
    with pytest.raises(BulkWriteError) as info:
        await coll.bulk_write([InsertOne({"_id": 1}), DeleteOne({"_id": 1})])
    assert len(recorder.bodies) == 1
    assert info.value.details is not None
    assert info.value.details["writeErrors"][0]["index"] == 0
    with pytest.raises(InvalidOperation):
        await coll.bulk_write([])
    with pytest.raises(TypeError):
        await coll.bulk_write(InsertOne({}))  # type: ignore[arg-type]


async def test_update_one_many_replace_one() -> None:
    _, recorder, coll = make_collection(
        update=[
            {"n": 1, "nModified": 1},
            {"n": 3, "nModified": 2},
            {"n": 1, "upserted": [{"index": 0, "_id": 7}], "nModified": 0},
        ]
    )
    result = await coll.update_one(
        {"a": 1}, {"$set": {"b": 1}}, array_filters=[{"x.y": 1}], hint="a_1", sort={"a": 1}, let={"v": 1}
    )
    assert (result.matched_count, result.modified_count, result.upserted_id) == (1, 1, None)
    statement = recorder.bodies[0]["updates"][0]
    # multi: False as PyMongo sends it, so a write error's op is the same.
    assert statement == {
        "q": {"a": 1},
        "u": {"$set": {"b": 1}},
        "multi": False,
        "arrayFilters": [{"x.y": 1}],
        "hint": "a_1",
        "sort": {"a": 1},
    }
    assert recorder.bodies[0]["let"] == {"v": 1}
    many = await coll.update_many({}, {"$inc": {"n": 1}})
    assert many.modified_count == 2
    assert recorder.bodies[1]["updates"][0]["multi"] is True
    replaced = await coll.replace_one({"_id": 7}, {"a": 2}, upsert=True)
    assert replaced.upserted_id == 7 and replaced.did_upsert and replaced.matched_count == 0
    assert recorder.bodies[2]["updates"][0]["upsert"] is True
    with pytest.raises(ValueError):
        await coll.update_one({}, {"no": "operators"})
    with pytest.raises(ValueError):
        await coll.replace_one({}, {"$set": {"a": 1}})


async def test_delete_one_and_many() -> None:
    _, recorder, coll = make_collection(delete=[{"n": 1}, {"n": 4}])
    assert (await coll.delete_one({"a": 1}, hint={"a": 1})).deleted_count == 1
    assert (await coll.delete_many({})).deleted_count == 4
    assert recorder.bodies[0]["deletes"] == [{"q": {"a": 1}, "limit": 1, "hint": {"a": 1}}]
    assert recorder.bodies[1]["deletes"] == [{"q": {}, "limit": 0}]


async def test_find_one_uses_single_batch_and_id_shortcut() -> None:
    server = CursorServer(documents(5))
    client = FakeClient(respond=server)
    coll = client["db"]["coll"]
    doc = await coll.find_one(3)
    body = client.calls[0].body
    assert body["filter"] == {"_id": 3}
    assert body["limit"] == 1 and body["singleBatch"] is True
    assert doc == {"_id": 0, "x": 0}  # the stand-in ignores filters
    empty = FakeClient(respond=CursorServer([]))
    assert await empty["db"]["coll"].find_one() is None
    assert all(session.has_ended for session in client.sessions)


async def test_find_one_sends_the_cursor_paths_command_with_or_without_cursor_options() -> None:
    client = FakeClient(respond=CursorServer(documents(3)))
    coll = client["db"]["coll"]
    session = FakeSession(implicit=False)
    common: dict[str, Any] = {
        "sort": [("x", -1)],
        "hint": "x_1",
        "comment": "c",
        "max_time_ms": 50,
        "collation": {"locale": "fr"},
        "let": {"v": 1},
    }
    direct = await coll.find_one({"x": {"$gt": 0}}, {"_id": 0}, session=session, **common)
    # batch_size is a cursor option (0 adds nothing to the command): this find_one goes through a Cursor.
    through_cursor = await coll.find_one({"x": {"$gt": 0}}, {"_id": 0}, session=session, batch_size=0, **common)
    assert direct == through_cursor == {"_id": 0, "x": 0}  # the stand-in ignores filters and projections
    first, second = client.calls
    assert first.body == second.body
    assert first.body["sort"] == {"x": -1} and first.body["singleBatch"] is True
    assert first.session is session and second.session is session
    assert client.sessions == []  # a single batch takes no implicit ClientSession


async def test_find_one_with_an_empty_sort_sends_none_and_checks_its_options() -> None:
    client = FakeClient(respond=CursorServer(documents(2)))
    coll = client["db"]["coll"]
    await coll.find_one({}, sort=[])
    assert "sort" not in client.calls[0].body
    with pytest.raises(TypeError, match="max_time_ms must be an int"):
        await coll.find_one({}, max_time_ms="soon")
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        await coll.find_one({}, colour="red")
    assert len(client.calls) == 1


# Each is checked by Find's own constructor, whichever of find(), find_one() (with or without a cursor) or a
# cursor's builder gives it: find_one builds the same Find, so it must refuse each alike.
_BAD_FIND_OPTIONS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"projection": 5}, TypeError, "projection must be a mapping"),
    ({"sort": 5}, TypeError, "sort"),
    ({"hint": 5}, TypeError, "hint"),
    ({"max_time_ms": "soon"}, TypeError, "max_time_ms must be an int"),
    ({"max_time_ms": -1}, ValueError, "max_time_ms must be >= 0"),
    ({"collation": 5}, TypeError, "collation must be a mapping"),
    ({"let": [1]}, TypeError, "let must be an instance of dict or another Mapping"),
    ({"skip": -1}, ValueError, "skip must be >= 0"),
    ({"batch_size": "10"}, TypeError, "batch_size must be an int"),
    ({"raw_data": 1}, TypeError, "raw_data must be True, False or None"),
]


@pytest.mark.parametrize(("options", "error", "message"), _BAD_FIND_OPTIONS)
async def test_find_one_refuses_a_bad_option_as_find_does(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    client = FakeClient(respond=CursorServer(documents(2)))
    coll = client["db"]["coll"]
    with pytest.raises(error) as from_find:
        coll.find({"a": 1}, **options)
    with pytest.raises(error) as from_find_one:
        await coll.find_one({"a": 1}, **options)
    with pytest.raises(error) as from_find_one_by_id:
        await coll.find_one(1, **options)
    assert message in str(from_find.value)
    assert str(from_find_one.value) == str(from_find_one_by_id.value) == str(from_find.value)
    assert client.calls == []  # refused before anything was sent


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"projection": ["x"]},
        {"sort": [("x", -1)], "hint": "x_1", "comment": {"c": 1}, "max_time_ms": 5},
        {"sort": {}, "collation": {"locale": "fr"}, "let": {"v": 1}},
    ],
)
async def test_find_one_sends_the_find_of_find_with_limit_minus_one(options: dict[str, Any]) -> None:
    client = FakeClient(respond=CursorServer(documents(2)))
    coll = client["db"]["coll"]
    await coll.find_one({"a": 1}, **options)
    await coll.find({"a": 1}, limit=-1, **options).to_list()
    by_find_one, by_find = client.calls
    assert by_find_one.body == by_find.body
    assert by_find_one.body["singleBatch"] is True and by_find_one.body["limit"] == 1


async def test_find_one_kills_under_its_explicit_session_and_leaves_it_open() -> None:
    recorder = QueuedReplies(find={"cursor": {"id": 7, "ns": "db.coll", "firstBatch": [{"_id": 1}]}})
    client = FakeClient(respond=recorder)
    session = FakeSession(implicit=False)
    assert await client["db"]["coll"].find_one({}, {"_id": 1}, session=session) == {"_id": 1}
    assert client._executor.names() == ["find", "killCursors"]
    assert [call.session for call in client.calls] == [session, session]
    assert not session.has_ended and client.sessions == []


async def test_find_one_kills_a_cursor_the_server_left_open() -> None:
    recorder = QueuedReplies(find={"cursor": {"id": 7, "ns": "db.coll", "firstBatch": [{"_id": 1}]}})
    client = FakeClient(respond=recorder)
    assert await client["db"]["coll"].find_one({}) == {"_id": 1}
    assert client._executor.names() == ["find", "killCursors"]
    assert client.calls[1].body["cursors"] == [7]
    assert client.calls[1].address == client.context.address


async def test_find_one_kills_a_left_open_cursor_with_the_pin_its_find_ran_with() -> None:
    # Load balanced, the executor keeps the find's connection in that pin when the server keeps a cursor open:
    # the killCursors must go over it.
    recorder = QueuedReplies(find={"cursor": {"id": 7, "ns": "db.coll", "firstBatch": [{"_id": 1}]}})
    client = FakeClient(respond=recorder)
    executor = client._executor
    pins: list[tuple[str, Any]] = []
    answer, run = executor.execute_answered, executor.execute

    async def answering(operation: Any, session: Any = None, **kwargs: Any) -> Any:
        if operation.command_name == "find":  # the stand-in's execute() comes here too, without the pin
            pins.append((operation.command_name, kwargs.get("pin")))
        return await answer(operation, session, **kwargs)

    async def running(operation: Any, session: Any = None, **kwargs: Any) -> Any:
        pins.append((operation.command_name, kwargs.get("pin")))
        return await run(operation, session, **kwargs)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(executor, "execute_answered", answering)
        patched.setattr(executor, "execute", running)
        assert await client["db"]["coll"].find_one({"a": 1}) == {"_id": 1}
    (find, find_pin), (kill, kill_pin) = pins
    assert (find, kill) == ("find", "killCursors")
    assert find_pin is not None and kill_pin is find_pin
    assert not find_pin.held  # given back once the cursor was killed


async def test_find_one_refuses_a_reply_that_is_not_a_cursor() -> None:
    client = FakeClient(respond=QueuedReplies(find={"n": 1}))
    with pytest.raises(InvalidOperation, match="not a cursor"):
        await client["db"]["coll"].find_one({})


async def test_find_one_and_family() -> None:
    _, recorder, coll = make_collection(
        findAndModify=[{"value": {"_id": 1, "n": 2}}, {"value": None}, {"value": {"_id": 1}}]
    )
    doc = await coll.find_one_and_update(
        {"_id": 1},
        {"$inc": {"n": 1}},
        projection=["n"],
        upsert=True,
        return_document=ReturnDocument.AFTER,
        maxTimeMS=100,
    )
    assert doc == {"_id": 1, "n": 2}
    body = recorder.bodies[0]
    assert body["update"] == {"$inc": {"n": 1}}
    assert body["new"] is True and body["upsert"] is True
    assert body["fields"] == {"n": 1}
    assert body["maxTimeMS"] == 100
    assert await coll.find_one_and_replace({"_id": 2}, {"a": 1}) is None
    assert recorder.bodies[1]["new"] is False
    assert await coll.find_one_and_delete({"_id": 1}, sort=[("a", -1)]) == {"_id": 1}
    assert recorder.bodies[2]["remove"] is True and recorder.bodies[2]["sort"] == {"a": -1}
    with pytest.raises(TypeError):
        await coll.find_one_and_delete({}, bogus=1)


async def test_counts_and_distinct() -> None:
    _, recorder, coll = make_collection(
        aggregate={"cursor": {"id": 0, "ns": "db.coll", "firstBatch": [{"_id": 1, "n": 12}]}},
        count={"n": 40},
        distinct={"values": ["a", "b"]},
    )
    assert await coll.count_documents({"x": 1}, skip=2, limit=20, maxTimeMS=5) == 12
    assert recorder.bodies[0]["pipeline"] == [
        {"$match": {"x": 1}},
        {"$skip": 2},
        {"$limit": 20},
        {"$group": {"_id": 1, "n": {"$sum": 1}}},
    ]
    assert recorder.bodies[0]["maxTimeMS"] == 5
    assert await coll.estimated_document_count(maxTimeMS=3) == 40
    assert recorder.bodies[1] == {"count": "coll", "maxTimeMS": 3}
    assert await coll.distinct("k", {"x": 1}, collation={"locale": "en"}) == ["a", "b"]
    assert recorder.bodies[2]["collation"] == {"locale": "en"}
    with pytest.raises(TypeError):
        await coll.count_documents({}, bogus=True)


async def test_count_documents_on_empty_result_is_zero() -> None:
    _, _, coll = make_collection(aggregate={"cursor": {"id": 0, "ns": "db.coll", "firstBatch": []}})
    assert await coll.count_documents({}) == 0


async def test_aggregate_options_and_passthrough() -> None:
    client, recorder, coll = make_collection(aggregate={"cursor": {"id": 0, "ns": "db.coll", "firstBatch": [{"a": 1}]}})
    cursor = coll.aggregate([{"$match": {}}], allowDiskUse=True, maxTimeMS=9, batch_size=4, someNewOption=1)
    assert await cursor.to_list() == [{"a": 1}]
    body = recorder.bodies[0]
    assert body["allowDiskUse"] is True and body["maxTimeMS"] == 9
    assert body["cursor"] == {"batchSize": 4}
    assert body["someNewOption"] == 1
    out = coll.aggregate([{"$out": "other"}])
    await out
    assert client.calls[-1].operation.takes_write_concern


async def test_index_methods() -> None:
    list_reply = {
        "cursor": {
            "id": 0,
            "ns": "db.coll",
            "firstBatch": [
                {"v": 2, "key": {"_id": 1}, "name": "_id_"},
                {"v": 2, "key": {"a": 1, "b": -1}, "name": "a_1_b_-1", "unique": True},
            ],
        }
    }
    _, recorder, coll = make_collection(listIndexes=list_reply)
    assert await coll.create_index([("a", 1), ("b", -1)], unique=True, maxTimeMS=50) == "a_1_b_-1"
    assert recorder.bodies[0] == {
        "createIndexes": "coll",
        "indexes": [{"key": {"a": 1, "b": -1}, "name": "a_1_b_-1", "unique": True}],
        "maxTimeMS": 50,
    }
    assert await coll.create_indexes([IndexModel("x"), IndexModel([("y", -1)], name="why")]) == ["x_1", "why"]
    await coll.drop_index([("a", 1), ("b", -1)])
    assert recorder.bodies[2] == {"dropIndexes": "coll", "index": "a_1_b_-1"}
    await coll.drop_indexes()
    assert recorder.bodies[3] == {"dropIndexes": "coll", "index": "*"}
    with pytest.raises(ValueError):
        await coll.drop_index("*")
    info = await coll.index_information()
    assert info == {
        "_id_": {"v": 2, "key": [("_id", 1)]},
        "a_1_b_-1": {"v": 2, "key": [("a", 1), ("b", -1)], "unique": True},
    }


async def test_list_indexes_of_missing_collection_is_empty() -> None:
    _, _, coll = make_collection(listIndexes={"ok": 0, "code": 26, "errmsg": "ns does not exist"})
    assert await coll.list_indexes().to_list() == []


async def test_search_index_helpers() -> None:
    _, recorder, coll = make_collection(
        createSearchIndexes={"indexesCreated": [{"id": "1", "name": "default"}]},
        aggregate={"cursor": {"id": 0, "ns": "db.coll", "firstBatch": [{"name": "default"}]}},
    )
    assert await coll.create_search_index({"definition": {"mappings": {"dynamic": True}}}) == "default"
    assert recorder.bodies[0]["indexes"] == [{"definition": {"mappings": {"dynamic": True}}}]
    assert await coll.list_search_indexes("default").to_list() == [{"name": "default"}]
    assert recorder.bodies[1]["pipeline"] == [{"$listSearchIndexes": {"name": "default"}}]
    await coll.update_search_index("default", {"mappings": {}})
    assert recorder.bodies[2] == {
        "updateSearchIndex": "coll",
        "name": "default",
        "definition": {"mappings": {}},
    }
    await coll.drop_search_index("default")
    assert recorder.bodies[3] == {"dropSearchIndex": "coll", "name": "default"}


def test_list_search_indexes_takes_a_timeout_mode() -> None:
    """Index management, Timeouts: list_search_indexes returns a cursor, so it takes the CSOT cursor
    timeout mode (an unknown mode is refused)."""
    _, _, coll = make_collection()
    cursor = coll.list_search_indexes(timeout_mode="iteration")
    assert cursor._timeout_mode == "iteration"
    with pytest.raises(ValueError):
        coll.list_search_indexes(timeout_mode="forever")


async def test_drop_rename_options() -> None:
    _, recorder, coll = make_collection(
        drop={"ok": 0, "code": 26, "errmsg": "ns not found"},
        listCollections={
            "cursor": {
                "id": 0,
                "ns": "db.$cmd.listCollections",
                "firstBatch": [{"name": "coll", "options": {"capped": True}}],
            }
        },
    )
    await coll.drop()  # a missing collection is not an error
    await coll.rename("new", dropTarget=True)
    assert recorder.bodies[1] == {"renameCollection": "db.coll", "to": "db.new", "dropTarget": True}
    assert await coll.options() == {"capped": True}
    assert recorder.bodies[2]["filter"] == {"name": "coll"}


async def test_explicit_session_reaches_the_executor() -> None:
    client, _, coll = make_collection(insert={"n": 1}, delete={"n": 1})
    session: Any = FakeSession(implicit=False)
    await coll.insert_one({}, session=session)
    await coll.delete_many({}, session=session)
    assert [call.session for call in client.calls] == [session, session]


async def test_read_options_reach_the_operation() -> None:
    client, _, coll = make_collection(count={"n": 1})
    secondary = coll.with_options(read_preference=Secondary(), read_concern=ReadConcern("majority"))
    await secondary.estimated_document_count()
    operation = client.calls[0].operation
    assert operation.read_preference == Secondary()
    assert operation.read_concern == ReadConcern("majority")


async def test_raw_data_reaches_every_command_that_takes_it() -> None:
    from tests.support.fake_client import FakeContext

    cursor_reply = {"cursor": {"id": 0, "ns": "db.coll", "firstBatch": []}}
    recorder = QueuedReplies(
        find=cursor_reply, aggregate=cursor_reply, listIndexes=cursor_reply, listCollections=cursor_reply
    )
    client = FakeClient(respond=recorder, context=FakeContext(max_wire_version=27))
    coll = client["db"]["coll"]
    await coll.insert_one({}, raw_data=True)
    await coll.insert_many([{}], raw_data=True)
    await coll.bulk_write([DeleteOne({})], raw_data=True)
    await coll.update_one({}, {"$set": {"a": 1}}, raw_data=True)
    await coll.update_many({}, {"$set": {"a": 1}}, raw_data=True)
    await coll.replace_one({}, {"a": 1}, raw_data=True)
    await coll.delete_one({}, raw_data=True)
    await coll.delete_many({}, raw_data=True)
    await coll.find({}, raw_data=True).to_list()
    await coll.find_one({}, raw_data=True)
    await coll.find_one_and_delete({}, rawData=True)
    await coll.find_one_and_update({}, {"$set": {"a": 1}}, raw_data=True)
    await coll.count_documents({}, rawData=True)
    await coll.estimated_document_count(rawData=True)
    await coll.distinct("a", raw_data=True)
    await coll.aggregate([], rawData=True).to_list()
    await coll.create_index("a", rawData=True)
    await coll.create_indexes([IndexModel("b")], raw_data=True)
    await coll.drop_index("a_1", rawData=True)
    await coll.drop_indexes(raw_data=True)
    await coll.list_indexes(raw_data=True).to_list()
    await coll.database.list_collections(rawData=True).to_list()
    await coll.database.aggregate([], rawData=True).to_list()
    assert len(recorder.bodies) == 23
    for body in recorder.bodies:
        assert body.get("rawData") is True, body
    # An index option of that name would be sent to the server inside the index specification instead.
    assert "rawData" not in recorder.bodies[16]["indexes"][0]
