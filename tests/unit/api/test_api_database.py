"""Database methods against the stand-in executor."""

from __future__ import annotations

import math
from typing import Any, cast

import pytest

from mongio.bson import DBRef
from mongio.collection import Collection
from mongio.database import Database
from mongio.errors import CollectionInvalid, InvalidName, InvalidOperation, OperationFailure
from mongio.options.read_preference import Secondary
from mongio.options.write_concern import WriteConcern
from tests.support.fake_client import FakeClient, QueuedReplies


def make(**replies: Any) -> tuple[FakeClient, QueuedReplies, Database[dict[str, Any]]]:
    recorder = QueuedReplies(**replies)
    client = FakeClient(respond=recorder)
    return client, recorder, client["db"]


def _collections(*names: str) -> dict[str, Any]:
    return {
        "cursor": {
            "id": 0,
            "ns": "db.$cmd.listCollections",
            "firstBatch": [{"name": name, "type": "collection"} for name in names],
        }
    }


def test_names_and_options_inherit_from_the_client() -> None:
    client, _, db = make()
    assert db.name == "db"
    assert db.client is cast(Any, client)
    assert db.write_concern == client.write_concern
    assert db.orders.full_name == "db.orders"
    assert db["orders"] == db.get_collection("orders")
    majority = WriteConcern(w="majority")
    assert db.with_options(write_concern=majority).orders.write_concern == majority
    assert db.get_collection("o", read_preference=Secondary()).read_preference == Secondary()
    for bad in ("", "a.b", "a b", "a$b", "a/b"):
        with pytest.raises(InvalidName):
            Database(cast(Any, client), bad)
    with pytest.raises(AttributeError):
        _ = db._hidden
    with pytest.raises(NotImplementedError):
        bool(db)


def test_a_timeout_set_on_a_database_is_kept_by_its_collections_and_copies() -> None:
    _, _, db = make()
    assert db.timeout is None and db.orders.timeout is None  # the client's timeoutMS applies
    limited = db.with_options(timeout=2.5)
    assert limited.timeout == 2.5
    assert limited.orders.timeout == 2.5 and limited.orders.archive.timeout == 2.5
    assert limited.orders.with_options(write_concern=WriteConcern(w=1)).timeout == 2.5
    assert limited.get_collection("orders", timeout=0).timeout == math.inf
    assert limited.with_options(timeout=1).timeout == 1.0
    assert limited.with_options(read_preference=Secondary()).timeout == 2.5
    with pytest.raises(ValueError, match="non-negative"):
        db.with_options(timeout=-1)


def test_watch_makes_the_stream_of_a_database_or_a_collection() -> None:
    _, _, db = make()
    database_stream = db.watch()
    collection_stream = db.orders.watch(batch_size=10)
    assert type(database_stream).__name__ == "DatabaseChangeStream"
    assert type(collection_stream).__name__ == "CollectionChangeStream"
    assert repr(database_stream).startswith("<DatabaseChangeStream db ")
    assert repr(collection_stream).startswith("<CollectionChangeStream db.orders ")
    with pytest.raises(TypeError, match="batch_size"):
        db.orders.watch(batch_size="10")  # type: ignore[arg-type]


def test_a_database_is_not_iterable() -> None:
    db = FakeClient()["db"]
    with pytest.raises(TypeError, match="not iterable"):
        iter(db)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="'Database' object is not iterable"):
        db.next()


async def test_command_forms_and_primary_default() -> None:
    client, recorder, db = make(ping={"ok": 1}, collStats={"ok": 1, "count": 3})
    assert (await db.command("ping"))["ok"] == 1
    assert recorder.bodies[0] == {"ping": 1}
    stats = await db.command("collStats", "orders", scale=1024, comment="c")
    assert stats["count"] == 3
    assert recorder.bodies[1] == {"collStats": "orders", "scale": 1024, "comment": "c"}
    await db.command({"ping": 1, "x": 2})
    assert recorder.bodies[2] == {"ping": 1, "x": 2}
    assert client.calls[0].operation.read_preference is None
    await db.command("ping", read_preference=Secondary())
    assert client.calls[3].operation.read_preference == Secondary()
    assert client.calls[0].operation.retryability.name == "NONE"


async def test_command_check_and_allowable_errors() -> None:
    failure = {"ok": 0, "code": 59, "errmsg": "no such command: 'nope'"}
    _, _, db = make(nope=failure)
    with pytest.raises(OperationFailure):
        await db.command("nope")
    assert (await db.command("nope", check=False))["code"] == 59
    assert (await db.command("nope", allowable_errors=[59]))["ok"] == 0
    assert (await db.command("nope", allowable_errors=["no such command: 'nope'"]))["code"] == 59
    with pytest.raises(OperationFailure):
        await db.command("nope", allowable_errors=[1])


async def test_cursor_command_iterates_with_getmore() -> None:
    replies = {
        "find": {"cursor": {"id": 5, "ns": "db.c", "firstBatch": [{"_id": 1}]}},
        "getMore": {"cursor": {"id": 0, "ns": "db.c", "nextBatch": [{"_id": 2}]}},
    }
    client, recorder, db = make(**replies)
    docs = await db.cursor_command("find", "c", batchSize=1, comment="k").to_list()
    assert docs == [{"_id": 1}, {"_id": 2}]
    # the comment argument is for the getMores; the command's own comment is in the command
    assert recorder.bodies[0] == {"find": "c", "batchSize": 1}
    assert recorder.bodies[1]["collection"] == "c"
    assert recorder.bodies[1]["comment"] == "k"
    assert client.calls[1].address is not None


