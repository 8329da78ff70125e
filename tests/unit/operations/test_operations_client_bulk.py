"""Client-level bulkWrite: the command, nsInfo per batch, splitting, result merging and the exception."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.bson import SON, ObjectId, decode, encode
from mongio.bson.errors import InvalidDocument
from mongio.errors import DocumentTooLarge, InvalidOperation, OperationFailure
from mongio.operations import (
    ClientBulkWrite,
    ClientBulkWriteBatch,
    ClientBulkWriteException,
    DeleteMany,
    DeleteOne,
    InsertOne,
    ReplaceOne,
    Retryability,
    ServerLimits,
    UpdateMany,
    UpdateOne,
)
from mongio.operations.base import RESERVED_MESSAGE_BYTES
from mongio.operations.models import (
    KIND_DELETE,
    KIND_INSERT,
    KIND_UPDATE,
    client_bulk_op,
    is_multi,
    model_statement,
    write_kind,
)
from mongio.options.write_concern import WriteConcern


def sent_batches(
    bulk: ClientBulkWrite, context: ServerLimits
) -> list[tuple[ClientBulkWriteBatch, dict[str, Any]]]:
    """Build every batch, answering each with a reply that reports every op as a success."""
    out = []
    while (batch := bulk.next_batch()) is not None:
        command = batch.build(context)
        assert command.sequences is not None
        ops = [decode(data) for data in command.sequences["ops"].encoded_documents()]
        ns_info = [decode(data) for data in command.sequences["nsInfo"].encoded_documents()]
        # What command monitoring shows is what is sent.
        assert [dict(view) for view in command.sequences["ops"].documents] == ops
        assert command.sequences["nsInfo"].documents == ns_info
        body = dict(command.body, ops=ops, nsInfo=ns_info)
        batch.handle_response(
            {
                "ok": 1,
                "nErrors": 0,
                "nInserted": len(ops),
                "cursor": {"id": 0, "ns": "admin.$cmd.bulkWrite", "firstBatch": []},
            },
            context,
        )
        out.append((batch, body))
    return out


def test_command_shape_matches_the_spec_example() -> None:
    models = [
        InsertOne({"_id": 8, "x": 88}, namespace="crud-tests.coll0"),
        UpdateOne({"_id": 1}, {"$inc": {"x": 1}}, namespace="crud-tests.coll0"),
        UpdateMany({"_id": {"$gt": 1}}, {"$inc": {"x": 2}}, namespace="crud-tests.coll0"),
        ReplaceOne({"_id": 4}, {"x": 44}, upsert=True, namespace="crud-tests.coll0"),
        DeleteOne({"_id": 5}, namespace="crud-tests.coll0"),
        DeleteMany({"_id": {"$gt": 5}}, namespace="crud-tests.coll0"),
    ]
    [(_, body)] = sent_batches(ClientBulkWrite(models, verbose_results=True), ServerLimits())
    assert body == {
        "bulkWrite": 1,
        "errorsOnly": False,
        "ordered": True,
        "ops": [
            {"insert": 0, "document": {"_id": 8, "x": 88}},
            {"update": 0, "filter": {"_id": 1}, "updateMods": {"$inc": {"x": 1}}, "multi": False},
            {"update": 0, "filter": {"_id": {"$gt": 1}}, "updateMods": {"$inc": {"x": 2}}, "multi": True},
            {"update": 0, "filter": {"_id": 4}, "updateMods": {"x": 44}, "multi": False, "upsert": True},
            {"delete": 0, "filter": {"_id": 5}, "multi": False},
            {"delete": 0, "filter": {"_id": {"$gt": 5}}, "multi": True},
        ],
        "nsInfo": [{"ns": "crud-tests.coll0"}],
    }


def test_ops_entries_carry_every_option_in_the_order_sent() -> None:
    collation = {"locale": "fr"}
    models = [
        UpdateOne(
            {"a": 1},
            {"$set": {"x.$[e]": 1}},
            upsert=False,
            collation=collation,
            array_filters=[{"e": 1}],
            hint="a_1",
            namespace="db.c",
            sort={"b": -1},
        ),
        ReplaceOne({"a": 2}, {"x": 2}, collation=collation, hint={"a": 1}, namespace="db.c", sort={"b": 1}),
        DeleteMany({"a": 3}, collation=collation, hint="a_1", namespace="db.c"),
    ]
    [(_, body)] = sent_batches(ClientBulkWrite(models), ServerLimits())
    assert [list(op.items()) for op in body["ops"]] == [
        [
            ("update", 0), ("filter", {"a": 1}), ("updateMods", {"$set": {"x.$[e]": 1}}), ("multi", False),
            ("upsert", False), ("arrayFilters", [{"e": 1}]), ("hint", "a_1"), ("collation", collation),
            ("sort", {"b": -1}),
        ],
        [
            ("update", 0), ("filter", {"a": 2}), ("updateMods", {"x": 2}), ("multi", False),
            ("hint", {"a": 1}), ("collation", collation), ("sort", {"b": 1}),
        ],
        [("delete", 0), ("filter", {"a": 3}), ("multi", True), ("hint", "a_1"), ("collation", collation)],
    ]  # fmt: skip


def test_models_give_their_kind_and_multi_and_inserts_have_no_statement() -> None:
    cases = [
        (InsertOne({}), KIND_INSERT, False),
        (UpdateOne({}, {"$set": {"a": 1}}), KIND_UPDATE, False),
        (UpdateMany({}, {"$set": {"a": 1}}), KIND_UPDATE, True),
        (ReplaceOne({}, {}), KIND_UPDATE, False),
        (DeleteOne({}), KIND_DELETE, False),
        (DeleteMany({}), KIND_DELETE, True),
    ]
    assert [(write_kind(model), is_multi(model)) for model, _, _ in cases] == [
        (kind, multi) for _, kind, multi in cases
    ]
    with pytest.raises(TypeError, match="InsertOne has no update or delete statement"):
        client_bulk_op(InsertOne({}), 0)
    with pytest.raises(TypeError, match="InsertOne has no update or delete statement"):
        model_statement(InsertOne({}))


def test_namespace_indexes_are_per_batch() -> None:
    models = [InsertOne({"_id": i}, namespace=f"db.c{i % 3}") for i in range(5)]
    sent = sent_batches(ClientBulkWrite(models), ServerLimits(max_write_batch_size=3))
    first, second = (body for _, body in sent)
    assert first["nsInfo"] == [{"ns": "db.c0"}, {"ns": "db.c1"}, {"ns": "db.c2"}]
    assert [op["insert"] for op in first["ops"]] == [0, 1, 2]
    # The second batch holds c0 and c1 only, numbered from 0 again.
    assert second["nsInfo"] == [{"ns": "db.c0"}, {"ns": "db.c1"}]
    assert [op["insert"] for op in second["ops"]] == [0, 1]
    assert [op["document"]["_id"] for op in second["ops"]] == [3, 4]


def test_split_at_max_message_size_with_the_spec_overhead() -> None:
    models = [InsertOne({"_id": i, "s": "x" * 300}, namespace="db.coll") for i in range(6)]
    bulk = ClientBulkWrite(models)
    op_size = len(encode({"insert": 0, "document": models[0].document}))
    ns_size = len(encode({"ns": "db.coll"}))
    body_size = len(encode(bulk.command_body()))
    # Room for exactly three ops and the one nsInfo entry.
    exact = RESERVED_MESSAGE_BYTES + body_size + 3 * op_size + ns_size
    sent = sent_batches(bulk, ServerLimits(max_message_size=exact))
    assert [len(body["ops"]) for _, body in sent] == [3, 3]
    sent = sent_batches(ClientBulkWrite(models), ServerLimits(max_message_size=exact - 1))
    assert [len(body["ops"]) for _, body in sent] == [2, 2, 2]


def test_no_room_for_one_op_is_a_client_error() -> None:
    bulk = ClientBulkWrite([InsertOne({"s": "x" * 2000}, namespace="db.c")])
    batch = bulk.next_batch()
    assert batch is not None
    with pytest.raises(DocumentTooLarge):
        batch.build(ServerLimits(max_message_size=2500))


def test_split_at_max_write_batch_size() -> None:
    models = [InsertOne({"_id": i}, namespace="db.c") for i in range(5)]
    sent = sent_batches(ClientBulkWrite(models), ServerLimits(max_write_batch_size=2))
    assert [len(body["ops"]) for _, body in sent] == [2, 2, 1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"verbose_results": True, "ordered": False},
            "Cannot request unacknowledged write concern and verbose results",
        ),
        ({}, "Cannot request unacknowledged write concern and ordered writes"),
    ],
)
def test_unacknowledged_refusals(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOperation, match=message):
        ClientBulkWrite([InsertOne({}, namespace="db.c")], write_concern=WriteConcern(w=0), **kwargs)


def test_models_need_a_namespace_and_at_least_one() -> None:
    with pytest.raises(InvalidOperation):
        ClientBulkWrite([InsertOne({})])
    with pytest.raises(InvalidOperation):
        ClientBulkWrite([])


def test_retryability_follows_multi_and_acknowledgement() -> None:
    limits = ServerLimits()
    single = ClientBulkWrite([UpdateOne({}, {"$set": {"a": 1}}, namespace="db.c")]).next_batch()
    assert single is not None
    single.build(limits)
    assert single.retryability is Retryability.WRITE
    multi = ClientBulkWrite([DeleteMany({}, namespace="db.c")]).next_batch()
    assert multi is not None
    multi.build(limits)
    assert multi.retryability is Retryability.NONE
    unack = ClientBulkWrite([InsertOne({}, namespace="db.c")], ordered=False, write_concern=WriteConcern(w=0))
    batch = unack.next_batch()
    assert batch is not None
    batch.build(limits)
    assert batch.retryability is Retryability.NONE
    batch.handle_response({}, limits)
    assert unack.result().acknowledged is False


def _reply(results: list[dict[str, Any]], cursor_id: int = 0, **counts: int) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "ok": 1,
        "cursor": {"id": cursor_id, "ns": "admin.$cmd.bulkWrite", "firstBatch": results},
    }
    reply.update(counts)
    return reply


def test_verbose_results_across_batches_and_get_more() -> None:
    models = [
        InsertOne({"_id": 1}, namespace="db.c"),
        UpdateOne({"_id": 1}, {"$set": {"a": 1}}, namespace="db.c"),
        ReplaceOne({"_id": 9}, {"a": 2}, upsert=True, namespace="db.c"),
        DeleteOne({"_id": 1}, namespace="db.c"),
    ]
    limits = ServerLimits(max_write_batch_size=2)
    bulk = ClientBulkWrite(models, verbose_results=True)
    first = bulk.next_batch()
    assert first is not None
    first.build(limits)
    cursor = first.handle_response(
        _reply([{"ok": 1, "idx": 0, "n": 1}], 77, nInserted=1, nMatched=1, nModified=1, nErrors=0), limits
    )
    assert cursor.id == 77 and cursor.namespace == "admin.$cmd.bulkWrite"
    first.record_results([{"ok": 1, "idx": 1, "n": 1, "nModified": 1}])
    first.cursor_exhausted()
    second = bulk.next_batch()
    assert second is not None
    second.build(limits)
    second.handle_response(
        _reply(
            [
                {"ok": 1, "idx": 0, "n": 1, "nModified": 0, "upserted": {"_id": 9}},
                {"ok": 1, "idx": 1, "n": 1},
            ],
            nUpserted=1,
            nMatched=1,
            nDeleted=1,
            nErrors=0,
        ),
        limits,
    )
    assert bulk.next_batch() is None
    result = bulk.result()
    assert (result.inserted_count, result.matched_count, result.modified_count) == (1, 2, 1)
    assert (result.upserted_count, result.deleted_count) == (1, 1)
    assert result.insert_results[0].inserted_id == 1
    assert result.update_results[1].matched_count == 1 and result.update_results[1].upserted_id is None
    assert result.update_results[2].upserted_id == 9 and result.update_results[2].matched_count == 1
    assert result.delete_results[3].deleted_count == 1


def test_summary_results_have_no_verbose_maps() -> None:
    bulk = ClientBulkWrite([InsertOne({"_id": 1}, namespace="db.c")])
    sent_batches(bulk, ServerLimits())
    result = bulk.result()
    assert result.inserted_count == 1 and result.has_verbose_results is False
    with pytest.raises(InvalidOperation):
        result.insert_results  # noqa: B018


def test_write_errors_are_remapped_and_ordered_stops() -> None:
    models = [InsertOne({"_id": i}, namespace="db.c") for i in range(6)]
    limits = ServerLimits(max_write_batch_size=2)
    bulk = ClientBulkWrite(models)
    first = bulk.next_batch()
    assert first is not None
    first.build(limits)
    first.handle_response(_reply([], nInserted=2, nErrors=0), limits)
    second = bulk.next_batch()
    assert second is not None
    second.build(limits)
    second.handle_response(
        _reply([{"ok": 0, "idx": 1, "code": 11000, "errmsg": "dup"}], nInserted=1, nErrors=1), limits
    )
    assert bulk.next_batch() is None
    with pytest.raises(ClientBulkWriteException) as info:
        bulk.result()
    assert [error["idx"] for error in info.value.write_errors] == [3]
    assert info.value.partial_result is not None
    assert info.value.partial_result.inserted_count == 3


def test_unordered_continues_and_partial_result_only_when_something_succeeded() -> None:
    models = [InsertOne({"_id": 1}, namespace="db.c"), InsertOne({"_id": 1}, namespace="db.c")]
    limits = ServerLimits(max_write_batch_size=1)
    bulk = ClientBulkWrite(models, ordered=False)
    for _ in range(2):
        batch = bulk.next_batch()
        assert batch is not None
        batch.build(limits)
        batch.handle_response(
            _reply([{"ok": 0, "idx": 0, "code": 11000, "errmsg": "dup"}], nErrors=1), limits
        )
    with pytest.raises(ClientBulkWriteException) as info:
        bulk.result()
    assert [error["idx"] for error in info.value.write_errors] == [0, 1]
    assert info.value.partial_result is None


def test_write_concern_errors_collected_per_command() -> None:
    models = [InsertOne({"_id": i}, namespace="db.c") for i in range(2)]
    limits = ServerLimits(max_write_batch_size=1)
    bulk = ClientBulkWrite(models)
    while (batch := bulk.next_batch()) is not None:
        batch.build(limits)
        reply = _reply([], nInserted=1, nErrors=0)
        reply["writeConcernError"] = {"code": 91, "errmsg": "shutting down"}
        batch.handle_response(reply, limits)
    with pytest.raises(ClientBulkWriteException) as info:
        bulk.result()
    assert len(info.value.write_concern_errors) == 2
    assert info.value.partial_result is not None and info.value.partial_result.inserted_count == 2


def test_top_level_error_wraps_only_after_something_was_observed() -> None:
    error = OperationFailure("boom", 8, {"ok": 0, "code": 8})
    fresh = ClientBulkWrite([InsertOne({}, namespace="db.c")])
    with pytest.raises(OperationFailure) as plain:
        fresh.raise_top_level(error)
    assert plain.value is error

    limits = ServerLimits(max_write_batch_size=1)
    bulk = ClientBulkWrite([InsertOne({}, namespace="db.c"), InsertOne({}, namespace="db.c")])
    batch = bulk.next_batch()
    assert batch is not None
    batch.build(limits)
    batch.handle_response(_reply([], nInserted=1, nErrors=0), limits)
    with pytest.raises(ClientBulkWriteException) as wrapped:
        bulk.raise_top_level(error)
    assert wrapped.value.error is error
    assert wrapped.value.partial_result is not None and wrapped.value.partial_result.inserted_count == 1


def test_the_exception_is_an_operation_failure_keeping_the_top_level_labels() -> None:
    # As in PyMongo, ``except OperationFailure`` catches it; code 65 is MultipleErrorsOccurred.
    error = OperationFailure("boom", 91, {"ok": 0, "code": 91, "errorLabels": ["RetryableWriteError"]})
    limits = ServerLimits(max_write_batch_size=1)
    bulk = ClientBulkWrite([InsertOne({}, namespace="db.c"), InsertOne({}, namespace="db.c")])
    batch = bulk.next_batch()
    assert batch is not None
    batch.build(limits)
    batch.handle_response(_reply([{"ok": 0, "idx": 0, "code": 11000, "errmsg": "dup"}], nErrors=1), limits)
    with pytest.raises(OperationFailure) as raised:
        bulk.raise_top_level(error)
    wrapped = raised.value
    assert isinstance(wrapped, ClientBulkWriteException)
    assert wrapped.code == 65
    assert wrapped.has_error_label("RetryableWriteError")
    assert wrapped.details is not None
    assert [item["code"] for item in wrapped.details["writeErrors"]] == [11000]
    assert wrapped.write_errors == wrapped.details["writeErrors"]


# The prose tests of crud/tests/README.md that concern batching, with the server's default limits and the
# commands inspected as built instead of through command monitoring.
DEFAULTS = ServerLimits(
    max_bson_size=16 * 1024 * 1024, max_message_size=48_000_000, max_write_batch_size=100_000
)


def test_prose_3_split_above_max_write_batch_size() -> None:
    limits = ServerLimits(max_write_batch_size=100_000)
    models = [InsertOne({"a": "b"}, namespace="db.coll")] * (limits.max_write_batch_size + 1)
    bulk = ClientBulkWrite(models)
    sizes = []
    while (batch := bulk.next_batch()) is not None:
        command = batch.build(limits)
        assert command.sequences is not None
        sizes.append(len(command.sequences["ops"].encoded_documents()))
        batch.handle_response(_reply([], nInserted=sizes[-1], nErrors=0), limits)
    assert sizes == [limits.max_write_batch_size, 1]
    assert bulk.result().inserted_count == limits.max_write_batch_size + 1


def test_prose_4_split_when_ops_exceed_max_message_size() -> None:
    document = {"a": "b" * (DEFAULTS.max_bson_size - 500)}
    count = DEFAULTS.max_message_size // DEFAULTS.max_bson_size + 1
    bulk = ClientBulkWrite([InsertOne(dict(document), namespace="db.coll") for _ in range(count)])
    sizes = []
    while (batch := bulk.next_batch()) is not None:
        command = batch.build(DEFAULTS)
        assert command.sequences is not None
        sizes.append(len(command.sequences["ops"].encoded_documents()))
        batch.handle_response(_reply([], nInserted=sizes[-1], nErrors=0), DEFAULTS)
    assert sizes == [count - 1, 1]
    assert bulk.result().inserted_count == count


def _prose_11_models() -> list[InsertOne]:
    ops_bytes = DEFAULTS.max_message_size - 1122
    count, remainder = divmod(ops_bytes, DEFAULTS.max_bson_size)
    models = [
        InsertOne({"a": "b" * (DEFAULTS.max_bson_size - 57)}, namespace="db.coll") for _ in range(count)
    ]
    if remainder >= 217:
        models.append(InsertOne({"a": "b" * (remainder - 57)}, namespace="db.coll"))
    return models


def _batches(bulk: ClientBulkWrite) -> list[tuple[int, list[str]]]:
    out = []
    while (batch := bulk.next_batch()) is not None:
        command = batch.build(DEFAULTS)
        assert command.sequences is not None
        namespaces = [decode(data)["ns"] for data in command.sequences["nsInfo"].encoded_documents()]
        out.append((len(command.sequences["ops"].encoded_documents()), namespaces))
        batch.handle_response(_reply([], nErrors=0), DEFAULTS)
    return out


def test_prose_11_same_namespace_needs_no_split() -> None:
    models = _prose_11_models()
    count = len(models)
    models.append(InsertOne({"a": "b"}, namespace="db.coll"))
    assert _batches(ClientBulkWrite(models)) == [(count + 1, ["db.coll"])]


def test_prose_11_new_namespace_splits() -> None:
    models = _prose_11_models()
    count = len(models)
    namespace = "db." + "c" * 200
    models.append(InsertOne({"a": "b"}, namespace=namespace))
    assert _batches(ClientBulkWrite(models)) == [(count, ["db.coll"]), (1, [namespace])]


@pytest.mark.parametrize("large", ["document", "namespace"])
def test_prose_12_no_operation_fits(large: str) -> None:
    if large == "document":
        model = InsertOne({"a": "b" * DEFAULTS.max_message_size}, namespace="db.coll")
    else:
        model = InsertOne({"a": "b"}, namespace="db." + "c" * DEFAULTS.max_message_size)
    bulk = ClientBulkWrite([model])
    batch = bulk.next_batch()
    assert batch is not None
    with pytest.raises(DocumentTooLarge) as info:
        batch.build(DEFAULTS)
    with pytest.raises(DocumentTooLarge):
        bulk.raise_top_level(info.value)


def test_prose_16_generated_ids_come_first() -> None:
    [(_, body)] = sent_batches(ClientBulkWrite([InsertOne({"x": 1}, namespace="db.c")]), ServerLimits())
    assert next(iter(body["ops"][0]["document"])) == "_id"


def test_generated_ids_are_stored_sent_and_reported() -> None:
    documents: list[Any] = [{"x": 1}, SON([("y", 2)]), {"_id": "mine"}]
    models: list[Any] = [InsertOne(document, namespace="db.c") for document in documents]
    models.insert(1, DeleteOne({"x": 1}, namespace="db.other"))
    bulk = ClientBulkWrite(models, verbose_results=True)
    [(_, body)] = sent_batches(bulk, ServerLimits())
    generated = [documents[0]["_id"], documents[1]["_id"]]
    assert all(isinstance(value, ObjectId) for value in generated) and generated[0] != generated[1]
    assert [op.get("document", {}).get("_id") for op in body["ops"]] == [generated[0], None, generated[1], "mine"]
    assert [op.get("insert", op.get("delete")) for op in body["ops"]] == [0, 1, 0, 0]


def test_results_name_each_insert_by_its_id() -> None:
    models = [InsertOne({"n": n}, namespace=f"db.c{n % 2}") for n in range(4)]
    bulk = ClientBulkWrite(models, verbose_results=True)
    batch = bulk.next_batch()
    assert batch is not None
    batch.build(ServerLimits())
    batch.handle_response(
        _reply([{"ok": 1, "idx": n, "n": 1} for n in range(4)], nInserted=4, nErrors=0), ServerLimits()
    )
    result = bulk.result()
    assert {index: r.inserted_id for index, r in result.insert_results.items()} == {
        n: models[n].document["_id"] for n in range(4)
    }


def test_an_unencodable_document_names_its_model_key_before_anything_is_sent() -> None:
    with pytest.raises(InvalidDocument, match="'bad'"):
        ClientBulkWrite([InsertOne({"ok": 1}, namespace="db.c"), InsertOne({"bad": object()}, namespace="db.c")])


def test_renumbered_batches_keep_the_encoded_bytes_of_every_entry() -> None:
    # Batches whose namespaces are not the bulk's first ones rewrite the index in each entry, nothing else.
    models = [
        UpdateOne({"_id": n}, {"$set": {"n": n}}, namespace=f"db.c{n % 3}") if n % 2 else
        InsertOne({"_id": n, "s": "x" * n}, namespace=f"db.c{n % 3}")
        for n in range(9)
    ]
    sent = sent_batches(ClientBulkWrite(models), ServerLimits(max_write_batch_size=2))
    for position, (_, body) in enumerate(sent):
        namespaces = [entry["ns"] for entry in body["nsInfo"]]
        for offset, op in enumerate(body["ops"]):
            n = 2 * position + offset
            kind = "update" if n % 2 else "insert"
            assert namespaces[op[kind]] == f"db.c{n % 3}"
            if kind == "insert":
                assert op["document"] == {"_id": n, "s": "x" * n}
            else:
                assert op["filter"] == {"_id": n}


# -- a retryable write concern error on the batch's retry too ---------------------------------------------------


def _client_over(replies: list[Any]) -> tuple[Any, Any]:
    """A MongoClient whose executor talks to one fake primary answering ``replies`` in turn."""
    from mongio.client import MongoClient
    from mongio.events.command import CommandPublisher
    from mongio.execution.executor import Executor
    from mongio.execution.retry_policy import RetryOptions
    from tests.support.scripted_executor import make_executor

    _, topology, _, conn = make_executor(replies)
    # getMore and killCursors go to the server that answered; the fake topology has only that one.
    topology.get_server = lambda address: topology.server  # type: ignore[attr-defined]
    client = MongoClient("mongodb://fake.example:27017", connect=False)

    async def open_topology() -> Any:
        return topology

    client.open_topology = open_topology  # type: ignore[method-assign]
    executor = Executor(client, retry_options=RetryOptions(), publisher=CommandPublisher())
    executor.attach(topology)  # type: ignore[arg-type]
    client._executor = executor
    return client, conn


async def test_a_write_concern_error_on_the_retry_too_is_collected_and_its_cursor_drained() -> None:
    concern = {"code": 91, "errmsg": "Replication is being shut down"}
    # Each reply leaves its results on the server: the retry's come with a getMore, the replaced reply's
    # cursor is killed.
    first = {
        **_reply([], cursor_id=41, nInserted=1, nErrors=0),
        "writeConcernError": concern,
        "errorLabels": ["RetryableWriteError"],
    }
    retried = {**_reply([], cursor_id=42, nInserted=1, nErrors=0), "writeConcernError": concern}
    retried["errorLabels"] = ["RetryableWriteError"]
    more = {"ok": 1, "cursor": {"id": 0, "ns": "admin.$cmd.bulkWrite", "nextBatch": [{"ok": 1, "idx": 0, "n": 1}]}}
    client, conn = _client_over([first, retried, more, {"ok": 1, "cursorsKilled": [41]}])
    with pytest.raises(ClientBulkWriteException) as info:
        await client.bulk_write([InsertOne({"_id": 1}, namespace="db.c")], verbose_results=True)
    assert info.value.error is None
    assert [error["code"] for error in info.value.write_concern_errors] == [91]
    partial = info.value.partial_result
    assert partial is not None and partial.inserted_count == 1
    assert list(partial.insert_results) == [0]
    commands = [next(iter(body)) for body in conn.sent]
    assert commands == ["bulkWrite", "bulkWrite", "getMore", "killCursors"]
    assert conn.sent[0]["txnNumber"] == conn.sent[1]["txnNumber"]
    assert conn.sent[2]["getMore"] == 42
    assert conn.sent[3]["cursors"] == [41]


async def test_the_cursor_of_a_reply_a_successful_retry_replaced_is_killed() -> None:
    replaced = {
        **_reply([], cursor_id=41, nInserted=1, nErrors=0),
        "writeConcernError": {"code": 91, "errmsg": "Replication is being shut down"},
        "errorLabels": ["RetryableWriteError"],
    }
    client, conn = _client_over(
        [replaced, _reply([{"ok": 1, "idx": 0, "n": 1}], nInserted=1, nErrors=0), {"ok": 1}]
    )
    result = await client.bulk_write([InsertOne({"_id": 1}, namespace="db.c")])
    assert result.inserted_count == 1
    assert [next(iter(body)) for body in conn.sent] == ["bulkWrite", "bulkWrite", "killCursors"]
    assert conn.sent[2]["cursors"] == [41]
