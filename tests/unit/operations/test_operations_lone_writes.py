"""The single-statement writes (``update_one``, ``update_many``, ``replace_one``, ``delete_one``,
``delete_many``): made straight from the arguments, they send what the same write sent as a bulk write's batch
sends, check the arguments as the write models do, and handle the reply as before."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.bson import decode
from mongio.errors import (
    ConfigurationError,
    DocumentTooLarge,
    DuplicateKeyError,
    InvalidDocument,
    WriteConcernError,
    WriteError,
)
from mongio.operations import (
    DeleteMany,
    DeleteOne,
    ReplaceOne,
    Retryability,
    ServerLimits,
    UpdateMany,
    UpdateOne,
)
from mongio.operations.bulk import BulkWrite
from mongio.operations.crud import Delete, Update
from mongio.operations.models import (
    delete_statement,
    model_statement,
    update_statement,
    validate_replacement,
    validate_update,
)
from mongio.options.write_concern import WriteConcern
from mongio.wire import COMMAND_OVERHEAD

LIMITS = ServerLimits()
UNACK = WriteConcern(w=0)


def sent(operation: Any, context: Any = LIMITS) -> tuple[list[tuple[str, Any]], dict[str, list[bytes]]]:
    """The body's fields in order and each sequence's encoded documents, as one build sends them."""
    command = operation.build(context)
    sequences = {
        identifier: [bytes(document) for document in sequence.encoded_documents()]
        for identifier, sequence in (command.sequences or {}).items()
    }
    return list(command.body.items()), sequences


UPDATE_CASES: list[tuple[str, dict[str, Any]]] = [
    ("one", {"filter": {"a": 1}, "update": {"$set": {"b": 1}}}),
    (
        "one",
        {
            "filter": {"a": 1},
            "update": [{"$set": {"b": 1}}],
            "upsert": True,
            "collation": {"locale": "fr"},
            "array_filters": [{"x.y": 1}],
            "hint": [("a", 1)],
            "sort": {"a": -1},
        },
    ),
    ("one", {"filter": {}, "update": {"$inc": {"n": 1}}, "upsert": False, "hint": "a_1"}),
    ("many", {"filter": {"a": {"$gt": 1}}, "update": {"$set": {"b": 1}}, "array_filters": [{"i": 0}]}),
    ("many", {"filter": {}, "update": [{"$unset": "x"}], "upsert": True, "collation": {"locale": "en"}}),
    ("replace", {"filter": {"_id": 1}, "update": {"x": 1}}),
    ("replace", {"filter": {"_id": 1}, "update": {}, "upsert": True, "hint": {"_id": 1}, "sort": [("a", 1)]}),
]


def _model(kind: str, arguments: dict[str, Any]) -> UpdateOne | UpdateMany | ReplaceOne:
    given = dict(arguments)
    filter, update = given.pop("filter"), given.pop("update")
    if kind == "one":
        return UpdateOne(filter, update, **given)
    if kind == "many":
        return UpdateMany(filter, update, **given)
    return ReplaceOne(filter, update, **given)


def _statement(kind: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The statement as the collection methods make it (``upsert=False`` arrives as None, as they pass it)."""
    given = dict(arguments)
    checked = validate_replacement(given["update"]) if kind == "replace" else validate_update(given["update"])
    return update_statement(
        given["filter"],
        checked,
        given.get("upsert") or None,
        given.get("collation"),
        given.get("array_filters"),
        given.get("hint"),
        given.get("sort"),
        multi=None if kind == "replace" else kind == "many",
    )


@pytest.mark.parametrize(("kind", "arguments"), UPDATE_CASES)
def test_an_update_sends_what_the_same_update_sends_in_a_bulk_write(kind: str, arguments: dict[str, Any]) -> None:
    options: dict[str, Any] = {"bypass_document_validation": True, "comment": {"c": 1}, "let": {"v": 2}, "raw_data": True}
    lone = Update("db", "c", _statement(kind, arguments), **options)
    model = _model(kind, {**arguments, "upsert": arguments.get("upsert") or None})
    batch = BulkWrite("db", "c", [model], **options).next_batch()
    assert batch is not None
    new_server = ServerLimits(max_wire_version=27)
    assert sent(lone, new_server) == sent(batch, new_server)
    assert sent(lone) == sent(batch)  # rawData left out for an older server, as the batch leaves it out
    # The statement made from the arguments is the model's, field for field and in order.
    shown = (lone.build(LIMITS).sequences or {})["updates"].documents  # what command monitoring shows
    assert [list(document.items()) for document in shown] == [list(model_statement(model).items())]
    # An update given as its model sends the same command.
    assert sent(Update("db", "c", model, **options)) == sent(lone)