async def test_create_collection_checks_existence() -> None:
    _, recorder, db = make(listCollections=[_collections(), _collections("logs")])
    logs = await db.create_collection("logs", capped=True, size=4096, comment="c")
    assert logs.full_name == "db.logs"
    assert recorder.bodies[0]["filter"] == {"name": "logs"}
    assert recorder.bodies[0]["nameOnly"] is True
    assert recorder.bodies[1] == {"create": "logs", "capped": True, "size": 4096, "comment": "c"}
    with pytest.raises(CollectionInvalid):
        await db.create_collection("logs")
    await db.create_collection("logs", check_exists=False)
    assert recorder.bodies[-1] == {"create": "logs"}


async def test_list_collections_and_names() -> None:
    _, recorder, db = make(listCollections=[_collections("a", "b"), _collections("a")])
    assert await db.list_collection_names() == ["a", "b"]
    assert recorder.bodies[0]["nameOnly"] is True
    infos = await db.list_collections(filter={"type": "collection"}, authorizedCollections=True).to_list()
    assert [info["name"] for info in infos] == ["a"]
    assert "nameOnly" not in recorder.bodies[1]
    assert recorder.bodies[1]["authorizedCollections"] is True


async def test_list_collection_objects_hands_out_collections_batch_by_batch() -> None:
    first = {"cursor": {"id": 7, "ns": "db.$cmd.listCollections", "firstBatch": [{"name": "a"}]}}
    more = {"cursor": {"id": 0, "ns": "db.$cmd.listCollections", "nextBatch": [{"name": "b"}, {"name": "c"}]}}
    _, recorder, db = make(listCollections=[first, _collections("logs")], getMore=more)
    majority = WriteConcern(w="majority")
    db = db.with_options(write_concern=majority)
    collections = await db.list_collection_objects(batchSize=1).to_list()
    assert [c.full_name for c in collections] == ["db.a", "db.b", "db.c"]
    assert all(isinstance(c, Collection) and c.write_concern == majority for c in collections)
    assert recorder.bodies[0]["nameOnly"] is True
    assert recorder.bodies[0]["cursor"] == {"batchSize": 1}
    assert recorder.bodies[1]["getMore"] == 7
    # A filter on more than the name needs the full descriptions, so nameOnly is left out.
    found = [c.name async for c in db.list_collection_objects(filter={"type": "collection"}, comment="c")]
    assert found == ["logs"]
    assert "nameOnly" not in recorder.bodies[2]
    assert recorder.bodies[2]["filter"] == {"type": "collection"}
    assert recorder.bodies[2]["comment"] == "c"
    with pytest.raises(TypeError, match="list_collection_objects"):
        db.list_collection_objects(limit=3)


async def test_drop_collection_and_validate() -> None:
    _, recorder, db = make(
        drop={"ok": 1, "ns": "db.a"}, validate=[{"valid": True}, {"valid": False, "errors": ["x"]}]
    )
    await db.drop_collection(db.a)
    assert recorder.bodies[0] == {"drop": "a"}
    assert (await db.validate_collection("a", full=True))["valid"] is True
    assert recorder.bodies[1] == {"validate": "a", "scandata": False, "full": True}
    with pytest.raises(CollectionInvalid):
        await db.validate_collection("a")


async def test_database_aggregate() -> None:
    _, recorder, db = make(
        aggregate={"cursor": {"id": 0, "ns": "db.$cmd.aggregate", "firstBatch": [{"op": 1}]}}
    )
    assert await db.aggregate([{"$currentOp": {}}], allowDiskUse=True).to_list() == [{"op": 1}]
    assert recorder.bodies[0]["aggregate"] == 1
    assert recorder.bodies[0]["allowDiskUse"] is True


async def test_dereference() -> None:
    replies = {"find": {"cursor": {"id": 0, "ns": "db.people", "firstBatch": [{"_id": 4}]}}}
    _, recorder, db = make(**replies)
    assert await db.dereference(DBRef("people", 4)) == {"_id": 4}
    assert recorder.bodies[0]["find"] == "people" and recorder.bodies[0]["filter"] == {"_id": 4}
    with pytest.raises(ValueError):
        await db.dereference(DBRef("people", 4, "elsewhere"))
    with pytest.raises(TypeError):
        await db.dereference({"$ref": "people"})  # type: ignore[arg-type]


async def test_cursor_command_refuses_a_reply_without_cursor() -> None:
    client, _, db = make(ping={"ok": 1})
    with pytest.raises(InvalidOperation, match="not a cursor"):
        await db.cursor_command("ping")
    assert client.sessions[0].has_ended


async def test_command_codec_options_none_means_the_default_not_the_databases() -> None:
    from mongio.bson import DEFAULT_CODEC_OPTIONS, SON, CodecOptions

    client, _, _ = make(ping={"ok": 1})
    db: Database[Any] = Database(cast(Any, client), "db", codec_options=CodecOptions(document_class=SON))
    await db.command("ping", codec_options=None)
    await db.command("ping")
    await db.command("ping", codec_options=db.codec_options)
    used = [call.operation.codec_options for call in client.calls]
    assert used == [DEFAULT_CODEC_OPTIONS, DEFAULT_CODEC_OPTIONS, db.codec_options]
