"""Collection-level bulk writes: grouping, splitting at each server limit, reply merging and error remapping."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.bson import decode, encode
from mongio.errors import BulkWriteError, ConfigurationError, DocumentTooLarge, InvalidOperation
from mongio.operations import (
    BulkWrite,
    DeleteMany,
    DeleteOne,
    InsertOne,
    ReplaceOne,
    Retryability,
    ServerLimits,
    UpdateMany,
    UpdateOne,
    WriteBatch,
)
from mongio.operations.base import RESERVED_MESSAGE_BYTES
from mongio.options.write_concern import WriteConcern
from mongio.wire import COMMAND_OVERHEAD, HEADER_SIZE, encode_command
from mongio.wire.op_msg import parse_op_msg

UNACK = WriteConcern(w=0)


def run(
    bulk: BulkWrite, context: ServerLimits, replies: Any = None
) -> list[tuple[WriteBatch, dict[str, Any], list[dict[str, Any]]]]:
    """Drive the bulk write as the executor would; ``replies(command, documents)`` answers each command."""
    sent = []
    while (batch := bulk.next_batch()) is not None:
        command = batch.build(context)
        assert command.sequences is not None
        ((identifier, sequence),) = command.sequences.items()
        # What goes on the wire: the command encoded as the connection encodes it, then parsed back.
        message = encode_command(1, "db", command.body, document_sequences=command.sequences)
        parsed = parse_op_msg(memoryview(message)[HEADER_SIZE:])
        documents = [decode(data) for data in parsed.sequences[identifier]]
        assert [decode(encode(d)) for d in sequence.documents] == documents
        reply = replies(command.body, documents) if replies else {"ok": 1, "n": len(documents)}
        batch.handle_response(reply, context)
        sent.append((batch, command.body, documents))
    return sent


def doc_of_size(size: int, _id: int) -> dict[str, Any]:
    """A document that encodes to exactly ``size`` bytes."""
    base = len(encode({"_id": _id, "s": ""}))
    document = {"_id": _id, "s": "x" * (size - base)}
    assert len(encode(document)) == size
    return document


def test_ordered_groups_consecutive_runs_of_one_kind() -> None:
    requests = [
        InsertOne({"_id": 1}),
        InsertOne({"_id": 2}),
        UpdateOne({"_id": 1}, {"$set": {"x": 1}}),
        DeleteOne({"_id": 2}),
        InsertOne({"_id": 3}),
    ]
    sent = run(BulkWrite("db", "c", requests), ServerLimits())
    assert [next(iter(body)) for _, body, _ in sent] == ["insert", "update", "delete", "insert"]
    assert [len(docs) for _, _, docs in sent] == [2, 1, 1, 1]
    assert sent[0][1] == {"insert": "c", "ordered": True}


def test_unordered_groups_by_kind_inserts_updates_deletes() -> None:
    requests = [
        DeleteOne({"a": 1}),
        InsertOne({"_id": 1}),
        UpdateMany({"a": 1}, {"$set": {"b": 1}}),
        InsertOne({"_id": 2}),
        DeleteMany({}),
    ]
    sent = run(BulkWrite("db", "c", requests, ordered=False), ServerLimits())
    assert [(next(iter(body)), body["ordered"]) for _, body, _ in sent] == [
        ("insert", False),
        ("update", False),
        ("delete", False),
    ]
    assert sent[2][2] == [{"q": {"a": 1}, "limit": 1}, {"q": {}, "limit": 0}]
    assert sent[1][2] == [{"q": {"a": 1}, "u": {"$set": {"b": 1}}, "multi": True}]


def test_split_at_max_write_batch_size() -> None:
    requests = [InsertOne({"_id": i}) for i in range(7)]
    sent = run(BulkWrite("db", "c", requests), ServerLimits(max_write_batch_size=3))
    assert [[d["_id"] for d in docs] for _, _, docs in sent] == [[0, 1, 2], [3, 4, 5], [6]]


def test_an_unacknowledged_document_at_max_bson_size_is_sent_and_one_byte_more_is_refused() -> None:
    limits = ServerLimits(max_bson_size=1000)
    w0 = WriteConcern(w=0)
    sent = run(BulkWrite("db", "c", [InsertOne(doc_of_size(1000, 1))], write_concern=w0), limits)
    assert len(encode(sent[0][2][0])) == 1000
    with pytest.raises(DocumentTooLarge, match=r"maxBsonObjectSize of 1000$"):
        run(BulkWrite("db", "c", [InsertOne(doc_of_size(1001, 1))], write_concern=w0), limits)


def test_an_acknowledged_document_over_max_bson_size_is_the_server_s_to_refuse_up_to_the_overhead() -> None:
    # The server refuses it with a write error of its own, so an unordered bulk still does the rest.
    limits = ServerLimits(max_bson_size=1000)
    sent = run(BulkWrite("db", "c", [InsertOne(doc_of_size(1000 + COMMAND_OVERHEAD, 1))]), limits)
    assert len(encode(sent[0][2][0])) == 1000 + COMMAND_OVERHEAD
    with pytest.raises(DocumentTooLarge, match="plus the 16384 bytes of command overhead"):
        run(BulkWrite("db", "c", [InsertOne(doc_of_size(1001 + COMMAND_OVERHEAD, 1))]), limits)


def test_too_large_document_after_others_sends_them_first() -> None:
    limits = ServerLimits(max_bson_size=1000)
    bulk = BulkWrite(
        "db",
        "c",
        [InsertOne({"_id": 0}), InsertOne({"_id": 1}), InsertOne(doc_of_size(1001 + COMMAND_OVERHEAD, 2))],
    )
    batch = bulk.next_batch()
    assert batch is not None
    command = batch.build(limits)
    assert command.sequences is not None
    assert len(command.sequences["documents"].documents) == 2
    batch.handle_response({"ok": 1, "n": 2}, limits)
    with pytest.raises(DocumentTooLarge, match="document 2 "):
        next_batch = bulk.next_batch()
        assert next_batch is not None
        next_batch.build(limits)


def message_size(batch_command: Any) -> int:
    """The OP_MSG the wire layer would send for a built command (before the executor's fields)."""
    return len(
        encode_command(
            1,
            "db",
            batch_command.body,
            document_sequences=batch_command.sequences,
            max_message_size=1 << 30,
        )
    )


@pytest.mark.parametrize("count", [1, 2, 5])
def test_split_at_max_message_size_counts_the_message_exactly(count: int) -> None:
    documents = [doc_of_size(200, i) for i in range(count + 1)]
    # Measure the message for exactly `count` documents as the wire layer encodes it.
    probe = BulkWrite("db", "c", [InsertOne(dict(d)) for d in documents[:count]])
    probe_batch = probe.next_batch()
    assert probe_batch is not None
    exact = message_size(probe_batch.build(ServerLimits())) + RESERVED_MESSAGE_BYTES

    fits = run(
        BulkWrite("db", "c", [InsertOne(dict(d)) for d in documents]), ServerLimits(max_message_size=exact)
    )
    assert [len(docs) for _, _, docs in fits] == [count, 1]

    smaller = ServerLimits(max_message_size=exact - 1)
    short_bulk = BulkWrite("db", "c", [InsertOne(dict(d)) for d in documents])
    if count == 1:
        first = short_bulk.next_batch()
        assert first is not None
        with pytest.raises(DocumentTooLarge):
            first.build(smaller)
        short: list[Any] = []
    else:
        short = run(short_bulk, smaller)
    if count == 1:
        # Not even one document fits a message one byte smaller.
        assert short == []
    else:
        assert [len(docs) for _, _, docs in short][:1] == [count - 1]


def test_one_document_that_cannot_fit_a_message_is_refused() -> None:
    document = doc_of_size(500, 1)
    with pytest.raises(DocumentTooLarge):
        run(BulkWrite("db", "c", [InsertOne(document)]), ServerLimits(max_message_size=1200))


def test_write_error_indexes_are_remapped_across_batches_and_kinds() -> None:
    requests = [
        InsertOne({"_id": 0}),
        DeleteOne({"_id": 9}),
        InsertOne({"_id": 2}),
        UpdateOne({"_id": 3}, {"$set": {"x": 1}}, upsert=True),
        InsertOne({"_id": 4}),
        InsertOne({"_id": 5}),
    ]

    def replies(body: dict[str, Any], documents: list[dict[str, Any]]) -> dict[str, Any]:
        if "insert" in body and documents[0]["_id"] == 4:
            return {
                "ok": 1,
                "n": 1,
                "writeErrors": [{"index": 1, "code": 11000, "errmsg": "E11000 duplicate key"}],
            }
        if "update" in body:
            return {"ok": 1, "n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": 3}]}
        return {"ok": 1, "n": len(documents)}

    bulk = BulkWrite("db", "c", requests, ordered=False)
    sent = run(bulk, ServerLimits(max_write_batch_size=2), replies)
    # inserts [0, 2], [4, 5]; update [3]; delete [1]
    assert [[r.position for r in batch.requests] for batch, _, _ in sent] == [[0, 2], [4, 5], [3], [1]]
    with pytest.raises(BulkWriteError) as info:
        bulk.result()
    details = info.value.details
    assert details is not None
    assert [error["index"] for error in details["writeErrors"]] == [5]
    assert details["writeErrors"][0]["op"]["_id"] == 5
    assert details["nInserted"] == 3
    assert details["upserted"] == [{"index": 3, "_id": 3}]
    assert details["nUpserted"] == 1 and details["nMatched"] == 0
    assert details["nRemoved"] == 1