@pytest.mark.parametrize(
    ("multi", "arguments"),
    [
        (False, {"filter": {"a": 1}}),
        (False, {"filter": {"a": 1}, "collation": {"locale": "fr"}, "hint": "a_1"}),
        (True, {"filter": {}, "hint": [("a", -1)]}),
    ],
)
def test_a_delete_sends_what_the_same_delete_sends_in_a_bulk_write(multi: bool, arguments: dict[str, Any]) -> None:
    statement = delete_statement(arguments["filter"], arguments.get("collation"), arguments.get("hint"), multi=multi)
    lone = Delete("db", "c", statement, comment="x", let={"v": 1})
    model = (DeleteMany if multi else DeleteOne)(arguments["filter"], arguments.get("collation"), arguments.get("hint"))
    batch = BulkWrite("db", "c", [model], comment="x", let={"v": 1}).next_batch()
    assert batch is not None
    assert sent(lone) == sent(batch)
    assert sent(Delete("db", "c", model, comment="x", let={"v": 1})) == sent(lone)


def _error(make: Any) -> tuple[type[BaseException], str]:
    with pytest.raises(Exception) as caught:
        make()
    return type(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("model", "statement"),
    [
        (lambda: UpdateOne({}, {}), lambda: update_statement({}, validate_update({}), None, None, None, None, None, multi=False)),
        (lambda: UpdateOne({}, {"b": 1}), lambda: update_statement({}, validate_update({"b": 1}), None, None, None, None, None, multi=False)),
        (lambda: UpdateMany({}, []), lambda: update_statement({}, validate_update([]), None, None, None, None, None, multi=True)),
        (lambda: UpdateOne({}, "x"), lambda: update_statement({}, validate_update("x"), None, None, None, None, None, multi=False)),
        (lambda: ReplaceOne({}, {"$set": {"b": 1}}), lambda: update_statement({}, validate_replacement({"$set": {"b": 1}}), None, None, None, None, None, multi=False)),
        (lambda: ReplaceOne({}, [{"$set": {}}]), lambda: update_statement({}, validate_replacement([{"$set": {}}]), None, None, None, None, None, multi=False)),
        # A bad update and a bad filter: the update is checked first, as the models check it.
        (lambda: UpdateOne([], {}), lambda: update_statement([], validate_update({}), None, None, None, None, None, multi=False)),
        (lambda: UpdateOne([], {"$set": {}}), lambda: update_statement([], validate_update({"$set": {}}), None, None, None, None, None, multi=False)),
        (lambda: UpdateOne({}, {"$set": {}}, collation=5, hint=5), lambda: update_statement({}, {"$set": {}}, None, 5, None, 5, None, multi=False)),
        (lambda: UpdateOne({}, {"$set": {}}, hint=5, upsert="yes"), lambda: update_statement({}, {"$set": {}}, "yes", None, None, 5, None, multi=False)),  # type: ignore[arg-type]
        (lambda: UpdateOne({}, {"$set": {}}, upsert="yes", array_filters={"x": 1}), lambda: update_statement({}, {"$set": {}}, "yes", None, {"x": 1}, None, None, multi=False)),  # type: ignore[arg-type]
        (lambda: UpdateOne({}, {"$set": {}}, array_filters={"x": 1}, sort=5), lambda: update_statement({}, {"$set": {}}, None, None, {"x": 1}, None, 5, multi=False)),
        (lambda: UpdateOne({}, {"$set": {}}, sort=[]), lambda: update_statement({}, {"$set": {}}, None, None, None, None, [], multi=False)),
        (lambda: DeleteOne("x"), lambda: delete_statement("x", None, None, multi=False)),
        (lambda: DeleteMany({}, collation="fr", hint=5), lambda: delete_statement({}, "fr", 5, multi=True)),
        (lambda: DeleteOne({}, hint={}), lambda: delete_statement({}, None, {}, multi=False)),
    ],
)  # fmt: skip
def test_arguments_are_refused_as_the_models_refuse_them(model: Any, statement: Any) -> None:
    assert _error(statement) == _error(model)


