"""The unified format's matching rules and special operators."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from spec_runner.unified.entities import EntityMap
from spec_runner.unified.errors import EntityError, MatchError, UnifiedTestError
from spec_runner.unified.matcher import (
    MISSING,
    Matcher,
    bson_type,
    contains_placeholder,
    documents_equal,
    match,
    resolve_placeholders,
)

from mongio.bson.binary import Binary
from mongio.bson.code import Code
from mongio.bson.decimal128 import Decimal128
from mongio.bson.deprecated import DBPointer, Symbol, Undefined
from mongio.bson.int64 import Int64
from mongio.bson.minmax import MaxKey, MinKey
from mongio.bson.objectid import ObjectId
from mongio.bson.regex import Regex
from mongio.bson.timestamp import Timestamp


def fails(expected: Any, actual: Any, **kwargs: Any) -> MatchError:
    with pytest.raises(MatchError) as info:
        match(expected, actual, **kwargs)
    return info.value


# --- documents and arrays ---------------------------------------------------------------------------------


def test_root_document_allows_extra_keys_nested_does_not() -> None:
    match({"x": 1}, {"x": 1, "y": 1})
    error = fails({"x": {"y": 1}}, {"x": {"y": 1, "z": 1}})
    assert error.path == "x"
    assert "'z'" in str(error)


def test_non_root_document_rejects_extra_keys() -> None:
    fails({"x": 1}, {"x": 1, "y": 1}, root=False)


def test_missing_key_fails_with_its_path() -> None:
    error = fails({"x": 1, "y": 1}, {"x": 1})
    assert error.path == "y"
    assert "missing" in str(error)


def test_key_order_does_not_matter() -> None:
    match({"x": 1, "y": {"a": 1, "b": 2}}, {"y": {"b": 2, "a": 1}, "x": 1})


def test_path_names_nested_array_elements() -> None:
    expected = {"cursor": {"firstBatch": [{"_id": 1, "x": 1}]}}
    actual = {"cursor": {"firstBatch": [{"_id": 1, "x": 2}]}}
    error = fails(expected, actual, path="reply")
    assert error.path == "reply.cursor.firstBatch[0].x"
    assert "expected 1, got 2" in str(error)


def test_arrays_must_have_the_same_length() -> None:
    match([1, 2, 3], [1, 2, 3])
    assert "3 elements, got 4" in str(fails([1, 2, 3], [1, 2, 3, 4]))
    fails([1, 2, 3], [1, 2])
    fails([1], {"0": 1})


def test_array_elements_are_nested_unless_root_elements() -> None:
    expected = [{"x": 1}, {"x": 2}]
    actual = [{"x": 1, "y": 1}, {"x": 2, "y": 2}]
    fails(expected, actual)  # e.g. distinct
    match(expected, actual, root_elements=True)  # e.g. find


def test_expected_document_needs_actual_document() -> None:
    assert "expected a document" in str(fails({"x": 1}, [1]))
    fails({"x": 1}, "x")


# --- scalars and numbers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "actual"),
    [(1, 1.0), (1.0, 1), (1, Int64(1)), (Int64(5), 5), (2.5, 2.5), (Int64(2**40), float(2**40))],
)
def test_numbers_match_across_int_long_and_double(expected: Any, actual: Any) -> None:
    match(expected, actual)


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        (1, 1.5),
        (1, True),
        (True, 1),
        (1, "1"),
        (Decimal128("1"), 1),
        (1, Decimal128("1")),
        (Decimal128("1.0"), Decimal128("1.00")),
        (None, 0),
        ("a", "b"),
    ],
)
def test_values_of_other_types_or_values_do_not_match(expected: Any, actual: Any) -> None:
    fails(expected, actual)


def test_nan_matches_nan() -> None:
    match(float("nan"), float("nan"))
    fails(float("nan"), 1.0)
    fails(1.0, float("nan"))


def test_null_matches_null_but_not_a_missing_key() -> None:
    match({"x": None}, {"x": None})
    fails({"x": None}, {})


def test_decimal_matches_equal_decimal() -> None:
    match(Decimal128("3.14159"), Decimal128("3.14159"))


def test_binary_matches_by_subtype_and_bytes() -> None:
    match(Binary(b"\x01\x02", 0), b"\x01\x02")
    match(Binary(b"\x01\x02", 4), Binary(b"\x01\x02", 4))
    fails(Binary(b"\x01\x02", 4), Binary(b"\x01\x02", 0))
    value = uuid.uuid4()
    match(Binary(value.bytes, 4), value)


def test_datetimes_match_in_utc_to_the_millisecond() -> None:
    aware = datetime(2020, 1, 1, 12, 0, 0, 123000, tzinfo=UTC)
    match(aware, aware.replace(tzinfo=None))
    fails(aware, datetime(2020, 1, 1, 12, 0, 0, 124000, tzinfo=UTC))


def test_other_bson_types_match_equal_values() -> None:
    oid = ObjectId()
    match(oid, oid)
    fails(oid, ObjectId())
    match(Timestamp(1, 2), Timestamp(1, 2))
    fails(Timestamp(1, 2), Timestamp(1, 3))
    match(MinKey(), MinKey())
    fails(MinKey(), MaxKey())


# --- $$exists ---------------------------------------------------------------------------------------------


def test_exists() -> None:
    match({"x": {"$$exists": True}}, {"x": None})
    match({"x": {"$$exists": False}}, {"y": 1})
    assert "missing" in str(fails({"x": {"$$exists": True}}, {}))
    error = fails({"a": {"x": {"$$exists": False}}}, {"a": {"x": 1}})
    assert error.path == "a.x"


def test_exists_needs_a_boolean() -> None:
    with pytest.raises(UnifiedTestError):
        match({"x": {"$$exists": 1}}, {"x": 1})


# --- $$type -----------------------------------------------------------------------------------------------

TYPED_VALUES: list[tuple[str, Any]] = [
    ("double", 1.5),
    ("string", "s"),
    ("object", {"a": 1}),
    ("array", [1]),
    ("binData", Binary(b"x", 0)),
    ("binData", b"x"),
    ("undefined", Undefined()),
    ("objectId", ObjectId()),
    ("bool", False),
    ("date", datetime(2020, 1, 1, tzinfo=UTC)),
    ("null", None),
    ("regex", Regex("^a", "i")),
    ("dbPointer", DBPointer("db.coll", ObjectId())),
    ("javascript", Code("x = 1")),
    ("symbol", Symbol("s")),
    ("javascriptWithScope", Code("x = y", {"y": 1})),
    ("int", 5),
    ("timestamp", Timestamp(1, 1)),
    ("long", Int64(5)),
    ("long", 2**40),
    ("decimal", Decimal128("1.5")),
    ("minKey", MinKey()),
    ("maxKey", MaxKey()),
]


@pytest.mark.parametrize(
    ("alias", "value"), TYPED_VALUES, ids=[f"{a}-{i}" for i, (a, _) in enumerate(TYPED_VALUES)]
)
def test_type_aliases(alias: str, value: Any) -> None:
    assert bson_type(value) == alias
    match({"x": {"$$type": alias}}, {"x": value})
    other = "string" if alias != "string" else "int"
    fails({"x": {"$$type": other}}, {"x": value})


@pytest.mark.parametrize("value", [5, Int64(5), 2.5, Decimal128("2.5")])
def test_type_number_alias_covers_the_four_numerics(value: Any) -> None:
    match({"$$type": "number"}, value)


@pytest.mark.parametrize("value", ["5", True, None, [1]])
def test_type_number_alias_rejects_non_numbers(value: Any) -> None:
    fails({"$$type": "number"}, value)


def test_type_list_of_aliases() -> None:
    match({"getMore": {"$$type": ["int", "long"]}}, {"getMore": Int64(7)})
    match({"getMore": {"$$type": ["int", "long"]}}, {"getMore": 7})
    fails({"getMore": {"$$type": ["int", "long"]}}, {"getMore": "7"})


def test_type_of_array_does_not_look_at_elements() -> None:
    match({"$$type": "array"}, ["a", 1])
    fails({"$$type": "string"}, ["a"])


def test_type_needs_the_key() -> None:
    assert "missing" in str(fails({"x": {"$$type": "null"}}, {}))


def test_unknown_type_alias_is_a_test_error() -> None:
    with pytest.raises(UnifiedTestError):
        match({"$$type": "integer"}, 1)


# --- $$unsetOrMatches -------------------------------------------------------------------------------------


def test_unset_or_matches() -> None:
    match({"insertedId": {"$$unsetOrMatches": 2}}, {})
    match({"insertedId": {"$$unsetOrMatches": 2}}, {"insertedId": 2})
    error = fails({"insertedId": {"$$unsetOrMatches": 2}}, {"insertedId": 3})
    assert error.path == "insertedId"


def test_unset_or_matches_keeps_root_status() -> None:
    expected = {"$$unsetOrMatches": {"deletedCount": 0}}
    match(expected, MISSING)
    match(expected, {"deletedCount": 0, "extra": 1})  # still the root document
    fails({"x": {"$$unsetOrMatches": {"a": 1}}}, {"x": {"a": 1, "b": 2}})  # nested stays nested


def test_unset_or_matches_evaluates_inner_operators() -> None:
    match({"$$unsetOrMatches": {"insertedId": {"$$unsetOrMatches": 2}}}, {})
    fails({"x": {"$$unsetOrMatches": {"$$type": "string"}}}, {"x": 1})


# --- $$lte ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("actual", [1, 1.0, 0.0, Int64(-3)])
def test_lte_accepts_smaller_or_equal_numbers(actual: Any) -> None:
    match({"x": {"$$lte": 1}}, {"x": actual})


@pytest.mark.parametrize("actual", [1.1, 2, Int64(5), "0", None])
def test_lte_rejects_larger_or_non_numbers(actual: Any) -> None:
    fails({"x": {"$$lte": 1}}, {"x": actual})


def test_lte_needs_the_key() -> None:
    fails({"x": {"$$lte": 1}}, {})


# --- $$matchesHexBytes ------------------------------------------------------------------------------------


def test_matches_hex_bytes() -> None:
    match({"$$matchesHexBytes": "12ab"}, b"\x12\xab")
    match({"$$matchesHexBytes": "12AB"}, Binary(b"\x12\xab", 0))
    match({"$$matchesHexBytes": ""}, b"")
    fails({"$$matchesHexBytes": "12ab"}, b"\x12\xac")
    fails({"$$matchesHexBytes": "12ab"}, 12)


@pytest.mark.parametrize("bad", ["1", "zz", 12])
def test_malformed_hex_bytes_is_a_test_error(bad: Any) -> None:
    with pytest.raises(UnifiedTestError):
        match({"$$matchesHexBytes": bad}, b"")


# --- $$matchAsDocument and $$matchAsRoot ------------------------------------------------------------------


def test_match_as_document() -> None:
    match({"json": {"$$matchAsDocument": {"x": 1, "y": 2}}}, {"json": '{ "x": 1, "y": 2 }'})
    match({"$$matchAsDocument": {"n": {"$$type": "long"}}}, '{"n": {"$numberLong": "5"}}')


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ({"x": 1, "y": "two"}, '{ "x": 1, "y": 2 }'),  # different value
        ({"x": 1, "y": {"$$exists": False}}, '{ "x": 1, "y": 2 }'),  # operators are evaluated
        ({"x": 1}, '{ "x": 1, "y": 2 }'),  # no extra fields
        ({"$$matchAsRoot": {}}, "1"),  # a scalar
        ({"$$matchAsRoot": {}}, '[ "foo" ]'),  # an array
        ({"$$matchAsRoot": {}}, '{ "x" }'),  # not JSON at all
        ({"$$matchAsRoot": {}}, '{"t": {"$timestamp": 1}}'),  # a malformed wrapper
        ({"$$matchAsRoot": {}}, '{"o": {"$oid": "xyz"}}'),
    ],
)
def test_match_as_document_failures(expected: Any, actual: str) -> None:
    fails({"json": {"$$matchAsDocument": expected}}, {"json": actual})


def test_match_as_document_names_a_truncated_log_document() -> None:
    # A log message's command cut at the max document length ends in "..." and is no longer JSON.
    error = fails({"command": {"$$matchAsDocument": {"insert": "coll"}}}, {"command": '{"insert": "coll", "docu...'})
    assert "truncated after 24 characters" in str(error)
    assert error.path == "command"
    # A string that merely fails to parse is reported as such.
    assert "cannot parse" in str(fails({"$$matchAsDocument": {}}, '{"insert"'))
    # A whole document whose last string value ends in "..." is not truncated.
    match({"$$matchAsDocument": {"s": "wait..."}}, '{"s": "wait..."}')


def test_unset_or_matches_is_refused_as_an_array_element() -> None:
    with pytest.raises(UnifiedTestError, match=r"\[1\]: \$\$unsetOrMatches cannot be used as an array element"):
        match([1, {"$$unsetOrMatches": 2}], [1, 2])
    # Inside a document that is an array element it keeps its meaning.
    match([{"a": {"$$unsetOrMatches": 2}}], [{}], root_elements=True)


def test_match_as_document_with_match_as_root_allows_extra_fields() -> None:
    match({"$$matchAsDocument": {"$$matchAsRoot": {"x": 1}}}, '{"x": 1, "y": 2}')


def test_match_as_root() -> None:
    match({"x": {"$$matchAsRoot": {"y": 2}}}, {"x": {"y": 2, "z": 3}})
    fails({"x": {"$$matchAsRoot": {"y": 3}}}, {"x": {"y": 2, "z": 3}})


# --- entity operators -------------------------------------------------------------------------------------


@pytest.fixture
def entities() -> EntityMap:
    entities = EntityMap()
    entities.add_bson("objectid0", ObjectId("5f1f2b3c4d5e6f7a8b9c0d1e"))
    entities.add_bson("doc0", {"a": 1})
    entities.add_session("session0", object(), {"id": Binary(b"\x01" * 16, 4)})
    return entities


def test_matches_entity(entities: EntityMap) -> None:
    matcher = Matcher(entities)
    matcher.match(
        [{"_id": {"$$matchesEntity": "objectid0"}}], [{"_id": ObjectId("5f1f2b3c4d5e6f7a8b9c0d1e")}]
    )
    with pytest.raises(MatchError):
        matcher.match({"_id": {"$$matchesEntity": "objectid0"}}, {"_id": ObjectId()})


def test_matches_entity_does_not_change_root_status(entities: EntityMap) -> None:
    matcher = Matcher(entities)
    matcher.match({"$$matchesEntity": "doc0"}, {"a": 1, "b": 2})
    with pytest.raises(MatchError):
        matcher.match({"x": {"$$matchesEntity": "doc0"}}, {"x": {"a": 1, "b": 2}})


def test_matches_entity_undefined_or_not_bson(entities: EntityMap) -> None:
    matcher = Matcher(entities)
    with pytest.raises(EntityError):
        matcher.match({"$$matchesEntity": "nope"}, 1)
    with pytest.raises(EntityError):
        matcher.match({"$$matchesEntity": "session0"}, 1)


def test_session_lsid(entities: EntityMap) -> None:
    matcher = Matcher(entities)
    matcher.match({"lsid": {"$$sessionLsid": "session0"}}, {"lsid": {"id": Binary(b"\x01" * 16, 4)}})
    with pytest.raises(MatchError) as info:
        matcher.match({"lsid": {"$$sessionLsid": "session0"}}, {"lsid": {"id": Binary(b"\x02" * 16, 4)}})
    assert info.value.path == "lsid"
    with pytest.raises(MatchError):
        matcher.match({"lsid": {"$$sessionLsid": "session0"}}, {})
    with pytest.raises(EntityError):
        matcher.match({"lsid": {"$$sessionLsid": "doc0"}}, {"lsid": {}})


def test_entity_operators_without_entities_are_a_test_error() -> None:
    with pytest.raises(UnifiedTestError):
        match({"$$sessionLsid": "session0"}, {})


# --- malformed expectations -------------------------------------------------------------------------------


def test_unknown_operator_is_a_test_error() -> None:
    with pytest.raises(UnifiedTestError, match=r"\$\$foo"):
        match({"x": {"$$foo": 1}}, {"x": 1})


def test_placeholder_is_not_allowed_in_expectations() -> None:
    with pytest.raises(UnifiedTestError):
        match({"x": {"$$placeholder": 1}}, {"x": 1})


def test_document_with_several_dollar_dollar_keys_is_a_plain_document() -> None:
    match({"$$a": 1, "$$b": 2}, {"$$a": 1, "$$b": 2})


def test_placeholders_are_replaced_with_their_path() -> None:
    value = {"aws": {"accessKeyId": {"$$placeholder": 1}, "region": "x"}, "list": [{"$$placeholder": 1}]}
    resolved = resolve_placeholders(value, lambda path: f"<{path}>")
    assert resolved == {"aws": {"accessKeyId": "<aws.accessKeyId>", "region": "x"}, "list": ["<list[0]>"]}
    assert contains_placeholder(value)
    assert not contains_placeholder(resolved)


def test_documents_equal_is_exact_but_ignores_key_order() -> None:
    assert documents_equal({"a": 1, "b": {"c": 1}}, {"b": {"c": 1.0}, "a": 1})
    assert not documents_equal({"a": 1}, {"a": 1, "b": 2})
    assert not documents_equal({"a": {"$$exists": True}}, {"a": 1})