def test_ordered_bulk_stops_after_the_batch_with_a_write_error() -> None:
    requests = [InsertOne({"_id": i}) for i in range(5)]

    def replies(body: dict[str, Any], documents: list[dict[str, Any]]) -> dict[str, Any]:
        if documents[0]["_id"] == 2:
            return {"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup"}]}
        return {"ok": 1, "n": len(documents)}

    bulk = BulkWrite("db", "c", requests)
    sent = run(bulk, ServerLimits(max_write_batch_size=2), replies)
    assert len(sent) == 2
    with pytest.raises(BulkWriteError) as info:
        bulk.result()
    assert info.value.details is not None
    assert info.value.details["writeErrors"][0]["index"] == 2
    assert info.value.details["nInserted"] == 2


def test_write_concern_errors_do_not_stop_the_bulk_and_are_raised_at_the_end() -> None:
    requests = [InsertOne({"_id": i}) for i in range(4)]

    def replies(body: dict[str, Any], documents: list[dict[str, Any]]) -> dict[str, Any]:
        return {"ok": 1, "n": len(documents), "writeConcernError": {"code": 64, "errmsg": "waiting"}}

    bulk = BulkWrite("db", "c", requests)
    assert len(run(bulk, ServerLimits(max_write_batch_size=2), replies)) == 2
    with pytest.raises(BulkWriteError) as info:
        bulk.result()
    assert info.value.details is not None
    assert len(info.value.details["writeConcernErrors"]) == 2
    assert info.value.details["nInserted"] == 4