async def test_the_collection_methods_refuse_bad_arguments_before_sending() -> None:
    from tests.support.fake_client import make_collection

    _, recorder, coll = make_collection()
    with pytest.raises(ValueError, match="update cannot be empty"):
        await coll.update_one({}, {})
    with pytest.raises(ValueError, match=r"update only works with \$ operators"):
        await coll.update_many({}, {"x": 1})
    with pytest.raises(ValueError, match=r"replacement can not include \$ operators"):
        await coll.replace_one({}, {"$set": {"x": 1}})
    with pytest.raises(TypeError, match="filter must be a mapping"):
        await coll.delete_one(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="upsert must be True, False or None"):
        await coll.update_one({}, {"$set": {"x": 1}}, upsert="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidDocument):
        await coll.update_one({}, {"$set": {"x": object()}})
    assert recorder.bodies == []


def test_retryability_and_acknowledgement() -> None:
    one = Update("db", "c", UpdateOne({}, {"$set": {"a": 1}}))
    many = Update("db", "c", UpdateMany({}, {"$set": {"a": 1}}))
    assert (one.retryability, one.acknowledged) == (Retryability.WRITE, True)
    assert (many.retryability, many.acknowledged) == (Retryability.NONE, True)
    assert Delete("db", "c", DeleteOne({})).retryability is Retryability.WRITE
    assert Delete("db", "c", DeleteMany({})).retryability is Retryability.NONE
    unacknowledged = Delete("db", "c", DeleteOne({}), write_concern=UNACK)
    assert (unacknowledged.retryability, unacknowledged.acknowledged) == (Retryability.NONE, False)
    # Inside a transaction the write is acknowledged; a multi-document statement is still not retryable.
    unacknowledged.use_transaction_write_concern()
    assert (unacknowledged.retryability, unacknowledged.acknowledged) == (Retryability.WRITE, True)
    unacknowledged_many = Update("db", "c", UpdateMany({}, {"$set": {"a": 1}}), write_concern=UNACK)
    unacknowledged_many.use_transaction_write_concern()
    assert (unacknowledged_many.retryability, unacknowledged_many.acknowledged) == (Retryability.NONE, True)
    assert unacknowledged_many.write_concern is None


def test_every_build_is_a_fresh_body_over_the_same_statement() -> None:
    op = Update("db", "c", UpdateOne({"a": 1}, {"$set": {"b": 1}}), comment="x")
    first, second = op.build(LIMITS), op.build(LIMITS)
    first.body["txnNumber"] = 1  # what the executor adds to one attempt's body
    assert first.body is not second.body and "txnNumber" not in second.body
    assert second.body == {"update": "c", "ordered": True, "comment": "x"}
    assert first.sequences is second.sequences  # a retry resends the very same statement


def test_a_statement_over_the_connections_limits_is_refused_at_build() -> None:
    op = Update("db", "c", ReplaceOne({"_id": 1}, {"s": "x" * 100}))
    size = len(bytes(op.build(LIMITS).sequences["updates"].encoded_documents()[0]))  # type: ignore[index]
    op.build(ServerLimits(max_bson_size=size - COMMAND_OVERHEAD))
    with pytest.raises(DocumentTooLarge, match=f"update document 0 is {size} bytes"):
        op.build(ServerLimits(max_bson_size=size - COMMAND_OVERHEAD - 1))
    unacknowledged = Update("db", "c", ReplaceOne({"_id": 1}, {"s": "x" * 100}), write_concern=WriteConcern(w=0))
    unacknowledged.build(ServerLimits(max_bson_size=size))
    with pytest.raises(DocumentTooLarge, match=f"update document 0 is {size} bytes"):
        unacknowledged.build(ServerLimits(max_bson_size=size - 1))
    with pytest.raises(DocumentTooLarge, match=r"delete document 0 of .* does not fit in one message"):
        Delete("db", "c", DeleteOne({"s": "x" * 2000})).build(ServerLimits(max_message_size=2000))


def test_a_hint_on_an_unacknowledged_write_needs_a_server_that_honours_it() -> None:
    update = Update("db", "c", UpdateOne({}, {"$set": {"a": 1}}, hint="a_1"), write_concern=UNACK)
    with pytest.raises(ConfigurationError, match=r"hint on an unacknowledged update needs a newer server \(wire version 8\+"):
        update.build(ServerLimits(max_wire_version=7))
    update.build(ServerLimits(max_wire_version=8))
    delete = Delete("db", "c", DeleteMany({}, hint="a_1"), write_concern=UNACK)
    with pytest.raises(ConfigurationError, match=r"unacknowledged delete needs a newer server \(wire version 9\+"):
        delete.build(ServerLimits(max_wire_version=8))
    # Acknowledged, or without a hint: no such rule.
    Update("db", "c", UpdateOne({}, {"$set": {"a": 1}}, hint="a_1")).build(ServerLimits(max_wire_version=7))
    Delete("db", "c", DeleteOne({}), write_concern=UNACK).build(ServerLimits(max_wire_version=7))


def test_a_reply_without_error_fields_makes_the_result_directly() -> None:
    update = Update("db", "c", UpdateOne({}, {"$set": {"a": 1}}))
    # A reply without counts (a responder answering ok alone) is still a result.
    bare = update.handle_response({"ok": 1}, LIMITS)
    assert (bare.matched_count, bare.modified_count, bare.upserted_id, bare.did_upsert) == (0, 0, None, False)
    assert bare.raw_result == {"ok": 1, "updatedExisting": False}
    # Error fields present but empty report nothing, as before.
    quiet = update.handle_response({"ok": 1, "n": 1, "nModified": 1, "writeErrors": []}, LIMITS)
    assert (quiet.matched_count, quiet.modified_count) == (1, 1)
    assert Delete("db", "c", DeleteOne({})).handle_response({"ok": 1}, LIMITS).deleted_count == 0


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ({"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup"}]}, DuplicateKeyError),
        ({"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 121, "errmsg": "invalid"}]}, WriteError),
        ({"ok": 1, "n": 1, "writeConcernError": {"code": 64, "errmsg": "waiting"}}, WriteConcernError),
    ],
)
def test_write_errors_and_write_concern_errors_are_raised(reply: dict[str, Any], error: type[Exception]) -> None:
    for operation in (
        Update("db", "c", UpdateOne({}, {"$set": {"a": 1}})),
        Update("db", "c", ReplaceOne({}, {"a": 1})),
        Delete("db", "c", DeleteMany({})),
    ):
        with pytest.raises(error) as caught:
            operation.handle_response(reply, LIMITS)
        assert type(caught.value) is error
    # Unacknowledged: the executor hands over {} and nothing is checked.
    assert not Update("db", "c", UpdateOne({}, {"$set": {"a": 1}}), write_concern=UNACK).handle_response(
        {}, LIMITS
    ).acknowledged


