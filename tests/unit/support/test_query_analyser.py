"""The stand-in query analyser's marking logic (tests/support/query_analyser.py), without a socket: a schema and
a command in, mongocryptd's answer out."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from mongio.bson import decode
from mongio.bson.binary import Binary
from mongio.bson.int64 import Int64
from mongio.bson.timestamp import Timestamp
from tests.support.query_analyser import (
    DETERMINISTIC,
    RANDOM,
    UNSUPPORTED_PREFIX,
    AnalysisError,
    UnsupportedConstruct,
    analyse,
    bson_type_name,
    marking,
    parse_schema,
)

KEY = Binary(uuid.UUID("12345678-1234-9876-1234-123456789012").bytes, 4)
OTHER_KEY = Binary(uuid.UUID(int=7).bytes, 4)


def encrypt(algorithm: str = DETERMINISTIC, key: Any = None, bson_type: str | None = "string") -> dict[str, Any]:
    spec: dict[str, Any] = {"keyId": [KEY] if key is None else key, "algorithm": algorithm}
    if bson_type is not None:
        spec["bsonType"] = bson_type
    return {"encrypt": spec}


SCHEMA: dict[str, Any] = {
    "bsonType": "object",
    "properties": {
        "ssn": encrypt(),
        "notes": encrypt(RANDOM, bson_type=None),
        "by_name": encrypt(RANDOM, key="/owner"),
        "address": {
            "bsonType": "object",
            "encryptMetadata": {"keyId": [OTHER_KEY], "algorithm": RANDOM},
            "properties": {
                "street": {"encrypt": {"bsonType": "string"}},
                "zip": {"encrypt": {"algorithm": DETERMINISTIC, "bsonType": "string"}},
            },
        },
    },
}


def run(command: dict[str, Any], schema: dict[str, Any] | None = None, *, remote: bool = False) -> dict[str, Any]:
    return analyse({**command, "jsonSchema": SCHEMA if schema is None else schema, "isRemoteSchema": remote})


def unmark(value: Any) -> dict[str, Any]:
    """The document inside a marking, after checking it is one."""
    assert isinstance(value, Binary) and value.subtype == 6, value
    assert value[0] == 0, "an intent-to-encrypt marking starts with byte 0"
    document: dict[str, Any] = decode(bytes(value[1:]))
    return document


def test_a_marking_holds_the_value_the_algorithm_and_exactly_one_key_reference() -> None:
    assert unmark(marking(Int64(5), DETERMINISTIC, key_id=KEY)) == {"a": 1, "ki": KEY, "v": Int64(5)}
    assert unmark(marking("x", RANDOM, key_alt_name="name")) == {"a": 2, "ka": "name", "v": "x"}
    with pytest.raises(ValueError, match="exactly one"):
        marking("x", RANDOM, key_id=KEY, key_alt_name="name")


def test_insert_marks_each_encrypted_field_and_leaves_the_rest() -> None:
    document = {"_id": 1, "ssn": "457-55-5642", "notes": ["a", 1], "name": "Ada", "owner": "ada-key"}
    reply = run({"insert": "people", "documents": [document], "ordered": True, "$db": "db"})
    assert reply["ok"] == 1 and reply["hasEncryptedPlaceholders"] and reply["schemaRequiresEncryption"]
    result = reply["result"]
    assert set(result) == {"insert", "documents", "ordered"}, "the schema and $db are not in the result"
    marked = result["documents"][0]
    assert marked["_id"] == 1 and marked["name"] == "Ada" and marked["owner"] == "ada-key"
    assert unmark(marked["ssn"]) == {"a": 1, "ki": KEY, "v": "457-55-5642"}
    assert unmark(marked["notes"]) == {"a": 2, "ki": KEY, "v": ["a", 1]}


def test_a_json_pointer_key_id_becomes_the_key_alt_name_found_in_the_document() -> None:
    reply = run({"insert": "people", "documents": [{"by_name": "secret", "owner": "ada-key"}]})
    assert unmark(reply["result"]["documents"][0]["by_name"]) == {"a": 2, "ka": "ada-key", "v": "secret"}
    with pytest.raises(AnalysisError, match="points to no field"):
        run({"insert": "people", "documents": [{"by_name": "secret"}]})
    with pytest.raises(AnalysisError, match="must point to a string"):
        run({"insert": "people", "documents": [{"by_name": "secret", "owner": 3}]})


def test_nested_fields_inherit_key_and_algorithm_from_the_nearest_encrypt_metadata() -> None:
    document = {"address": {"street": "1 Main St", "zip": "12345", "city": "Springfield"}}
    marked = run({"insert": "people", "documents": [document]})["result"]["documents"][0]["address"]
    assert unmark(marked["street"]) == {"a": 2, "ki": OTHER_KEY, "v": "1 Main St"}
    assert unmark(marked["zip"]) == {"a": 1, "ki": OTHER_KEY, "v": "12345"}
    assert marked["city"] == "Springfield"


def test_equality_filters_on_deterministic_fields_are_marked() -> None:
    command = {
        "find": "people",
        "filter": {"$or": [{"ssn": "1"}, {"ssn": {"$in": ["2", "3"]}}, {"ssn": {"$ne": "4"}}], "name": "Ada"},
    }
    result = run(command)["result"]
    first, within, unequal = result["filter"]["$or"]
    assert unmark(first["ssn"]["$eq"])["v"] == "1"
    assert [unmark(item)["v"] for item in within["ssn"]["$in"]] == ["2", "3"]
    assert unmark(unequal["ssn"]["$ne"])["v"] == "4"
    assert result["filter"]["name"] == "Ada"
    dotted = run({"find": "people", "filter": {"address.zip": "12345"}})["result"]["filter"]
    assert unmark(dotted["address.zip"]["$eq"]) == {"a": 1, "ki": OTHER_KEY, "v": "12345"}


def test_aggregate_match_count_distinct_and_delete_filters_are_marked() -> None:
    pipeline = [{"$match": {"ssn": "1"}}, {"$limit": 1}]
    marked = run({"aggregate": "people", "pipeline": pipeline, "cursor": {}})["result"]["pipeline"]
    assert unmark(marked[0]["$match"]["ssn"]["$eq"])["v"] == "1" and marked[1] == {"$limit": 1}
    assert unmark(run({"count": "people", "query": {"ssn": "2"}})["result"]["query"]["ssn"]["$eq"])["v"] == "2"
    distinct = run({"distinct": "people", "key": "ssn", "query": {"ssn": "3"}})["result"]
    assert distinct["key"] == "ssn" and unmark(distinct["query"]["ssn"]["$eq"])["v"] == "3"
    deletes = run({"delete": "people", "deletes": [{"q": {"ssn": "4"}, "limit": 1}]})["result"]["deletes"]
    assert deletes[0]["limit"] == 1 and unmark(deletes[0]["q"]["ssn"]["$eq"])["v"] == "4"


def test_updates_mark_set_values_and_replacements() -> None:
    command = {
        "update": "people",
        "updates": [
            {"q": {"ssn": "1"}, "u": {"$set": {"ssn": "2", "address.zip": "3", "name": "x"}, "$unset": {"notes": ""}}},
            {"q": {}, "u": {"ssn": "4", "name": "y"}, "upsert": True},
        ],
    }
    first, second = run(command)["result"]["updates"]
    assert unmark(first["q"]["ssn"]["$eq"])["v"] == "1"
    assert unmark(first["u"]["$set"]["ssn"])["v"] == "2"
    assert unmark(first["u"]["$set"]["address.zip"])["ki"] == OTHER_KEY
    assert first["u"]["$set"]["name"] == "x" and first["u"]["$unset"] == {"notes": ""}
    assert unmark(second["u"]["ssn"])["v"] == "4" and second["upsert"] is True
    modified = run({"findAndModify": "people", "query": {"ssn": "5"}, "update": {"$set": {"ssn": "6"}}})["result"]
    assert unmark(modified["query"]["ssn"]["$eq"])["v"] == "5" and unmark(modified["update"]["$set"]["ssn"])["v"] == "6"


def test_explain_marks_the_explained_command() -> None:
    result = run({"explain": {"find": "people", "filter": {"ssn": "1"}, "$db": "db"}, "verbosity": "queryPlanner"})
    explained = result["result"]["explain"]
    assert "$db" not in explained and unmark(explained["filter"]["ssn"]["$eq"])["v"] == "1"


def test_nothing_to_mark_answers_without_placeholders() -> None:
    reply = run({"find": "people", "filter": {"name": "Ada"}})
    assert reply["hasEncryptedPlaceholders"] is False and reply["schemaRequiresEncryption"] is True
    unencrypted = analyse({"insert": "c", "documents": [{"x": 1}], "jsonSchema": {}, "isRemoteSchema": True})
    assert unencrypted["schemaRequiresEncryption"] is False
    assert unencrypted["result"] == {"insert": "c", "documents": [{"x": 1}]}


@pytest.mark.parametrize(
    ("filter_", "message"),
    [
        ({"ssn": {"$gt": "1"}}, "Invalid match expression operator on encrypted field 'ssn': $gt"),
        ({"ssn": {"$regex": "^1"}}, "Invalid match expression operator on encrypted field"),
        ({"ssn": None}, "Illegal equality to null predicate for encrypted field"),
        ({"ssn": {"$in": [None]}}, "Illegal equality to null inside $in against an encrypted field"),
        ({"notes": "x"}, "randomized encryption algorithm"),
        ({"$where": "true"}, "Unsupported match expression operator for encryption: $where"),
        ({"ssn": 5}, "Cannot encrypt element of type int because schema requires that type is one of: [ string ]"),
    ],
)
def test_queries_the_analysis_refuses_name_the_problem(filter_: dict[str, Any], message: str) -> None:
    with pytest.raises(AnalysisError) as caught:
        run({"find": "people", "filter": filter_})
    assert message in str(caught.value)
    assert caught.value.reply()["ok"] == 0 and message in caught.value.reply()["errmsg"]


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"$inc": {"ssn": 1}}, "$inc and $mul not allowed on encrypted values"),
        ({"$push": {"ssn": "1"}}, "$push not allowed on encrypted values"),
        ({"$set": {"ssn.$": "1"}}, "Cannot encrypt fields below '$' positional update operator"),
        ({"$set": {"ssn.$[i].x": 1}}, "Array update operations not allowed on encrypted values"),
        ({"$set": {"ssn": [1, 2]}}, "Cannot encrypt element of type"),
    ],
)
def test_updates_the_analysis_refuses_name_the_problem(update: dict[str, Any], message: str) -> None:
    with pytest.raises(AnalysisError, match=None) as caught:
        run({"update": "people", "updates": [{"q": {}, "u": update}]})
    assert message in str(caught.value)


def test_inserting_values_no_encryption_allows_is_refused() -> None:
    with pytest.raises(AnalysisError, match="Cannot encrypt element of type: null"):
        run({"insert": "people", "documents": [{"notes": None}]})
    stamp = {"notes": Timestamp(0, 0)}
    with pytest.raises(AnalysisError, match=r"cannot supply Timestamp\(0, 0\) for an encrypted top-level field"):
        run({"insert": "people", "documents": [stamp]})


def test_validators_and_partial_indexes_must_not_name_encrypted_fields() -> None:
    with pytest.raises(AnalysisError, match="Comparison to encrypted fields not supported"):
        run({"create": "people", "validator": {"ssn": "x"}})
    with pytest.raises(AnalysisError, match="Comparison to encrypted fields not supported"):
        run({"collMod": "people", "validator": {"$and": [{"address.zip": "x"}]}})
    index = {"name": "i", "key": {"name": 1}, "partialFilterExpression": {"ssn": "x"}}
    with pytest.raises(AnalysisError, match="Comparison to encrypted fields not supported"):
        run({"createIndexes": "people", "indexes": [index]})
    assert run({"create": "people", "validator": {"name": "x"}})["result"] == {"create": "people", "validator": {"name": "x"}}


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"bsonType": "array", "properties": {"a": encrypt()}}, "Invalid schema containing the 'encrypt' keyword."),
        ({"properties": {"a": {"properties": {"b": encrypt()}}}}, "Invalid schema containing the 'encrypt' keyword."),
        ({"properties": {"a": {**encrypt(), "bsonType": "object"}}}, "'encrypt' cannot be used in conjunction with 'bsonType'"),
        ({"anyOf": [{"properties": {"a": encrypt()}}]}, "Invalid schema containing the 'encrypt' keyword."),
        ({"properties": {"a": {"bsonType": "array", "items": encrypt()}}}, "Invalid schema containing the 'encrypt' keyword."),
        ({"properties": {"_id": encrypt()}}, "Invalid schema containing the 'encrypt' keyword."),
        ({"properties": {"a": encrypt(bson_type="double")}}, "Cannot use deterministic encryption for element of type: double"),
        ({"properties": {"a": encrypt(RANDOM, bson_type="minKey")}}, "Cannot encrypt element of type: minKey"),
        ({"properties": {"a": encrypt(key="no-pointer")}}, "must be an array of one UUID or a JSON pointer"),
        ({"properties": {"a": encrypt(key="/owner")}}, "cannot take its keyId from a JSON pointer"),
        ({"properties": {"a": encrypt(key=[KEY, OTHER_KEY])}}, "must be an array of one UUID"),
        ({"properties": {"a": {"encrypt": {"keyId": [KEY]}}}}, "needs an algorithm"),
        ({"required": ["a"], "properties": {"a": {"bsonType": "string"}}}, "keyword 'required' is only allowed with a remote schema"),
    ],
)
def test_schemas_the_analysis_refuses_name_the_problem(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(AnalysisError) as caught:
        parse_schema(schema, remote=False)
    assert message in str(caught.value)


def test_a_remote_schema_may_hold_validation_keywords() -> None:
    schema = {"bsonType": "object", "required": ["a"], "properties": {"a": encrypt(), "b": {"minLength": 2}}}
    parsed = parse_schema(schema, remote=True)
    assert [found.path for found in parsed.encrypted_fields()] == ["a"]


@pytest.mark.parametrize(
    ("command", "construct"),
    [
        ({"aggregate": "people", "pipeline": [{"$group": {"_id": "$ssn"}}], "cursor": {}}, "aggregation stage $group"),
        ({"find": "people", "filter": {"$expr": {"$eq": ["$ssn", "1"]}}}, "top-level match expression $expr"),
        ({"find": "people", "filter": {"address": {"zip": "1"}}}, "'address', which holds encrypted fields"),
        ({"find": "people", "filter": {}, "sort": {"ssn": 1}}, "a sort on 'ssn'"),
        ({"update": "people", "updates": [{"q": {}, "u": [{"$set": {"a": 1}}]}]}, "an update pipeline"),
        ({"mapReduce": "people"}, "the command 'mapReduce'"),
        ({"insert": "people", "encryptionInformation": {}}, "Queryable Encryption (encryptionInformation)"),
        (
            {"bulkWrite": 1, "ops": [], "nsInfo": [{"ns": "db.people", "encryptionInformation": {}}]},
            "Queryable Encryption (encryptionInformation)",
        ),
    ],
)
def test_what_the_stand_in_cannot_analyse_is_named(command: dict[str, Any], construct: str) -> None:
    with pytest.raises(UnsupportedConstruct) as caught:
        run(command)
    assert construct in caught.value.construct
    reply = caught.value.reply()
    assert reply["code"] == 115 and reply["errmsg"].startswith(UNSUPPORTED_PREFIX)


def test_patterned_properties_with_encryption_are_named_unsupported() -> None:
    with pytest.raises(UnsupportedConstruct, match="'encrypt' under 'patternProperties'"):
        parse_schema({"patternProperties": {"^a": encrypt()}}, remote=True)


def test_bson_type_names_tell_int_from_long() -> None:
    values: list[Any] = [1, 1 << 40, Int64(1), 1.5, "s", None, True, [], {}]
    assert [bson_type_name(value) for value in values] == [
        "int", "long", "long", "double", "string", "null", "bool", "array", "object",
    ]  # fmt: skip
