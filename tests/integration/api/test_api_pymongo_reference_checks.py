"""What PyMongo's own collection, database and bulk tests expect of the API, against the test server: checks made
before anything is sent, documents just over maxBsonObjectSize left for the server to refuse, an unacknowledged
$merge, the legacy $query form of a filter, write errors reporting PyMongo's op, and dereferencing PyMongo's DBRef."""

from __future__ import annotations

from typing import Any

import bson as pymongo_bson
import pytest

from mongio.collection import Collection
from mongio.database import Database
from mongio.errors import BulkWriteError, ConfigurationError, DocumentTooLarge, WriteError
from mongio.operations import InsertOne, UpdateOne
from mongio.options.write_concern import WriteConcern
from tests.support.recorders import CommandRecorder


async def test_arguments_are_checked_before_anything_is_sent(
    coll: Collection[Any], recorder: CommandRecorder
) -> None:
    recorder.clear()
    let: Any
    for let in (10, "str", [], False):
        with pytest.raises(TypeError, match="let must be an instance of dict or another Mapping"):
            await coll.delete_many({}, let=let)
        with pytest.raises(TypeError, match="let must be an instance of dict or another Mapping"):
            await coll.update_one({}, {"$inc": {"x": 1}}, let=let)
        with pytest.raises(TypeError, match="let must be an instance of dict or another Mapping"):
            await coll.find_one_and_delete({}, let=let)
    with pytest.raises(TypeError, match="array_filters must be a list"):
        await coll.find_one_and_update({}, {"$set": {"a": 1}}, array_filters={})  # type: ignore[arg-type]
    for reserved in ("aggregate", "pipeline"):
        with pytest.raises(ConfigurationError, match=f"'{reserved}' cannot be given as an aggregate option"):
            coll.list_search_indexes(**{reserved: "other"})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="'aggregate' cannot be given"):
        coll.aggregate([], aggregate="other")
    with pytest.raises(ConfigurationError, match="'aggregate' cannot be given"):
        coll.database.aggregate([], aggregate="other")
    with pytest.raises(ConfigurationError, match="estimated_document_count does not support sessions"):
        await coll.estimated_document_count(session=None)
    with pytest.raises(TypeError, match="session must be a ClientSession"):
        await coll.insert_one({}, session={})  # type: ignore[arg-type]
    assert recorder.started_events == []


async def test_a_set_of_names_is_an_inclusion_projection(coll: Collection[Any]) -> None:
    await coll.insert_one({"_id": 1, "a": 1, "b": 2})
    assert await coll.find_one({}, projection={"a"}) == {"_id": 1, "a": 1}
    assert await coll.find({}, projection=frozenset({"b"})).to_list() == [{"_id": 1, "b": 2}]
    with pytest.raises(TypeError, match="projection must be"):
        coll.find({}, projection="a")


async def test_a_document_over_max_bson_size_is_the_server_s_to_refuse_when_acknowledged(
    coll: Collection[Any],
) -> None:
    max_size = 16 * 1024 * 1024
    big = "x" * max_size  # the document is max_size + 15 bytes (+ 17 with its _id)
    with pytest.raises(WriteError):
        await coll.insert_one({"big": big})
    # An unordered bulk write does the rest, the refused document reported by its index.
    requests = [InsertOne({"a": 1}), InsertOne({"big": big}), InsertOne({"a": 2})]
    with pytest.raises(BulkWriteError) as refused:
        await coll.bulk_write(requests, ordered=False)
    details: Any = refused.value.details
    assert details["nInserted"] == 2
    assert [error["index"] for error in details["writeErrors"]] == [1]
    # Unacknowledged, the server's refusal would go unseen: the client refuses anything over max_size.
    unacknowledged = coll.with_options(write_concern=WriteConcern(w=0))
    with pytest.raises(DocumentTooLarge, match=r"maxBsonObjectSize of 16777216$"):
        await unacknowledged.replace_one({"bar": "x"}, {"bar": "x" * (max_size - 14)})
    await coll.replace_one({"bar": "x"}, {"bar": "x" * (max_size - 32)}, upsert=True)


async def test_an_unacknowledged_merge_gives_an_empty_cursor(db: Database[Any]) -> None:
    await db.source.insert_many([{"_id": i} for i in range(3)])
    unacknowledged = db.source.with_options(write_concern=WriteConcern(w=0))
    cursor = await unacknowledged.aggregate([{"$merge": {"into": "target"}}])
    assert await cursor.to_list() == [] and not cursor.alive
    # The merge itself ran: an acknowledged write on the same connection comes after it.
    await db.source.insert_one({"_id": 9})
    assert await db.target.count_documents({}) == 3


async def test_a_filter_in_the_legacy_query_form_becomes_the_find_command_s_fields(
    coll: Collection[Any], recorder: CommandRecorder
) -> None:
    await coll.insert_many([{"x": 1}, {"x": 2}, {"x": 3}])
    await coll.create_index("x")
    docs = await coll.find({"$min": {"x": 2}, "$query": {}, "$orderby": {"x": -1}}, hint="x_1").to_list()
    assert [doc["x"] for doc in docs] == [3, 2]
    sent = recorder.last("find")
    assert (sent["filter"], sent["min"], sent["sort"], sent["hint"]) == ({}, {"x": 2}, {"x": -1}, "x_1")
    with pytest.raises(ValueError, match="'\\$explain' beside \\$query"):
        coll.find({"$query": {}, "$explain": True})


async def test_a_write_error_reports_the_statement_as_pymongo_s(coll: Collection[Any]) -> None:
    await coll.create_index("a", unique=True)
    requests = [InsertOne({"b": 1, "a": 1}), UpdateOne({"b": 2}, {"$set": {"a": 1}}, upsert=True)]
    with pytest.raises(BulkWriteError) as failed:
        await coll.bulk_write(requests)
    details: Any = failed.value.details
    (error,) = details["writeErrors"]
    assert error["op"] == {"q": {"b": 2}, "u": {"$set": {"a": 1}}, "multi": False, "upsert": True}


async def test_dereference_follows_pymongo_s_dbref(db: Database[Any]) -> None:
    await db.people.insert_one({"_id": 1, "name": "ada"})
    assert await db.dereference(pymongo_bson.DBRef("people", 1)) == {"_id": 1, "name": "ada"}
    assert await db.dereference(pymongo_bson.DBRef("people", 1, db.name)) == {"_id": 1, "name": "ada"}
    assert await db.dereference(pymongo_bson.DBRef("people", 2)) is None