def test_upsert_result_keeps_the_server_reply_untouched() -> None:
    reply = {"ok": 1, "n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": "new"}]}
    result = Update("db", "c", ReplaceOne({"_id": "new"}, {"a": 1}, upsert=True)).handle_response(reply, LIMITS)
    assert (result.upserted_id, result.did_upsert, result.matched_count) == ("new", True, 0)
    assert reply["upserted"] == [{"index": 0, "_id": "new"}]
    assert decode(bytes(Update("db", "c", ReplaceOne({}, {"a": 1})).build(LIMITS).sequences["updates"].encoded_documents()[0])) == {  # type: ignore[index]
        "q": {},
        "u": {"a": 1},
    }


async def test_the_collection_methods_send_what_bulk_write_sends_for_the_same_write() -> None:
    from tests.support.fake_client import make_collection

    client, recorder, coll = make_collection()
    options: dict[str, Any] = {"let": {"v": 1}, "comment": "c"}
    await coll.update_one({"a": 1}, {"$set": {"b": 1}}, upsert=True, hint="a_1", sort={"a": 1}, **options)
    await coll.bulk_write([UpdateOne({"a": 1}, {"$set": {"b": 1}}, upsert=True, hint="a_1", sort={"a": 1})], **options)
    await coll.update_many({}, [{"$set": {"b": 1}}], array_filters=[{"i": 1}], collation={"locale": "fr"}, **options)
    await coll.bulk_write([UpdateMany({}, [{"$set": {"b": 1}}], array_filters=[{"i": 1}], collation={"locale": "fr"})], **options)
    await coll.replace_one({"_id": 1}, {"x": 1}, bypass_document_validation=False, **options)
    await coll.bulk_write([ReplaceOne({"_id": 1}, {"x": 1})], bypass_document_validation=False, **options)
    await coll.delete_one({"a": 1}, hint={"a": 1}, **options)
    await coll.bulk_write([DeleteOne({"a": 1}, hint={"a": 1})], **options)
    await coll.delete_many({"a": 1}, collation={"locale": "fr"}, **options)
    await coll.bulk_write([DeleteMany({"a": 1}, collation={"locale": "fr"})], **options)
    await coll.with_options(write_concern=UNACK).update_one({"a": 1}, {"$set": {"b": 1}})
    await coll.with_options(write_concern=UNACK).bulk_write([UpdateOne({"a": 1}, {"$set": {"b": 1}})])
    await coll.with_options(write_concern=UNACK).delete_many({})
    await coll.with_options(write_concern=UNACK).bulk_write([DeleteMany({})])
    calls = client._executor.calls
    assert len(calls) == 14
    for single, bulk in zip(calls[::2], calls[1::2], strict=True):
        assert [(key, list(value.items()) if isinstance(value, dict) else value) for key, value in single.body.items()] == [
            (key, list(value.items()) if isinstance(value, dict) else value) for key, value in bulk.body.items()
        ]
        assert [list(statement.items()) for statement in single.body[single.name + "s"]] == [
            list(statement.items()) for statement in bulk.body[bulk.name + "s"]
        ]
        assert single.operation.write_concern == bulk.operation.write_concern
    assert recorder.bodies[0]["updates"][0]["upsert"] is True