def test_successful_bulk_result_counts() -> None:
    requests = [
        InsertOne({"_id": 1}),
        UpdateOne({"_id": 1}, {"$set": {"a": 1}}),
        ReplaceOne({"_id": 7}, {"a": 2}, upsert=True),
        DeleteMany({}),
    ]

    def replies(body: dict[str, Any], documents: list[dict[str, Any]]) -> dict[str, Any]:
        if "update" in body:
            return {"ok": 1, "n": 2, "nModified": 1, "upserted": [{"index": 1, "_id": 7}]}
        if "delete" in body:
            return {"ok": 1, "n": 2}
        return {"ok": 1, "n": 1}

    bulk = BulkWrite("db", "c", requests)
    run(bulk, ServerLimits(), replies)
    result = bulk.result()
    assert (result.inserted_count, result.matched_count, result.modified_count) == (1, 1, 1)
    assert (result.upserted_count, result.deleted_count) == (1, 2)
    assert result.upserted_ids == {2: 7}


def test_unacknowledged_bulk_result() -> None:
    bulk = BulkWrite("db", "c", [InsertOne({"_id": 1})], write_concern=UNACK)
    run(bulk, ServerLimits(), lambda body, docs: {})
    result = bulk.result()
    assert result.acknowledged is False
    with pytest.raises(InvalidOperation):
        result.inserted_count  # noqa: B018


def test_retryability_per_batch() -> None:
    limits = ServerLimits()
    bulk = BulkWrite("db", "c", [UpdateOne({}, {"$set": {"a": 1}}), UpdateMany({}, {"$set": {"a": 1}})])
    batch = bulk.next_batch()
    assert batch is not None
    batch.build(limits)
    assert batch.retryability is Retryability.NONE

    bulk = BulkWrite("db", "c", [UpdateOne({}, {"$set": {"a": 1}}), DeleteMany({})], ordered=True)
    batch = bulk.next_batch()
    assert batch is not None
    batch.build(limits)
    assert batch.retryability is Retryability.WRITE
    batch.handle_response({"ok": 1, "n": 1, "nModified": 1}, limits)
    second = bulk.next_batch()
    assert second is not None
    second.build(limits)
    assert second.retryability is Retryability.NONE

    unack = BulkWrite("db", "c", [InsertOne({})], write_concern=UNACK).next_batch()
    assert unack is not None
    unack.build(limits)
    assert unack.retryability is Retryability.NONE


def test_a_retried_batch_resends_the_same_statements() -> None:
    bulk = BulkWrite("db", "c", [InsertOne({"_id": i}) for i in range(5)])
    batch = bulk.next_batch()
    assert batch is not None
    first = batch.build(ServerLimits(max_write_batch_size=3))
    again = batch.build(ServerLimits(max_write_batch_size=1))
    assert first.sequences == again.sequences
    assert first.body == again.body and first.body is not again.body


