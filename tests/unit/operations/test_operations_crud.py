"""CRUD operations: command shapes, the spec's client-side validation, retryability and reply handling."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.bson import CodecOptions, Int64, ObjectId, RawBSONDocument, decode, encode
from mongio.errors import (
    ConfigurationError,
    DocumentTooLarge,
    DuplicateKeyError,
    InvalidDocument,
    InvalidOperation,
    OperationFailure,
    WriteConcernError,
    WriteError,
    WTimeoutError,
)
from mongio.operations import (
    DeleteMany,
    DeleteOne,
    InsertOne,
    ReplaceOne,
    Retryability,
    ReturnDocument,
    ServerLimits,
    UpdateMany,
    UpdateOne,
)
from mongio.operations.base import RESERVED_MESSAGE_BYTES, encode_insert, parse_cursor
from mongio.operations.crud import (
    Aggregate,
    CountDocuments,
    CursorType,
    Delete,
    Distinct,
    EstimatedDocumentCount,
    Explain,
    Find,
    FindAndModify,
    GetMore,
    Insert,
    KillCursors,
    Update,
)
from mongio.options.read_concern import ReadConcern
from mongio.options.read_preference import ReadPreference
from mongio.options.write_concern import WriteConcern
from mongio.wire import COMMAND_OVERHEAD

LIMITS = ServerLimits()
UNACK = WriteConcern(w=0)


def body(operation: Any, context: Any = LIMITS) -> dict[str, Any]:
    command = operation.build(context)
    result = dict(command.body)
    for identifier, sequence in (command.sequences or {}).items():
        result[identifier] = [decode(data) for data in sequence.encoded_documents()]
    return result


def test_find_with_every_option() -> None:
    op = Find(
        "db",
        "c",
        {"a": 1},
        projection={"a": 1},
        sort=[("a", -1)],
        skip=2,
        limit=5,
        batch_size=3,
        hint="a_1",
        min={"a": 0},
        max={"a": 9},
        return_key=True,
        show_record_id=True,
        allow_disk_use=True,
        no_cursor_timeout=True,
        cursor_type=CursorType.TAILABLE_AWAIT,
        allow_partial_results=True,
        max_time_ms=100,
        max_await_time_ms=50,
        collation={"locale": "fr"},
        let={"v": 1},
        comment="c",
    )
    assert body(op) == {
        "find": "c",
        "filter": {"a": 1},
        "projection": {"a": 1},
        "sort": {"a": -1},
        "skip": 2,
        "limit": 5,
        "batchSize": 3,
        "min": {"a": 0},
        "max": {"a": 9},
        "returnKey": True,
        "showRecordId": True,
        "allowDiskUse": True,
        "noCursorTimeout": True,
        "allowPartialResults": True,
        "tailable": True,
        "awaitData": True,
        "collation": {"locale": "fr"},
        "hint": "a_1",
        "maxTimeMS": 100,
        "let": {"v": 1},
        "comment": "c",
    }
    assert op.max_await_time_ms == 50
    assert op.retryability is Retryability.READ and op.takes_read_concern


def test_find_defaults_send_only_filter() -> None:
    assert body(Find("db", "c")) == {"find": "c", "filter": {}}


@pytest.mark.parametrize("filter", [None, {}, {"_id": 1}, RawBSONDocument(encode({"x": 1}))])
def test_a_find_given_options_or_none_is_the_same_find(filter: Any) -> None:
    options: dict[str, Any] = {
        "read_preference": ReadPreference.SECONDARY,
        "read_concern": ReadConcern("majority"),
        "codec_options": CodecOptions(tz_aware=True),
    }
    # find_one's find (no option) takes a shorter way through the constructor than one given its defaults.
    plain = Find("db", "coll", filter, limit=-1, **options)
    defaults = Find("db", "coll", filter, limit=-1, skip=0, batch_size=0, cursor_type=CursorType.NON_TAILABLE, **options)
    for attribute in ("limit", "single_batch", "batch_size", "comment", "cursor_type", "max_await_time_ms"):
        assert getattr(plain, attribute) == getattr(defaults, attribute)
    assert body(plain) == body(defaults) == {"find": "coll", "filter": dict(filter or {}), "limit": 1, "singleBatch": True}
    with pytest.raises(TypeError, match="filter must be a mapping"):
        Find("db", "coll", 5, limit=-1, **options)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limit must be an int"):
        Find("db", "coll", filter, limit="1", **options)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        Find("db", "coll", filter, colour="red")  # type: ignore[call-arg]


def test_negative_limit_is_a_single_batch() -> None:
    assert body(Find("db", "c", {}, limit=-3)) == {"find": "c", "filter": {}, "limit": 3, "singleBatch": True}


def test_batch_size_equal_to_limit_is_sent_one_larger() -> None:
    assert body(Find("db", "c", {}, limit=4, batch_size=4))["batchSize"] == 5
    assert body(Find("db", "c", {}, limit=4, batch_size=2))["batchSize"] == 2


def test_max_await_time_only_for_tailable_await() -> None:
    assert Find("db", "c", max_await_time_ms=10).max_await_time_ms is None
    assert Find("db", "c", cursor_type=CursorType.TAILABLE, max_await_time_ms=10).max_await_time_ms is None
    assert body(Find("db", "c", cursor_type=CursorType.TAILABLE)).get("awaitData") is None


def test_find_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError):
        Find("db", "c", [("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Find("db", "c", skip=-1)
    with pytest.raises(ValueError):
        Find("db", "c", cursor_type=5)


def test_find_read_preference_and_cursor_reply() -> None:
    op = Find("db", "c", read_preference=ReadPreference.SECONDARY)
    assert op.may_use_secondary and not Find("db", "c").may_use_secondary
    state = op.handle_response(
        {"ok": 1, "cursor": {"id": Int64(5), "ns": "db.c", "firstBatch": [{"a": 1}]}}, LIMITS
    )
    assert (state.id, state.database, state.collection, state.batch) == (5, "db", "c", [{"a": 1}])
    assert state.alive


def test_get_more_and_comment_by_wire_version() -> None:
    op = GetMore("db", "c", 42, batch_size=10, max_await_time_ms=20, comment={"x": 1})
    built = body(op, ServerLimits(max_wire_version=9))
    assert built == {"getMore": 42, "collection": "c", "batchSize": 10, "maxTimeMS": 20, "comment": {"x": 1}}
    assert isinstance(built["getMore"], Int64)
    assert "comment" not in body(op, ServerLimits(max_wire_version=8))
    assert op.retryability is Retryability.NONE
    state = op.handle_response(
        {"ok": 1, "cursor": {"id": 0, "ns": "db.c", "nextBatch": [1], "postBatchResumeToken": {"t": 1}}},
        LIMITS,
    )
    assert state.batch == [1] and state.post_batch_resume_token == {"t": 1} and not state.alive


def test_kill_cursors() -> None:
    built = body(KillCursors("db", "c", [1, 2]))
    assert built == {"killCursors": "c", "cursors": [1, 2]}
    assert all(isinstance(i, Int64) for i in built["cursors"])


def test_aggregate_plain_and_with_write_stages() -> None:
    plain = Aggregate("db", "c", [{"$match": {}}], batch_size=2, allow_disk_use=True, let={"x": 1})
    assert body(plain) == {
        "aggregate": "c",
        "pipeline": [{"$match": {}}],
        "cursor": {"batchSize": 2},
        "allowDiskUse": True,
        "let": {"x": 1},
    }
    assert plain.retryability is Retryability.READ and not plain.takes_write_concern
    for stage in ({"$out": "other"}, {"$merge": {"into": "other"}}):
        out = Aggregate("db", "c", [{"$match": {}}, stage], batch_size=0, write_concern=WriteConcern(w=1))
        assert out.has_write_stage
        assert body(out)["cursor"] == {}
        assert out.retryability is Retryability.NONE
        assert out.takes_write_concern and out.takes_read_concern
    assert body(Aggregate("db", None, [{"$currentOp": {}}]))["aggregate"] == 1
    with pytest.raises(TypeError):
        Aggregate("db", "c", {"$match": {}})  # type: ignore[arg-type]


def test_count_documents_pipeline_and_result() -> None:
    op = CountDocuments("db", "c", {"a": 1}, skip=1, limit=5, hint="a_1", comment="x")
    assert body(op) == {
        "aggregate": "c",
        "pipeline": [
            {"$match": {"a": 1}},
            {"$skip": 1},
            {"$limit": 5},
            {"$group": {"_id": 1, "n": {"$sum": 1}}},
        ],
        "cursor": {},
        "hint": "a_1",
        "comment": "x",
    }
    assert body(CountDocuments("db", "c", {}))["pipeline"] == [
        {"$match": {}},
        {"$group": {"_id": 1, "n": {"$sum": 1}}},
    ]
    assert (
        op.handle_response(
            {"ok": 1, "cursor": {"id": 0, "ns": "db.c", "firstBatch": [{"_id": 1, "n": 3}]}}, LIMITS
        )
        == 3
    )
    assert op.handle_response({"ok": 1, "cursor": {"id": 0, "ns": "db.c", "firstBatch": []}}, LIMITS) == 0


def test_estimated_document_count_and_distinct() -> None:
    count = EstimatedDocumentCount("db", "c", max_time_ms=5, comment="x")
    assert body(count) == {"count": "c", "maxTimeMS": 5, "comment": "x"}
    assert count.handle_response({"ok": 1, "n": 7}, LIMITS) == 7
    distinct = Distinct("db", "c", "x", {"a": 1}, collation={"locale": "en"}, hint={"x": 1})
    assert body(distinct) == {
        "distinct": "c",
        "key": "x",
        "query": {"a": 1},
        "collation": {"locale": "en"},
        "hint": {"x": 1},
    }
    assert distinct.handle_response({"ok": 1, "values": [1, 2]}, LIMITS) == [1, 2]
    assert count.retryability is distinct.retryability is Retryability.READ


def test_insert_one_generates_id_first_and_reports_it() -> None:
    document: dict[str, Any] = {"a": 1}
    op = Insert("db", "c", document, bypass_document_validation=True, comment="x")
    assert isinstance(document["_id"], ObjectId)
    built = body(op)
    assert built == {
        "insert": "c",
        "ordered": True,
        "bypassDocumentValidation": True,
        "comment": "x",
        "documents": [{"_id": document["_id"], "a": 1}],
    }
    assert next(iter(built["documents"][0])) == "_id"
    result = op.handle_response({"ok": 1, "n": 1}, LIMITS)
    assert result.acknowledged and result.inserted_id == document["_id"]
    assert op.retryability is Retryability.WRITE and op.takes_write_concern


def test_encode_insert_keeps_given_id_and_raw_documents() -> None:
    data, _id = encode_insert({"x": 1, "_id": 3})
    assert _id == 3 and decode(data) == {"x": 1, "_id": 3}
    raw = RawBSONDocument(encode({"_id": 9, "a": 1}))
    data, _id = encode_insert(raw)
    assert data == raw.raw and _id == 9
    with pytest.raises(TypeError):
        encode_insert([1, 2])


def test_insert_one_document_size_limit_is_checked_against_the_connection() -> None:
    op = Insert("db", "c", {"_id": 1, "s": "x" * 100})
    size = len(encode({"_id": 1, "s": "x" * 100}))
    body(op, ServerLimits(max_bson_size=size))
    # Acknowledged: up to the command overhead over maxBsonObjectSize is the server's to refuse.
    body(op, ServerLimits(max_bson_size=size - COMMAND_OVERHEAD))
    with pytest.raises(DocumentTooLarge):
        Insert("db", "c", {"_id": 1, "s": "x" * 100}).build(ServerLimits(max_bson_size=size - COMMAND_OVERHEAD - 1))
    unacknowledged = Insert("db", "c", {"_id": 1, "s": "x" * 100}, write_concern=WriteConcern(w=0))
    with pytest.raises(DocumentTooLarge):
        unacknowledged.build(ServerLimits(max_bson_size=size - 1))


def test_insert_one_that_cannot_fit_a_message_is_too_large() -> None:
    document = {"_id": 1, "s": "x" * 100}
    size = len(encode(document))
    # Under maxBsonObjectSize, but over what a message leaves for documents once the executor's fields are in.
    tight = ServerLimits(max_message_size=size + RESERVED_MESSAGE_BYTES - 1)
    with pytest.raises(DocumentTooLarge, match="maxMessageSizeBytes"):
        Insert("db", "c", document).build(tight)
    body(Insert("db", "c", document), ServerLimits(max_message_size=size + RESERVED_MESSAGE_BYTES))


def test_insert_one_refuses_what_cannot_be_encoded_when_made() -> None:
    with pytest.raises(TypeError, match="mapping"):
        Insert("db", "c", [("a", 1)])
    document: dict[str, Any] = {"a": object()}
    with pytest.raises(InvalidDocument, match="'a'"):
        Insert("db", "c", document)


def test_insert_one_unacknowledged_is_not_retryable_until_a_transaction_acknowledges_it() -> None:
    def state(op: Insert) -> tuple[bool, Retryability]:
        return op.acknowledged, op.retryability

    op = Insert("db", "c", {"_id": 1}, write_concern=UNACK)
    assert state(op) == (False, Retryability.NONE)
    assert not op.handle_response({}, LIMITS).acknowledged
    op.use_transaction_write_concern()
    assert state(op) == (True, Retryability.WRITE) and op.write_concern is None
    with pytest.raises(WriteError):
        op.handle_response({"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 121, "errmsg": "no"}]}, LIMITS)
    result = op.handle_response({"ok": 1, "n": 1}, LIMITS)
    assert result.acknowledged and result.inserted_id == 1


def test_single_write_errors_raise_with_their_classes() -> None:
    op = Insert("db", "c", {"_id": 1})
    with pytest.raises(DuplicateKeyError):
        op.handle_response(
            {"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup"}]}, LIMITS
        )
    with pytest.raises(WriteError) as info:
        op.handle_response(
            {"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 121, "errmsg": "invalid"}]}, LIMITS
        )
    assert info.value.code == 121 and not isinstance(info.value, DuplicateKeyError)
    with pytest.raises(WriteConcernError) as concern:
        op.handle_response(
            {
                "ok": 1,
                "n": 1,
                "writeConcernError": {"code": 91, "errmsg": "down"},
                "errorLabels": ["RetryableWriteError"],
            },
            LIMITS,
        )
    assert concern.value.has_error_label("RetryableWriteError")


def test_update_one_many_and_replace() -> None:
    one = Update(
        "db",
        "c",
        UpdateOne({"a": 1}, {"$set": {"b": 1}}, upsert=True, hint="a_1", sort={"a": 1}),
        let={"v": 1},
    )
    assert body(one) == {
        "update": "c",
        "ordered": True,
        "let": {"v": 1},
        "updates": [
            # multi: False for an UpdateOne (as PyMongo sends it), none for a ReplaceOne.
            {"q": {"a": 1}, "u": {"$set": {"b": 1}}, "multi": False, "upsert": True, "hint": "a_1", "sort": {"a": 1}}
        ],
    }
    assert one.retryability is Retryability.WRITE
    many = Update("db", "c", UpdateMany({}, [{"$set": {"b": 1}}], array_filters=[{"x": 1}]))
    assert body(many)["updates"] == [
        {"q": {}, "u": [{"$set": {"b": 1}}], "multi": True, "arrayFilters": [{"x": 1}]}
    ]
    assert many.retryability is Retryability.NONE
    replace = Update("db", "c", ReplaceOne({"a": 1}, {"b": 2}, collation={"locale": "en"}))
    assert body(replace)["updates"] == [{"q": {"a": 1}, "u": {"b": 2}, "collation": {"locale": "en"}}]
    reply = {"ok": 1, "n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": 5}]}
    result = one.handle_response(reply, LIMITS)
    assert reply["upserted"] == [{"index": 0, "_id": 5}]  # the server's reply (also the event's) is untouched
    assert (result.matched_count, result.modified_count, result.upserted_id, result.did_upsert) == (
        0,
        0,
        5,
        True,
    )
    result = many.handle_response({"ok": 1, "n": 3, "nModified": 2}, LIMITS)
    assert (result.matched_count, result.modified_count, result.upserted_id, result.did_upsert) == (
        3,
        2,
        None,
        False,
    )
    # raw_result as PyMongo shapes it: updatedExisting, and an upsert's id alone.
    assert result.raw_result == {"ok": 1, "n": 3, "nModified": 2, "updatedExisting": True}
    assert one.handle_response(reply, LIMITS).raw_result == {
        "ok": 1, "n": 1, "nModified": 0, "upserted": 5, "updatedExisting": False
    }  # fmt: skip
    assert many.handle_response({"ok": 1, "n": 0, "nModified": 0}, LIMITS).raw_result["updatedExisting"] is False


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: UpdateOne({}, {"b": 1}), ValueError),
        (lambda: UpdateMany({}, {}), ValueError),
        (lambda: UpdateOne({}, []), ValueError),
        (lambda: UpdateOne({}, "x"), TypeError),
        (lambda: ReplaceOne({}, {"$set": {"b": 1}}), ValueError),
        (lambda: DeleteOne([]), TypeError),
        (lambda: UpdateOne({}, {"$set": {}}, upsert="yes"), TypeError),  # type: ignore[arg-type]
        (lambda: UpdateOne({}, {"$set": {}}, array_filters={"x": 1}), TypeError),
        (lambda: InsertOne({}, namespace="nodot"), ValueError),
        (lambda: FindAndModify("db", "c", {}, update={"a": 1}), ValueError),
        (lambda: FindAndModify("db", "c", {}, replacement={"$set": {"a": 1}}), ValueError),
        (lambda: FindAndModify("db", "c", {}), ValueError),
        (lambda: FindAndModify("db", "c", {}, remove=True, update={"$set": {}}), ValueError),
    ],
)
def test_client_side_validation(make: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        make()


def test_delete_one_and_many() -> None:
    one = Delete("db", "c", DeleteOne({"a": 1}, hint="a_1"), comment="x")
    assert body(one) == {
        "delete": "c",
        "ordered": True,
        "comment": "x",
        "deletes": [{"q": {"a": 1}, "limit": 1, "hint": "a_1"}],
    }
    assert one.retryability is Retryability.WRITE
    many = Delete("db", "c", DeleteMany({}))
    assert body(many)["deletes"] == [{"q": {}, "limit": 0}]
    assert many.retryability is Retryability.NONE
    assert many.handle_response({"ok": 1, "n": 4}, LIMITS).deleted_count == 4


def test_unacknowledged_single_writes() -> None:
    op = Delete("db", "c", DeleteOne({}, hint="a_1"), write_concern=UNACK)
    assert op.retryability is Retryability.NONE
    with pytest.raises(ConfigurationError):
        op.build(ServerLimits(max_wire_version=8))
    op.build(ServerLimits(max_wire_version=9))
    result = op.handle_response({}, LIMITS)
    assert not result.acknowledged
    with pytest.raises(InvalidOperation, match="deleted_count"):
        result.deleted_count  # noqa: B018
    update = Update("db", "c", UpdateOne({}, {"$set": {"a": 1}}, hint="a_1"), write_concern=UNACK)
    with pytest.raises(ConfigurationError):
        update.build(ServerLimits(max_wire_version=7))
    update.build(ServerLimits(max_wire_version=8))
    inserted = Insert("db", "c", {"_id": 3}, write_concern=UNACK).handle_response({}, LIMITS)
    assert not inserted.acknowledged and inserted.inserted_id == 3


def test_find_and_modify_shapes() -> None:
    update = FindAndModify(
        "db",
        "c",
        {"a": 1},
        update={"$inc": {"x": 1}},
        projection={"x": 1},
        sort={"a": -1},
        upsert=True,
        return_document=ReturnDocument.AFTER,
        array_filters=[{"i": 0}],
        bypass_document_validation=False,
        collation={"locale": "en"},
        hint="a_1",
        let={"v": 1},
        comment="c",
        max_time_ms=9,
    )
    assert body(update) == {
        "findAndModify": "c",
        "query": {"a": 1},
        "update": {"$inc": {"x": 1}},
        "new": True,
        "upsert": True,
        "fields": {"x": 1},
        "sort": {"a": -1},
        "arrayFilters": [{"i": 0}],
        "bypassDocumentValidation": False,
        "collation": {"locale": "en"},
        "hint": "a_1",
        "maxTimeMS": 9,
        "let": {"v": 1},
        "comment": "c",
    }
    delete = FindAndModify("db", "c", {"a": 1}, remove=True)
    assert body(delete) == {"findAndModify": "c", "query": {"a": 1}, "remove": True}
    replace = FindAndModify("db", "c", {}, replacement={"b": 1})
    assert body(replace) == {"findAndModify": "c", "query": {}, "update": {"b": 1}, "new": False}
    assert update.retryability is Retryability.WRITE
    assert update.handle_response({"ok": 1, "value": {"x": 2}}, LIMITS) == {"x": 2}
    assert delete.handle_response({"ok": 1, "value": None}, LIMITS) is None
    with pytest.raises(WriteConcernError) as plain:
        update.handle_response(
            {"ok": 1, "value": None, "writeConcernError": {"code": 64, "errmsg": "t"}}, LIMITS
        )
    assert not isinstance(plain.value, WTimeoutError) and not plain.value.timeout
    timed_out = {"code": 64, "errmsg": "waiting for replication timed out", "errInfo": {"wtimeout": True}}
    with pytest.raises(WTimeoutError) as caught:
        update.handle_response({"ok": 1, "value": None, "writeConcernError": timed_out}, LIMITS)
    assert caught.value.timeout and caught.value.code == 64


def test_find_and_modify_hint_unacknowledged() -> None:
    op = FindAndModify("db", "c", {}, remove=True, hint="a_1", write_concern=UNACK)
    assert op.retryability is Retryability.NONE
    with pytest.raises(ConfigurationError):
        op.build(ServerLimits(max_wire_version=8))
    assert op.build(ServerLimits(max_wire_version=9)).body["hint"] == "a_1"


def test_build_returns_a_fresh_body_each_time() -> None:
    op = Find("db", "c")
    first = op.build(LIMITS).body
    first["lsid"] = {"id": 1}
    assert "lsid" not in op.build(LIMITS).body


def test_parse_cursor_at_cluster_time() -> None:
    state = parse_cursor({"ok": 1, "cursor": {"id": 0, "ns": "a.b", "firstBatch": [], "atClusterTime": 5}})
    assert state.at_cluster_time == 5
    beside = parse_cursor({"ok": 1, "cursor": {"id": 0, "firstBatch": []}, "atClusterTime": 6})
    assert beside.at_cluster_time == 6


def test_parse_cursor_defaults_and_refusals() -> None:
    state = parse_cursor({"ok": 1, "cursor": {"nextBatch": [{"a": 1}]}})
    assert state == (0, "", [{"a": 1}], None, None)
    assert parse_cursor({"cursor": {"id": 5, "ns": "a.b", "nextBatch": [], "postBatchResumeToken": {"t": 1}}}, "nextBatch") == (5, "a.b", [], {"t": 1}, None)
    for reply in ({"ok": 1}, {"cursor": "id"}, {"cursor": {"id": "x", "firstBatch": []}}, {"cursor": 3}):
        with pytest.raises(InvalidOperation, match="not a cursor"):
            parse_cursor(reply)


def test_explain_wraps_the_command_and_takes_its_own_max_time() -> None:
    find = Find("db", "c", {"a": 1}, max_time_ms=5, read_preference=ReadPreference.SECONDARY)
    explain = Explain(find, verbosity="queryPlanner", max_time_ms=1000)
    assert body(explain) == {
        "explain": {"find": "c", "filter": {"a": 1}, "maxTimeMS": 5},
        "verbosity": "queryPlanner",
        "maxTimeMS": 1000,
    }
    assert explain.read_preference is find.read_preference and explain.retryability is Retryability.NONE
    delete = Explain(Delete("db", "c", DeleteOne({"a": 1})))
    assert body(delete) == {
        "explain": {"delete": "c", "ordered": True, "deletes": [{"q": {"a": 1}, "limit": 1}]}
    }


# -- rawData (MongoDB 8.2+ only) -------------------------------------------------------------------------------

NEW_SERVER = ServerLimits(max_wire_version=27)
OLD_SERVER = ServerLimits(max_wire_version=26)


def _raw_data_operations(raw_data: Any) -> list[Any]:
    from mongio.operations.bulk import BulkWrite
    from mongio.operations.client_bulk import ClientBulkWrite
    from mongio.operations.collections import ListCollections
    from mongio.operations.indexes import CreateIndexes, DropIndexes, ListIndexes
    from mongio.operations.models import IndexModel

    bulk = BulkWrite("db", "c", [InsertOne({"_id": 1})], raw_data=raw_data)
    client_bulk = ClientBulkWrite([InsertOne({"_id": 1}, namespace="db.c")], raw_data=raw_data)
    return [
        Find("db", "c", {}, raw_data=raw_data),
        Aggregate("db", "c", [], raw_data=raw_data),
        CountDocuments("db", "c", {}, raw_data=raw_data),
        EstimatedDocumentCount("db", "c", raw_data=raw_data),
        Distinct("db", "c", "x", raw_data=raw_data),
        Insert("db", "c", {"_id": 1}, raw_data=raw_data),
        Update("db", "c", UpdateOne({}, {"$set": {"x": 1}}), raw_data=raw_data),
        Delete("db", "c", DeleteOne({}), raw_data=raw_data),
        FindAndModify("db", "c", {}, remove=True, raw_data=raw_data),
        bulk.next_batch(),
        client_bulk.next_batch(),
        CreateIndexes("db", "c", [IndexModel("x")], raw_data=raw_data),
        DropIndexes("db", "c", "x_1", raw_data=raw_data),
        ListIndexes("db", "c", raw_data=raw_data),
        ListCollections("db", raw_data=raw_data),
    ]


@pytest.mark.parametrize("raw_data", [True, False])
def test_raw_data_is_sent_to_mongodb_8_2_as_given(raw_data: bool) -> None:
    for operation in _raw_data_operations(raw_data):
        assert operation.build(NEW_SERVER).body["rawData"] is raw_data, operation


def test_raw_data_is_left_out_for_servers_before_8_2() -> None:
    for operation in _raw_data_operations(True):
        assert "rawData" not in operation.build(OLD_SERVER).body, operation
        # The operation itself keeps it: a retry on a newer server sends it.
        assert operation.build(NEW_SERVER).body["rawData"] is True, operation


def test_raw_data_is_not_sent_unless_given() -> None:
    for operation in _raw_data_operations(None):
        assert "rawData" not in operation.build(NEW_SERVER).body, operation


def test_raw_data_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="raw_data"):
        Find("db", "c", {}, raw_data=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="raw_data"):
        Insert("db", "c", {}, raw_data="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("code", [11000, 11001, 12582])
def test_a_duplicate_key_from_any_command_is_a_duplicate_key_error(code: int) -> None:
    """As PyMongo raises it: a findAndModify (or createIndexes) failing on a duplicate key is caught by
    ``except DuplicateKeyError``, not only an insert's write error."""
    from mongio.connection.connection import check_command_reply
    from mongio.errors import DuplicateKeyError

    reply = {"ok": 0, "errmsg": "E11000 duplicate key error", "code": code, "codeName": "DuplicateKey"}
    with pytest.raises(DuplicateKeyError) as caught:
        check_command_reply(reply)
    assert caught.value.code == code and caught.value.details == reply


def test_an_undecoded_error_reply_is_decoded_for_the_error() -> None:
    """A raw batch cursor's reply is left as RawBSONDocument; the error it raises carries it as a dict."""
    from mongio.connection.connection import check_command_reply

    reply = {"ok": 0.0, "errmsg": "unknown operator: $bad", "code": 2, "codeName": "BadValue", "n": {"a": 1}}
    with pytest.raises(OperationFailure) as caught:
        check_command_reply(RawBSONDocument(encode(reply)))
    details = caught.value.details
    assert type(details) is dict and details == reply
    assert type(details["n"]) is dict and caught.value.code == 2