@pytest.mark.parametrize(
    ("model", "wire_version", "refused"),
    [
        (UpdateOne({}, {"$set": {"a": 1}}, hint="a_1"), 7, True),
        (UpdateOne({}, {"$set": {"a": 1}}, hint="a_1"), 8, False),
        (DeleteOne({}, hint={"a": 1}), 8, True),
        (DeleteMany({}, hint={"a": 1}), 9, False),
    ],
)
def test_hint_on_unacknowledged_writes_needs_a_recent_server(
    model: Any, wire_version: int, refused: bool
) -> None:
    batch = BulkWrite("db", "c", [model], ordered=False, write_concern=UNACK).next_batch()
    assert batch is not None
    if refused:
        with pytest.raises(ConfigurationError):
            batch.build(ServerLimits(max_wire_version=wire_version))
    else:
        command = batch.build(ServerLimits(max_wire_version=wire_version))
        assert command.sequences is not None
        assert "hint" in decode(next(iter(command.sequences.values())).encoded_documents()[0])


def test_let_bypass_and_comment_placement() -> None:
    requests = [InsertOne({"_id": 1}), DeleteOne({"_id": 1})]
    sent = run(
        BulkWrite("db", "c", requests, let={"v": 1}, comment="hi", bypass_document_validation=True),
        ServerLimits(),
    )
    assert sent[0][1] == {"insert": "c", "ordered": True, "bypassDocumentValidation": True, "comment": "hi"}
    assert sent[1][1] == {"delete": "c", "ordered": True, "comment": "hi", "let": {"v": 1}}


def test_empty_and_invalid_requests_are_refused() -> None:
    with pytest.raises(InvalidOperation):
        BulkWrite("db", "c", [])
    with pytest.raises(TypeError):
        BulkWrite("db", "c", [{"insertOne": {}}])  # type: ignore[list-item]


def test_insert_many_generates_ids_first_and_in_place() -> None:
    documents: list[dict[str, Any]] = [{"a": 1}, {"_id": 5, "a": 2}]
    bulk = BulkWrite.for_insert_many("db", "c", documents)
    assert bulk.inserted_ids[1] == 5
    assert documents[0]["_id"] == bulk.inserted_ids[0]
    sent = run(bulk, ServerLimits())
    assert next(iter(sent[0][2][0])) == "_id"
    assert sent[0][2][0] == {"_id": bulk.inserted_ids[0], "a": 1}
    with pytest.raises(TypeError):
        BulkWrite.for_insert_many("db", "c", {"a": 1})


def _batch_sizes(bulk: BulkWrite, limits: ServerLimits) -> list[list[dict[str, Any]]]:
    return [documents for _, _, documents in run(bulk, limits)]


@pytest.mark.parametrize(
    "limits",
    [
        ServerLimits(),
        ServerLimits(max_write_batch_size=3),
        ServerLimits(max_message_size=2000 + RESERVED_MESSAGE_BYTES),
        ServerLimits(max_message_size=777 + RESERVED_MESSAGE_BYTES, max_write_batch_size=4),
    ],
)
def test_insert_many_packed_batches_match_the_one_request_per_document_plan(limits: ServerLimits) -> None:
    # Sizes that straddle the limits differently from batch to batch.
    documents = [doc_of_size(60 + (i * 37) % 300, i) for i in range(23)]
    packed = BulkWrite.for_insert_many("db", "c", [dict(d) for d in documents])
    one_by_one = BulkWrite("db", "c", [InsertOne(dict(d)) for d in documents])
    assert _batch_sizes(packed, limits) == _batch_sizes(one_by_one, limits)


def test_insert_many_packed_refuses_a_document_over_max_bson_size_by_its_position() -> None:
    documents = [doc_of_size(100, 0), doc_of_size(100, 1), doc_of_size(1001 + COMMAND_OVERHEAD, 2)]
    bulk = BulkWrite.for_insert_many("db", "c", documents)
    limits = ServerLimits(max_bson_size=1000)
    first = bulk.next_batch()
    assert first is not None
    assert len(first.build(limits).sequences["documents"].documents) == 2  # type: ignore[index]
    first.handle_response({"ok": 1, "n": 2}, limits)
    second = bulk.next_batch()
    assert second is not None
    with pytest.raises(DocumentTooLarge, match=f"document 2 is {1001 + COMMAND_OVERHEAD} bytes"):
        second.build(limits)


def test_insert_many_packed_write_errors_name_the_callers_document() -> None:
    documents = [{"_id": i} for i in range(6)]
    bulk = BulkWrite.for_insert_many("db", "c", documents, ordered=False)

    def replies(command: dict[str, Any], sent: list[dict[str, Any]]) -> dict[str, Any]:
        return {"ok": 1, "n": len(sent) - 1, "writeErrors": [{"index": 1, "code": 11000, "errmsg": "dup"}]}

    run(bulk, ServerLimits(max_write_batch_size=4), replies)
    with pytest.raises(BulkWriteError) as raised:
        bulk.result()
    details = raised.value.details
    assert details is not None
    errors = details["writeErrors"]
    assert [(error["index"], error["op"]) for error in errors] == [(1, {"_id": 1}), (5, {"_id": 5})]
